package arrowexport

import (
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// EdgeRow is one row of the edges table: the edge as stored, and its
// salience decayed to the export time.
type EdgeRow struct {
	particle.Edge
	SalienceDecayed float64
}

// DecayedSalience is e's salience decayed from its last update to now,
// with e's own decay function and half-life.
func DecayedSalience(e *particle.Edge, now time.Time) float64 {
	d := wave.Decay{Fn: wave.DecayFn(e.Salience.DecayFn), HalfLife: time.Duration(e.Salience.HalfLifeS * float64(time.Second))}
	return d.Apply(e.Salience.Score, e.Salience.LastUpdated, now)
}

func nodeColumns(dim int) []column[particle.Node] {
	type N = particle.Node
	return []column[N]{
		strCol("id", func(n *N) *string { return &n.ID }),
		strCol("namespace", func(n *N) *string { return &n.Namespace }),
		strCol("type", func(n *N) *string { return (*string)(&n.Type) }),
		strCol("name", func(n *N) *string { return &n.Name }),
		strListCol("aliases", func(n *N) *[]string { return &n.Aliases }),
		strListCol("tags", func(n *N) *[]string { return &n.Attributes.Tags }),
		strListCol("cms_span_ids", func(n *N) *[]string { return &n.Attributes.CMSSpanIDs }),
		strListCol("rlds_episode_ids", func(n *N) *[]string { return &n.Attributes.RLDSEpisodeIDs }),
		mapCol("props", func(n *N) *map[string]string { return &n.Attributes.Props }),
		embCol("embedding", dim, func(n *N) *[]float32 { return &n.Embedding }),
		f64Col("belief_score", func(n *N) *float64 { return &n.Belief.Score }),
		f64Col("belief_alpha", func(n *N) *float64 { return &n.Belief.Alpha }),
		f64Col("belief_beta", func(n *N) *float64 { return &n.Belief.Beta }),
		f64Col("belief_evidence", func(n *N) *float64 { return &n.Belief.Evidence }),
		timeCol("belief_updated_at", func(n *N) *time.Time { return &n.Belief.UpdatedAt }),
		timeCol("created_at", func(n *N) *time.Time { return &n.CreatedAt }),
		timeCol("updated_at", func(n *N) *time.Time { return &n.UpdatedAt }),
		u64Col("seq", func(n *N) *uint64 { return &n.Seq }),
	}
}

// provenanceType is the element of the edges table's provenance list.
var provenanceType = arrow.StructOf(
	arrow.Field{Name: "episode_id", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "step_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	arrow.Field{Name: "cms_span_id", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "agent", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "observed_at", Type: timestampType, Nullable: true},
)

func provenanceCol(name string) column[EdgeRow] {
	return column[EdgeRow]{
		field: arrow.Field{Name: name, Type: arrow.ListOf(provenanceType)},
		put: func(b array.Builder, e *EdgeRow) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for _, p := range e.Provenance {
				sb.Append(true)
				appendOptString(sb.FieldBuilder(0).(*array.StringBuilder), p.EpisodeID)
				ib := sb.FieldBuilder(1).(*array.Int64Builder)
				if p.StepIndex != nil {
					ib.Append(int64(*p.StepIndex))
				} else {
					ib.AppendNull()
				}
				appendOptString(sb.FieldBuilder(2).(*array.StringBuilder), p.CMSSpanID)
				appendOptString(sb.FieldBuilder(3).(*array.StringBuilder), p.Agent)
				appendTime(sb.FieldBuilder(4).(*array.TimestampBuilder), p.ObservedAt)
			}
		},
		get: func(a arrow.Array, i int, e *EdgeRow) error {
			l := a.(*array.List)
			lo, hi := l.ValueOffsets(i)
			st := l.ListValues().(*array.Struct)
			ep, idx, span, agent := st.Field(0).(*array.String), st.Field(1).(*array.Int64), st.Field(2).(*array.String), st.Field(3).(*array.String)
			at := st.Field(4).(*array.Timestamp)
			for j := int(lo); j < int(hi); j++ {
				p := particle.Provenance{EpisodeID: optString(ep, j), CMSSpanID: optString(span, j), Agent: optString(agent, j), ObservedAt: timeAt(at, j)}
				if idx.IsValid(j) {
					k := int(idx.Value(j))
					p.StepIndex = &k
				}
				e.Provenance = append(e.Provenance, p)
			}
			return nil
		},
	}
}

func appendOptString(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
		return
	}
	b.Append(s)
}

func optString(a *array.String, i int) string {
	if a.IsNull(i) {
		return ""
	}
	return a.Value(i)
}

// assertionCols are predicate (null when the edge has no assertion) and
// value.
func assertionCols() []column[EdgeRow] {
	return []column[EdgeRow]{{
		field: arrow.Field{Name: "predicate", Type: arrow.BinaryTypes.String, Nullable: true},
		put: func(b array.Builder, e *EdgeRow) {
			if e.Assertion == nil {
				b.AppendNull()
				return
			}
			b.(*array.StringBuilder).Append(e.Assertion.Predicate)
		},
		get: func(a arrow.Array, i int, e *EdgeRow) error {
			if a.IsValid(i) {
				e.Assertion = &particle.Assertion{Predicate: a.(*array.String).Value(i)}
			}
			return nil
		},
	}, {
		field: arrow.Field{Name: "value", Type: arrow.BinaryTypes.String, Nullable: true},
		put: func(b array.Builder, e *EdgeRow) {
			if e.Assertion == nil || e.Assertion.Value == "" {
				b.AppendNull()
				return
			}
			b.(*array.StringBuilder).Append(e.Assertion.Value)
		},
		get: func(a arrow.Array, i int, e *EdgeRow) error {
			if a.IsValid(i) && e.Assertion != nil {
				e.Assertion.Value = a.(*array.String).Value(i)
			}
			return nil
		},
	}}
}

func edgeColumns(dim int) []column[EdgeRow] {
	type E = EdgeRow
	cols := []column[E]{
		strCol("id", func(e *E) *string { return &e.ID }),
		strCol("namespace", func(e *E) *string { return &e.Namespace }),
		strCol("source", func(e *E) *string { return &e.Source }),
		strCol("target", func(e *E) *string { return &e.Target }),
		strCol("type", func(e *E) *string { return (*string)(&e.Type) }),
	}
	cols = append(cols, assertionCols()...)
	return append(cols,
		timeCol("scope_from", func(e *E) *time.Time { return &e.Scope.TimeRange.From }),
		timeCol("scope_to", func(e *E) *time.Time { return &e.Scope.TimeRange.To }),
		optStrCol("scope_location", func(e *E) *string { return &e.Scope.Location }),
		strListCol("scope_audience", func(e *E) *[]string { return &e.Scope.Audience }),
		provenanceCol("provenance"),
		intCol("evidence", func(e *E) *int { return &e.Evidence }),
		f64Col("confidence", func(e *E) *float64 { return &e.Confidence }),
		f64Col("belief_score", func(e *E) *float64 { return &e.Belief.Score }),
		f64Col("belief_alpha", func(e *E) *float64 { return &e.Belief.Alpha }),
		f64Col("belief_beta", func(e *E) *float64 { return &e.Belief.Beta }),
		f64Col("belief_evidence", func(e *E) *float64 { return &e.Belief.Evidence }),
		timeCol("belief_updated_at", func(e *E) *time.Time { return &e.Belief.UpdatedAt }),
		embCol("embedding", dim, func(e *E) *[]float32 { return &e.Embedding }),
		f64Col("salience_score", func(e *E) *float64 { return &e.Salience.Score }),
		f64Col("salience_decayed", func(e *E) *float64 { return &e.SalienceDecayed }),
		strCol("salience_decay_fn", func(e *E) *string { return &e.Salience.DecayFn }),
		f64Col("salience_half_life_s", func(e *E) *float64 { return &e.Salience.HalfLifeS }),
		timeCol("salience_last_updated", func(e *E) *time.Time { return &e.Salience.LastUpdated }),
		strListCol("allow_roles", func(e *E) *[]string { return &e.Policy.AllowRoles }),
		strListCol("deny_roles", func(e *E) *[]string { return &e.Policy.DenyRoles }),
		optStrCol("policy_sensitivity", func(e *E) *string { return (*string)(&e.Policy.Sensitivity) }),
		optStrCol("policy_subject", func(e *E) *string { return &e.Policy.Subject }),
		optBoolCol("policy_portable", func(e *E) **bool { return &e.Policy.Portable }),
		optStrCol("policy_origin", func(e *E) *string { return &e.Policy.Origin }),
		timeCol("valid_from", func(e *E) *time.Time { return &e.ValidFrom }),
		timeCol("valid_to", func(e *E) *time.Time { return &e.ValidTo }),
		strCol("status", func(e *E) *string { return (*string)(&e.Status) }),
		optStrCol("superseded_by", func(e *E) *string { return &e.SupersededBy }),
		timeCol("ended_at", func(e *E) *time.Time { return &e.EndedAt }),
		strListCol("contradicts", func(e *E) *[]string { return &e.Contradicts }),
		timeCol("created_at", func(e *E) *time.Time { return &e.CreatedAt }),
		timeCol("updated_at", func(e *E) *time.Time { return &e.UpdatedAt }),
		u64Col("seq", func(e *E) *uint64 { return &e.Seq }),
	)
}

func episodeColumns(dim int) []column[particle.Episode] {
	type P = particle.Episode
	return []column[P]{
		strCol("id", func(e *P) *string { return &e.ID }),
		strCol("namespace", func(e *P) *string { return &e.Namespace }),
		strCol("agent", func(e *P) *string { return &e.Agent }),
		timeCol("start_time", func(e *P) *time.Time { return &e.StartTime }),
		timeCol("end_time", func(e *P) *time.Time { return &e.EndTime }),
		optStrCol("location", func(e *P) *string { return &e.Location }),
		optStrCol("language_instruction", func(e *P) *string { return &e.LanguageInstruction }),
		optBoolCol("success", func(e *P) **bool { return &e.Outcome.Success }),
		optF64Col("reward_sum", func(e *P) **float64 { return &e.Outcome.RewardSum }),
		intCol("steps", func(e *P) *int { return &e.Steps }),
		boolCol("ended", func(e *P) *bool { return &e.Ended }),
		strListCol("nodes", func(e *P) *[]string { return &e.Nodes }),
		strListCol("edges", func(e *P) *[]string { return &e.Edges }),
		embCol("embedding", dim, func(e *P) *[]float32 { return &e.Embedding }),
		jsonCol("metadata", func(e *P) *map[string]any { return &e.Metadata }),
		mapCol("features", func(e *P) *map[string]string { return &e.Features }),
		optStrCol("last_tool", func(e *P) *string { return &e.LastTool }),
		strCol("node_id", func(e *P) *string { return &e.NodeID }),
		u64Col("seq", func(e *P) *uint64 { return &e.Seq }),
	}
}

// schemaDim is the embedding width a record's schema declares (0 for a
// variable-width list).
func schemaDim(s *arrow.Schema) (int, error) {
	idx := s.FieldIndices("embedding")
	if len(idx) != 1 {
		return 0, fmt.Errorf("%w: no embedding column", ErrSchema)
	}
	if fl, ok := s.Field(idx[0]).Type.(*arrow.FixedSizeListType); ok {
		return int(fl.Len()), nil
	}
	return 0, nil
}

// DecodeNodes reads a record batch of the nodes table back into nodes.
func DecodeNodes(rec arrow.Record) ([]particle.Node, error) {
	dim, err := schemaDim(rec.Schema())
	if err != nil {
		return nil, err
	}
	return decodeRows(nodeColumns(dim), rec)
}

// DecodeEdges reads a record batch of the edges table back into rows.
func DecodeEdges(rec arrow.Record) ([]EdgeRow, error) {
	dim, err := schemaDim(rec.Schema())
	if err != nil {
		return nil, err
	}
	return decodeRows(edgeColumns(dim), rec)
}

// DecodeEpisodes reads a record batch of the episodes table back into
// episodes.
func DecodeEpisodes(rec arrow.Record) ([]particle.Episode, error) {
	dim, err := schemaDim(rec.Schema())
	if err != nil {
		return nil, err
	}
	return decodeRows(episodeColumns(dim), rec)
}

// embeddingDim picks the schema width from a snapshot's counts of
// embedding lengths: the one non-zero length, or 0 (a list) if there
// are several or none.
func embeddingDim(dims map[int]int64) int {
	var ds []int
	for d := range dims {
		if d > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) != 1 {
		return 0
	}
	return ds[0]
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
