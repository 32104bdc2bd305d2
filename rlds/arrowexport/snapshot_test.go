package arrowexport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
)

// gate is a RecordWriter that holds the export at its first batch until
// released, counting rows.
type gate struct {
	first   chan struct{}
	release chan struct{}
	rows    int64
	err     error
}

func (g *gate) Begin(*arrow.Schema) error { return nil }

func (g *gate) Write(rec arrow.Record) error {
	if g.rows == 0 {
		close(g.first)
		<-g.release
	}
	g.rows += rec.NumRows()
	return g.err
}

// TestExportSeesOneSnapshotWhileIngestGoesOn starts an export, commits
// more steps while it is halfway, and checks that the export holds
// exactly the steps that were stored when it began.
func TestExportSeesOneSnapshotWhileIngestGoesOn(t *testing.T) {
	fx := newFixture(t)
	before := fx.st.Counts().Steps
	g := &gate{first: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := arrowexport.Run(context.Background(), fx.st, arrowexport.Options{Table: arrowexport.TableSteps, BatchRows: 2}, g)
		done <- err
	}()
	<-g.first
	a := &rlds.Applier{}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 20; i++ {
		m := &rlds.Message{Kind: rlds.KindStep, Agent: "late-robot", EpisodeID: "ep-late", Step: &rlds.Step{
			Index: i, Timestamp: t0.Add(time.Duration(i) * time.Second),
			Action: rlds.Features{"": {DType: rlds.Float32, Shape: []int{2}, Data: []float64{1, 2}}}}}
		if _, err := fx.st.Update(ctx, func(b *particle.Batch) error { return a.Apply(ctx, b, m.MsgID(), m) }); err != nil {
			t.Fatal(err)
		}
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.rows != before {
		t.Errorf("export holds %d steps; %d were stored when it began", g.rows, before)
	}
	if now := fx.st.Counts().Steps; now != before+20 {
		t.Errorf("store holds %d steps after ingest, want %d", now, before+20)
	}
}

// TestExportStopsOnWriterError ends the export with the writer's error,
// not a cancellation.
func TestExportStopsOnWriterError(t *testing.T) {
	fx := newFixture(t)
	boom := errors.New("disk full")
	g := &gate{first: make(chan struct{}), release: make(chan struct{}), err: boom}
	close(g.release)
	_, err := arrowexport.Run(context.Background(), fx.st, arrowexport.Options{Table: arrowexport.TableSteps, BatchRows: 2}, g)
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want the writer's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := arrowexport.Run(ctx, fx.st, arrowexport.Options{Table: arrowexport.TableSteps}, &gate{first: make(chan struct{}), release: make(chan struct{})}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled export: %v", err)
	}
	if _, err := arrowexport.Run(context.Background(), fx.st, arrowexport.Options{Table: "cats"}, g); !errors.Is(err, arrowexport.ErrInvalid) {
		t.Errorf("unknown table: %v", err)
	}
}
