package arrowexport_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
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

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func TestRoundTripGraphTables(t *testing.T) {
	fx := newFixture(t)
	want := arrowexporttest.StoreRecords(t, fx.st, particle.DefaultNamespace)
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, f := range arrowexporttest.SingleFileFormats {
		for _, table := range []arrowexport.Table{arrowexport.TableNodes, arrowexport.TableEdges, arrowexport.TableEpisodes} {
			t.Run(string(f)+"/"+string(table), func(t *testing.T) {
				o := arrowexport.Options{Table: table, Now: now, BatchRows: 7} // several batches
				schema, recs := arrowexporttest.Read(t, f, arrowexporttest.Export(t, fx.st, o, f))
				arrowexporttest.CheckGraph(t, table, schema, recs, want)
			})
		}
	}
	// A day later, decayed salience is below the stored score.
	_, recs := arrowexporttest.Read(t, arrowexport.FormatArrow, arrowexporttest.Export(t, fx.st,
		arrowexport.Options{Table: arrowexport.TableEdges, Now: now}, arrowexport.FormatArrow))
	for _, e := range arrowexporttest.Decode(t, recs, arrowexport.DecodeEdges) {
		if !(e.SalienceDecayed < e.Salience.Score) {
			t.Errorf("edge %s: decayed %v not below score %v", e.ID, e.SalienceDecayed, e.Salience.Score)
		}
	}
}

func TestRoundTripSteps(t *testing.T) {
	fx := newFixture(t)
	edges := arrowexporttest.StoreRecords(t, fx.st, particle.DefaultNamespace).Edges
	for _, f := range arrowexporttest.SingleFileFormats {
		t.Run(string(f), func(t *testing.T) {
			o := arrowexport.Options{Table: arrowexport.TableSteps, BatchRows: 5}
			schema, recs := arrowexporttest.Read(t, f, arrowexporttest.Export(t, fx.st, o, f))
			wantType := arrow.DataType(arrow.FixedSizeListOf(7, arrow.PrimitiveTypes.Float32))
			if f == arrowexport.FormatParquet { // Parquet has no fixed-size list
				wantType = arrow.ListOf(arrow.PrimitiveTypes.Float32)
			}
			if i := schema.FieldIndices("observation.state"); len(i) != 1 || !arrow.TypeEqual(schema.Field(i[0]).Type, wantType) {
				t.Errorf("observation.state: %v", schema)
			}
			if n := arrowexporttest.CheckSteps(t, schema, recs, fx.msgs, edges); n == 0 {
				t.Error("no step has graph context")
			}
		})
	}
}
