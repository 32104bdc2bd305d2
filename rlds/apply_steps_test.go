package rlds_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// TestStepCountsOnceWhateverTheOrder applies an episode's steps out of
// order, some twice under new message ids, in one batch and across
// batches and a reopen: each stored step counts once, and every one
// reads back.
func TestStepCountsOnceWhateverTheOrder(t *testing.T) {
	dir := t.TempDir()
	open := func() *particle.Store {
		o := particle.DefaultOptions(dir)
		o.SyncWrites = false
		s, err := particle.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ap := &rlds.Applier{}
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	msg := 0
	apply := func(s *particle.Store, idxs ...int) {
		t.Helper()
		if _, err := s.Update(ctx, func(b *particle.Batch) error {
			for _, i := range idxs {
				msg++
				m := &rlds.Message{Kind: rlds.KindStep, Agent: "robot-1", EpisodeID: "ep-1", Step: &rlds.Step{
					Index: i, Timestamp: t0.Add(time.Duration(i) * time.Second),
					Observation: rlds.Features{"state": {DType: rlds.Float32, Shape: []int{2}, Data: []float64{float64(i), 1}}}}}
				if err := ap.Apply(ctx, b, fmt.Sprint("m", msg), m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	apply(s, 3, 0, 3, 1) // 0, 1, 3; 3 twice
	apply(s, 2, 5, 1, 4) // 2, 4, 5; 1 again
	if got := s.Counts().Steps; got != 6 {
		t.Fatalf("%d steps counted, want 6", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	apply(s, 5, 7, 6, 0) // 6, 7; 5 and 0 again
	if got := s.Counts().Steps; got != 8 {
		t.Fatalf("after a reopen: %d steps counted, want 8", got)
	}
	n := 0
	if err := s.Steps(particle.DefaultNamespace, "ep-1", func(idx int, raw []byte) error {
		if idx != n {
			t.Errorf("step %d read where %d was due", idx, n)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("%d steps read back, want 8", n)
	}
}
