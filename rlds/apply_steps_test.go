package rlds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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

// testdataMessages reads testdata/episodes.jsonl.
func testdataMessages(t *testing.T) []*rlds.Message {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*rlds.Message
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		m, err := rlds.DecodeMessage(line)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// storeContents is what a store holds, record by record, as JSON, and
// its stored steps' bytes. Edges are named by their ends and predicate
// (an edge's id is made of the time it was created), and the wall-clock
// times of writing are left out.
func storeContents(t *testing.T, s *particle.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	edgeNames := map[string]string{}
	put := func(k string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
		delete(fields, "created_at")
		delete(fields, "updated_at")
		if belief, ok := fields["belief"].(map[string]any); ok && !strings.HasPrefix(k, "edge") {
			delete(belief, "updated_at")
		}
		b, err = json.Marshal(fields)
		out[k] = string(b)
		return err
	}
	err := s.Snapshot(context.Background(), func(sn *particle.Snapshot) error {
		ns := particle.DefaultNamespace
		if err := sn.Nodes(ns, func(n *particle.Node) error { return put("node "+n.ID, n) }); err != nil {
			return err
		}
		if err := sn.Edges(ns, func(e *particle.Edge) error {
			name := fmt.Sprintf("edge %s %s %s %s", e.Source, e.Type, e.Predicate(), e.Target)
			edgeNames[e.ID] = name
			return put(name, e)
		}); err != nil {
			return err
		}
		return sn.Episodes(ns, func(ep *particle.Episode) error {
			if err := put("episode "+ep.ID, ep); err != nil {
				return err
			}
			return sn.Steps(ns, ep.ID, func(idx int, raw []byte) error {
				out[fmt.Sprintf("step %s/%d", ep.ID, idx)] = string(raw)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range out {
		for id, name := range edgeNames {
			v = strings.ReplaceAll(v, id, name)
		}
		out[k] = v
	}
	return out
}

// applyInBatches applies msgs, n messages a transaction.
func applyInBatches(t *testing.T, s *particle.Store, msgs []*rlds.Message, n int) error {
	t.Helper()
	ap := &rlds.Applier{}
	ctx := context.Background()
	for len(msgs) > 0 {
		part := msgs[:min(n, len(msgs))]
		msgs = msgs[len(part):]
		if _, err := s.Update(ctx, func(b *particle.Batch) error {
			for _, m := range part {
				if err := ap.Apply(ctx, b, m.MsgID(), m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// A steps message stores what its steps sent one by one store; sent
// again, or regrouped, it changes nothing; and one whose step does not
// apply is refused whole, naming the step, with nothing stored lost.
func TestStepsMessageAppliesAsItsSteps(t *testing.T) {
	msgs := testdataMessages(t)
	one := openStore(t, t.TempDir())
	defer one.Close()
	if err := applyInBatches(t, one, msgs, 5); err != nil {
		t.Fatal(err)
	}
	want := storeContents(t, one)

	grouped := openStore(t, t.TempDir())
	defer grouped.Close()
	byFour := rlds.GroupSteps(msgs, 4)
	if len(byFour) >= len(msgs) {
		t.Fatalf("grouping by four left %d messages of %d", len(byFour), len(msgs))
	}
	if err := applyInBatches(t, grouped, byFour, 2); err != nil {
		t.Fatal(err)
	}
	got := storeContents(t, grouped)
	if !maps.Equal(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s:\n got %s\nwant %s", k, got[k], v)
			}
		}
		t.Fatalf("the steps messages stored %d records, one by one %d", len(got), len(want))
	}
	if err := applyInBatches(t, grouped, rlds.GroupSteps(msgs, 3), 3); err != nil {
		t.Fatal(err)
	}
	if again := storeContents(t, grouped); !maps.Equal(again, want) {
		t.Fatal("the episodes regrouped and sent again changed what is stored")
	}

	// A new episode: its step 0 applies, its step 1 changes a feature's
	// shape.
	var last *rlds.Message
	for _, m := range msgs {
		if m.Kind == rlds.KindStep {
			last = m
		}
	}
	bad := &rlds.Message{Kind: rlds.KindSteps, Agent: last.Agent, EpisodeID: "ep-new", Steps: []rlds.Step{*last.Step, *last.Step}}
	bad.Steps[0].Index, bad.Steps[1].Index = 0, 1
	bad.Steps[1].Observation = rlds.Features{"state": {DType: rlds.Float32, Shape: []int{1}, Data: []float64{1}}}
	err := applyInBatches(t, grouped, []*rlds.Message{bad}, 1)
	if !errors.Is(err, rlds.ErrShape) || !strings.Contains(err.Error(), "steps[1] (index 1)") {
		t.Fatalf("err = %v, want ErrShape naming steps[1] (index 1)", err)
	}
	if after := storeContents(t, grouped); !maps.Equal(after, want) {
		t.Fatal("a refused steps message changed what is stored")
	}
}

// A batch writes an episode's record once however many of its steps it
// holds (particle.Written.EpisodeRecords): four steps of one episode
// write one, one step of each of four episodes write four.
func TestABatchWritesAnEpisodesRecordOnce(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	step := func(i int) rlds.Step {
		return rlds.Step{Index: i, Timestamp: t0.Add(time.Duration(i) * time.Second), Annotations: &rlds.Annotations{Entities: []string{"red cup"}}}
	}
	oneEpisode := []*rlds.Message{{Kind: rlds.KindSteps, Agent: "robot-1", EpisodeID: "ep-a",
		Steps: []rlds.Step{step(0), step(1), step(2), step(3)}}}
	var fourEpisodes []*rlds.Message
	for _, ep := range []string{"ep-b", "ep-c", "ep-d", "ep-e"} {
		st := step(0)
		fourEpisodes = append(fourEpisodes, &rlds.Message{Kind: rlds.KindStep, Agent: "robot-1", EpisodeID: ep, Step: &st})
	}
	for _, c := range []struct {
		msgs []*rlds.Message
		want int64
	}{{oneEpisode, 1}, {fourEpisodes, 4}} {
		before := s.Written()
		if err := applyInBatches(t, s, c.msgs, len(c.msgs)); err != nil {
			t.Fatal(err)
		}
		if got := s.Written().Sub(before).EpisodeRecords; got != c.want {
			t.Errorf("%d messages in one batch wrote %d episode records, want %d", len(c.msgs), got, c.want)
		}
	}
}
