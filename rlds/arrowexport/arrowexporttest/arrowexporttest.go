// Package arrowexporttest reads exports back for tests: files of every
// single-file format into Arrow records, and a store's records as an
// export must show them, so that a test can compare every value.
package arrowexporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
)

// SingleFileFormats are the formats that write one file.
var SingleFileFormats = []arrowexport.Format{arrowexport.FormatArrow, arrowexport.FormatArrowStream, arrowexport.FormatParquet}

// Export runs an export of st in format f and returns the file's bytes.
func Export(tb testing.TB, st *particle.Store, o arrowexport.Options, f arrowexport.Format) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := arrowexport.NewWriter(f, &buf)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := arrowexport.Run(context.Background(), st, o, w); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Read reads a file of format f back, one record per batch (or row
// group), with arrow/go's own readers.
func Read(tb testing.TB, f arrowexport.Format, b []byte) (*arrow.Schema, []arrow.Record) {
	tb.Helper()
	var recs []arrow.Record
	keep := func(rec arrow.Record) { rec.Retain(); recs = append(recs, rec) }
	switch f {
	case arrowexport.FormatArrow:
		r, err := ipc.NewFileReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Close()
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.Record(i)
			if err != nil {
				tb.Fatal(err)
			}
			keep(rec)
		}
		return r.Schema(), recs
	case arrowexport.FormatArrowStream:
		r, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Release()
		for r.Next() {
			keep(r.Record())
		}
		if err := r.Err(); err != nil {
			tb.Fatal(err)
		}
		return r.Schema(), recs
	case arrowexport.FormatParquet:
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatal(err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
		if err != nil {
			tb.Fatal(err)
		}
		rr, err := fr.GetRecordReader(context.Background(), nil, nil)
		if err != nil {
			tb.Fatal(err)
		}
		defer rr.Release()
		for rr.Next() {
			keep(rr.Record())
		}
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			tb.Fatalf("read parquet: %v", err)
		}
		// The schema's metadata is the file's key-value metadata.
		kv := pf.MetaData().KeyValueMetadata()
		var keys, vals []string
		for i, k := range kv.Keys() {
			if k != "ARROW:schema" {
				keys, vals = append(keys, k), append(vals, kv.Values()[i])
			}
		}
		md := arrow.NewMetadata(keys, vals)
		return arrow.NewSchema(rr.Schema().Fields(), &md), recs
	}
	tb.Fatalf("format %s has no single-file reader", f)
	return nil, nil
}

// Decode decodes every record with dec.
func Decode[T any](tb testing.TB, recs []arrow.Record, dec func(arrow.Record) ([]T, error)) []T {
	tb.Helper()
	var out []T
	for _, r := range recs {
		rows, err := dec(r)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// Rows counts the rows of recs.
func Rows(recs []arrow.Record) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// NormNode, NormEdge and NormEpisode put every time in UTC, as an
// export gives them back, so that reflect.DeepEqual compares instants.
func NormNode(n particle.Node) particle.Node {
	n.Belief.UpdatedAt, n.CreatedAt, n.UpdatedAt = utc(n.Belief.UpdatedAt), utc(n.CreatedAt), utc(n.UpdatedAt)
	return n
}

// NormEdge is NormNode for an edge.
func NormEdge(e particle.Edge) particle.Edge {
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

// NormEpisode is NormNode for an episode.
func NormEpisode(e particle.Episode) particle.Episode {
	e.StartTime, e.EndTime = utc(e.StartTime), utc(e.EndTime)
	return e
}

// Records are a store's nodes, edges and episodes by id, normalised.
type Records struct {
	Nodes    map[string]particle.Node
	Edges    map[string]particle.Edge
	Episodes map[string]particle.Episode
}

// StoreRecords reads every node, edge and episode of namespace ns from a
// snapshot of st.
func StoreRecords(tb testing.TB, st *particle.Store, ns string) Records {
	tb.Helper()
	r := Records{map[string]particle.Node{}, map[string]particle.Edge{}, map[string]particle.Episode{}}
	err := st.Snapshot(context.Background(), func(sn *particle.Snapshot) error {
		if err := sn.Nodes(ns, func(n *particle.Node) error { r.Nodes[n.ID] = NormNode(*n); return nil }); err != nil {
			return err
		}
		if err := sn.Edges(ns, func(e *particle.Edge) error { r.Edges[e.ID] = NormEdge(*e); return nil }); err != nil {
			return err
		}
		return sn.Episodes(ns, func(e *particle.Episode) error { r.Episodes[e.ID] = NormEpisode(*e); return nil })
	})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// CheckGraph compares an export of table (nodes, edges or episodes) with
// want, value by value: the same ids, every field equal, and decayed
// salience as the exported schema's time gives it.
func CheckGraph(tb testing.TB, table arrowexport.Table, schema *arrow.Schema, recs []arrow.Record, want Records) {
	tb.Helper()
	now := exportedAt(tb, schema)
	var got, wantN int
	switch table {
	case arrowexport.TableNodes:
		rows := Decode(tb, recs, arrowexport.DecodeNodes)
		got, wantN = len(rows), len(want.Nodes)
		for _, n := range rows {
			if w, ok := want.Nodes[n.ID]; !ok || !reflect.DeepEqual(n, w) {
				tb.Errorf("node %s:\n got %+v\nwant %+v", n.ID, n, w)
			}
		}
	case arrowexport.TableEdges:
		rows := Decode(tb, recs, arrowexport.DecodeEdges)
		got, wantN = len(rows), len(want.Edges)
		for _, e := range rows {
			w, ok := want.Edges[e.ID]
			if !ok || !reflect.DeepEqual(e.Edge, w) {
				tb.Errorf("edge %s:\n got %+v\nwant %+v", e.ID, e.Edge, w)
			}
			if d := arrowexport.DecayedSalience(&w, now); e.SalienceDecayed != d {
				tb.Errorf("edge %s decayed salience %v, want %v", e.ID, e.SalienceDecayed, d)
			}
		}
	case arrowexport.TableEpisodes:
		rows := Decode(tb, recs, arrowexport.DecodeEpisodes)
		got, wantN = len(rows), len(want.Episodes)
		for _, e := range rows {
			if w, ok := want.Episodes[e.ID]; !ok || !reflect.DeepEqual(e, w) {
				tb.Errorf("episode %s:\n got %+v\nwant %+v", e.ID, e, w)
			}
		}
	default:
		tb.Fatalf("CheckGraph: table %s", table)
	}
	if got != wantN {
		tb.Errorf("%s: %d rows, want %d", table, got, wantN)
	}
}

// exportedAt is the export time a schema records.
func exportedAt(tb testing.TB, s *arrow.Schema) time.Time {
	tb.Helper()
	v, ok := s.Metadata().GetValue("ctxgraph.exported_at")
	if !ok {
		tb.Fatalf("schema without ctxgraph.exported_at: %v", s.Metadata())
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// StepKey names a step: episode/index.
func StepKey(episode string, idx int) string { return fmt.Sprintf("%s/%d", episode, idx) }

// WantSteps is what a steps export of msgs must hold, by StepKey: every
// step without its annotations and metadata, numbers as the column's
// dtype gives them back, images as their bytes.
func WantSteps(schema *arrow.Schema, msgs []*rlds.Message) map[string]rlds.Step {
	fixed := map[string]bool{}
	for _, f := range schema.Fields() {
		if name, ok := f.Metadata.GetValue(arrowexport.MetaFeature); ok {
			_, fixed[name] = f.Metadata.GetValue(arrowexport.MetaShape)
		}
	}
	out := map[string]rlds.Step{}
	for _, m := range msgs {
		if m.Step == nil {
			continue
		}
		s := *m.Step
		s.Annotations, s.Metadata = nil, nil
		s.Timestamp = utc(s.Timestamp)
		for g, fs := range map[string]*rlds.Features{"observation": &s.Observation, "action": &s.Action} {
			c := rlds.Features{}
			for k, t := range *fs {
				t.Data = slices.Clone(t.Data)
				for i, x := range t.Data {
					if t.DType == rlds.Float32 {
						t.Data[i] = float64(float32(x))
					}
				}
				switch {
				case t.DType == rlds.Image || t.DType == rlds.Bytes:
					t.Shape, t.Ref, t.Encoding = nil, "", rlds.ImageEncoding(t.Bytes)
				case !fixed[rlds.FeatureName(g, k)] || len(t.Shape) == 0:
					t.Shape = nil
				}
				if len(t.Data) == 0 {
					t.Data = nil
				}
				c[k] = t
			}
			if len(c) == 0 {
				c = nil
			}
			*fs = c
		}
		out[StepKey(m.EpisodeID, s.Index)] = s
	}
	return out
}

// CheckSteps compares a steps export with the messages it came from,
// value by value, and checks that every context edge of a step is an
// edge of edges observed at that step, with its confidence. It returns
// how many steps have graph context.
func CheckSteps(tb testing.TB, schema *arrow.Schema, recs []arrow.Record, msgs []*rlds.Message, edges map[string]particle.Edge) int {
	tb.Helper()
	want := WantSteps(schema, msgs)
	rows := Decode(tb, recs, arrowexport.DecodeSteps)
	if len(rows) != len(want) {
		tb.Errorf("%d steps, want %d", len(rows), len(want))
	}
	withContext := 0
	for _, r := range rows {
		w, ok := want[StepKey(r.EpisodeID, r.Step.Index)]
		if !ok {
			tb.Errorf("unexpected step %s/%d", r.EpisodeID, r.Step.Index)
			continue
		}
		if !reflect.DeepEqual(r.Step, w) {
			tb.Errorf("step %s/%d:\n got %+v\nwant %+v", r.EpisodeID, r.Step.Index, r.Step, w)
		}
		for i, id := range r.EdgeIDs {
			e, ok := edges[id]
			if !ok || !slices.ContainsFunc(e.Provenance, func(p particle.Provenance) bool {
				return p.EpisodeID == r.EpisodeID && p.StepIndex != nil && *p.StepIndex == r.Step.Index
			}) {
				tb.Errorf("step %s/%d: context edge %s was not observed at this step", r.EpisodeID, r.Step.Index, id)
				continue
			}
			if r.EdgeConfidence[i] != e.Confidence {
				tb.Errorf("step %s/%d: edge %s confidence %v, want %v", r.EpisodeID, r.Step.Index, id, r.EdgeConfidence[i], e.Confidence)
			}
			if !slices.Contains(r.NodeIDs, e.Source) || !slices.Contains(r.NodeIDs, e.Target) {
				tb.Errorf("step %s/%d: context nodes %v lack the ends of edge %s", r.EpisodeID, r.Step.Index, r.NodeIDs, id)
			}
		}
		if len(r.EdgeIDs) > 0 {
			withContext++
		}
	}
	return withContext
}
