package rlds_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// openStore opens the store in dir, fsync off.
func openStore(t testing.TB, dir string) *particle.Store {
	t.Helper()
	o := particle.DefaultOptions(dir)
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStepCountsOnceWhateverTheOrder applies an episode's steps out of
// order, some twice under new message ids, in one batch and across
// batches and a reopen: each stored step counts once, and every one
// reads back.
func TestStepCountsOnceWhateverTheOrder(t *testing.T) {
	dir := t.TempDir()
	open := func() *particle.Store { return openStore(t, dir) }
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

// TestStepRedeliveryChangesNothing applies annotated steps, one of them
// out of order, and then every one again (under new message ids, in the
// same batch and in later ones, across a reopen): the stored step is the
// applied mark of a step's message, so the repeats reinforce nothing, and
// no applied-message record is written for a step (an episode's start
// and end keep theirs).
func TestStepRedeliveryChangesNothing(t *testing.T) {
	dir := t.TempDir()
	open := func() *particle.Store { return openStore(t, dir) }
	ap := &rlds.Applier{}
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	msg := 0
	step := func(i int) *rlds.Message {
		return &rlds.Message{Kind: rlds.KindStep, Agent: "robot-1", EpisodeID: "ep-1", Step: &rlds.Step{
			Index: i, Timestamp: t0.Add(time.Duration(i) * time.Second),
			Annotations: &rlds.Annotations{Entities: []string{"red cup"}, Tool: "gripper"}}}
	}
	apply := func(s *particle.Store, ms ...*rlds.Message) {
		t.Helper()
		if _, err := s.Update(ctx, func(b *particle.Batch) error {
			for _, m := range ms {
				msg++
				id := fmt.Sprint("m", msg) // a step's repeat comes under a new id
				if m.Kind != rlds.KindStep {
					id = m.MsgID()
				}
				if err := ap.Apply(ctx, b, id, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	evidence := func(s *particle.Store) map[string]int {
		out := map[string]int{}
		s.Read(func(r particle.Reader) {
			r.Edges(func(e *particle.Edge) bool {
				out[e.Source+" "+e.Predicate()+" "+e.Target] = e.Evidence
				return true
			})
		})
		return out
	}
	s := open()
	start := &rlds.Message{Kind: rlds.KindEpisodeStart, Agent: "robot-1", EpisodeID: "ep-1", Start: &rlds.EpisodeStart{StartTime: t0}}
	apply(s, start, step(0), step(3), step(3)) // 3 twice in one batch
	apply(s, step(1), step(0))                 // 1 out of order (below the count), 0 again
	want := evidence(s)
	if len(want) == 0 {
		t.Fatal("no edges")
	}
	for k, n := range want {
		if strings.Contains(k, "uses") && n != 3 {
			t.Fatalf("%s: evidence %d after steps 0, 3, 1, want 3", k, n)
		}
	}
	apply(s, step(1), step(3), start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	apply(s, step(0), step(1), step(3))
	if got := evidence(s); !maps.Equal(got, want) {
		t.Errorf("after the repeats: evidence %v, want %v", got, want)
	}
	if got := s.Counts().Steps; got != 3 {
		t.Errorf("%d steps counted, want 3", got)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 1 {
		t.Errorf("%d applied-message records, want 1 (the episode's start)", rep.Applied)
	}
}
