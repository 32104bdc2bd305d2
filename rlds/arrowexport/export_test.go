package arrowexport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

func repoTestdata() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..", "testdata")
}

// fixture is a store with testdata/episodes.jsonl applied, and the
// messages it was built from.
type fixture struct {
	st   *particle.Store
	msgs []*rlds.Message
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	o := particle.DefaultOptions(t.TempDir())
	o.SyncWrites = false
	st, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f, err := os.Open(filepath.Join(repoTestdata(), "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msgs []*rlds.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m, err := rlds.DecodeMessage(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	a := &rlds.Applier{Embedder: embed.NewHashing(64)}
	ctx := context.Background()
	for _, m := range msgs {
		if _, err := st.Update(ctx, func(b *particle.Batch) error { return a.Apply(ctx, b, m.MsgID(), m) }); err != nil {
			t.Fatalf("apply %s: %v", m.MsgID(), err)
		}
	}
	return &fixture{st: st, msgs: msgs}
}

// collect keeps what an export wrote, in memory.
type collect struct {
	schema *arrow.Schema
	recs   []arrow.Record
}

func (c *collect) Begin(s *arrow.Schema) error { c.schema = s; return nil }
func (c *collect) Write(rec arrow.Record) error {
	rec.Retain()
	c.recs = append(c.recs, rec)
	return nil
}

// exportBytes runs an export in format f and returns the file's bytes.
func exportBytes(t testing.TB, st *particle.Store, o Options, f Format) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(f, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), st, o, w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readBack reads a file of format f back into one record per batch (or
// row group).
func readBack(t testing.TB, f Format, b []byte) (*arrow.Schema, []arrow.Record) {
	t.Helper()
	var recs []arrow.Record
	switch f {
	case FormatArrow:
		r, err := ipc.NewFileReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.Record(i)
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
		return r.Schema(), recs
	case FormatArrowStream:
		r, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		for r.Next() {
			rec := r.Record()
			rec.Retain()
			recs = append(recs, rec)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return r.Schema(), recs
	case FormatParquet:
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := fr.GetRecordReader(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		for rr.Next() {
			rec := rr.Record()
			rec.Retain()
			recs = append(recs, rec)
		}
		return rr.Schema(), recs
	}
	t.Fatalf("format %s", f)
	return nil, nil
}

var singleFileFormats = []Format{FormatArrow, FormatArrowStream, FormatParquet}

// decodeAll decodes every record of a table with dec.
func decodeAll[T any](t testing.TB, recs []arrow.Record, dec func(arrow.Record) ([]T, error)) []T {
	t.Helper()
	var out []T
	for _, r := range recs {
		rows, err := dec(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// sameTimes normalises every time.Time reachable in v to UTC so that
// reflect.DeepEqual compares instants.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func normEdge(e particle.Edge) particle.Edge {
	e.Scope.TimeRange.From, e.Scope.TimeRange.To = utc(e.Scope.TimeRange.From), utc(e.Scope.TimeRange.To)
	e.Belief.UpdatedAt, e.Salience.LastUpdated = utc(e.Belief.UpdatedAt), utc(e.Salience.LastUpdated)
	e.ValidFrom, e.ValidTo, e.CreatedAt, e.UpdatedAt = utc(e.ValidFrom), utc(e.ValidTo), utc(e.CreatedAt), utc(e.UpdatedAt)
	e.Provenance = slices.Clone(e.Provenance)
	for i := range e.Provenance {
		e.Provenance[i].ObservedAt = utc(e.Provenance[i].ObservedAt)
	}
	if len(e.Provenance) == 0 {
		e.Provenance = nil
	}
	return e
}

func normNode(n particle.Node) particle.Node {
	n.Belief.UpdatedAt, n.CreatedAt, n.UpdatedAt = utc(n.Belief.UpdatedAt), utc(n.CreatedAt), utc(n.UpdatedAt)
	return n
}

func normEpisode(e particle.Episode) particle.Episode {
	e.StartTime, e.EndTime = utc(e.StartTime), utc(e.EndTime)
	return e
}

// storeRecords reads every node, edge and episode of the default
// namespace from a snapshot, by id.
func storeRecords(t testing.TB, st *particle.Store) (map[string]particle.Node, map[string]particle.Edge, map[string]particle.Episode) {
	t.Helper()
	nodes, edges, eps := map[string]particle.Node{}, map[string]particle.Edge{}, map[string]particle.Episode{}
	err := st.Snapshot(context.Background(), func(sn *particle.Snapshot) error {
		ns := particle.DefaultNamespace
		if err := sn.Nodes(ns, func(n *particle.Node) error { nodes[n.ID] = normNode(*n); return nil }); err != nil {
			return err
		}
		if err := sn.Edges(ns, func(e *particle.Edge) error { edges[e.ID] = normEdge(*e); return nil }); err != nil {
			return err
		}
		return sn.Episodes(ns, func(e *particle.Episode) error { eps[e.ID] = normEpisode(*e); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes, edges, eps
}

func TestRoundTripGraphTables(t *testing.T) {
	fx := newFixture(t)
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	nodes, edges, eps := storeRecords(t, fx.st)
	for _, f := range singleFileFormats {
		t.Run(string(f), func(t *testing.T) {
			o := Options{Now: now, BatchRows: 7} // several batches
			o.Table = TableNodes
			_, recs := readBack(t, f, exportBytes(t, fx.st, o, f))
			gotNodes := decodeAll(t, recs, DecodeNodes)
			if len(gotNodes) != len(nodes) {
				t.Errorf("%d nodes, want %d", len(gotNodes), len(nodes))
			}
			for _, n := range gotNodes {
				if want := nodes[n.ID]; !reflect.DeepEqual(n, want) {
					t.Errorf("node %s:\n got %+v\nwant %+v", n.ID, n, want)
				}
			}

			o.Table = TableEdges
			_, recs = readBack(t, f, exportBytes(t, fx.st, o, f))
			gotEdges := decodeAll(t, recs, DecodeEdges)
			if len(gotEdges) != len(edges) {
				t.Errorf("%d edges, want %d", len(gotEdges), len(edges))
			}
			for _, e := range gotEdges {
				want := edges[e.ID]
				if !reflect.DeepEqual(e.Edge, want) {
					t.Errorf("edge %s:\n got %+v\nwant %+v", e.ID, e.Edge, want)
				}
				if d := DecayedSalience(&want, now); e.SalienceDecayed != d || d >= want.Salience.Score {
					t.Errorf("edge %s decayed salience %v, want %v (< score %v)", e.ID, e.SalienceDecayed, d, want.Salience.Score)
				}
			}

			o.Table = TableEpisodes
			_, recs = readBack(t, f, exportBytes(t, fx.st, o, f))
			gotEps := decodeAll(t, recs, DecodeEpisodes)
			if len(gotEps) != len(eps) {
				t.Errorf("%d episodes, want %d", len(gotEps), len(eps))
			}
			for _, e := range gotEps {
				if want := eps[e.ID]; !reflect.DeepEqual(e, want) {
					t.Errorf("episode %s:\n got %+v\nwant %+v", e.ID, e, want)
				}
			}
		})
	}
}

// wantSteps is what the steps table must hold for the fixture's
// messages: every step, numbers as their column's dtype gives them back.
func wantSteps(msgs []*rlds.Message) map[string]rlds.Step {
	out := map[string]rlds.Step{}
	for _, m := range msgs {
		if m.Step == nil {
			continue
		}
		s := *m.Step
		s.Annotations, s.Metadata = nil, nil
		s.Timestamp = utc(s.Timestamp)
		for _, fs := range []rlds.Features{s.Observation, s.Action} {
			for k, t := range fs {
				t.Data = slices.Clone(t.Data)
				for i, x := range t.Data {
					if t.DType == rlds.Float32 {
						t.Data[i] = float64(float32(x))
					}
				}
				fs[k] = t
			}
		}
		out[stepKey(m.EpisodeID, s.Index)] = s
	}
	return out
}

func stepKey(ep string, idx int) string { return fmt.Sprintf("%s/%d", ep, idx) }

func TestRoundTripSteps(t *testing.T) {
	fx := newFixture(t)
	want := wantSteps(fx.msgs)
	_, edges, _ := storeRecords(t, fx.st)
	for _, f := range singleFileFormats {
		t.Run(string(f), func(t *testing.T) {
			o := Options{Table: TableSteps, BatchRows: 5}
			schema, recs := readBack(t, f, exportBytes(t, fx.st, o, f))
			if i := schema.FieldIndices("observation.state"); len(i) != 1 || !arrow.TypeEqual(schema.Field(i[0]).Type, arrow.FixedSizeListOf(7, arrow.PrimitiveTypes.Float32)) {
				t.Errorf("observation.state: %v", schema)
			}
			rows := decodeAll(t, recs, DecodeSteps)
			if len(rows) != len(want) {
				t.Fatalf("%d steps, want %d", len(rows), len(want))
			}
			withContext := 0
			for _, r := range rows {
				w, ok := want[stepKey(r.EpisodeID, r.Step.Index)]
				if !ok {
					t.Errorf("unexpected step %s/%d", r.EpisodeID, r.Step.Index)
					continue
				}
				if !reflect.DeepEqual(r.Step, w) {
					t.Errorf("step %s/%d:\n got %+v\nwant %+v", r.EpisodeID, r.Step.Index, r.Step, w)
				}
				// Every context edge has this step in its provenance.
				for i, id := range r.EdgeIDs {
					e := edges[id]
					if !slices.ContainsFunc(e.Provenance, func(p particle.Provenance) bool {
						return p.EpisodeID == r.EpisodeID && p.StepIndex != nil && *p.StepIndex == r.Step.Index
					}) {
						t.Errorf("step %s/%d context edge %s is not from this step", r.EpisodeID, r.Step.Index, id)
					}
					if r.EdgeConfidence[i] != e.Confidence {
						t.Errorf("edge %s confidence %v, want %v", id, r.EdgeConfidence[i], e.Confidence)
					}
				}
				if len(r.EdgeIDs) > 0 {
					withContext++
				}
			}
			if withContext == 0 {
				t.Error("no step has graph context")
			}
		})
	}
}
