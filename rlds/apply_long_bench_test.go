package rlds_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// longEpisode builds the messages of one robot's episode of n steps,
// each step naming an object in view and two new relations with their
// own 384-dimension vectors: an episode whose edge list grows by about
// two ids a step.
func longEpisode(n int) []*rlds.Message {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	seen := make([]string, 60)
	for i := range seen {
		seen[i] = fmt.Sprintf("object %d", i)
	}
	msgs := []*rlds.Message{{Agent: "robot-1", EpisodeID: "ep-long", Kind: rlds.KindEpisodeStart,
		Start: &rlds.EpisodeStart{StartTime: t0, Location: "lab 1", LanguageInstruction: "tidy the lab"}}}
	for idx := range n {
		an := &rlds.Annotations{Entities: []string{seen[r.IntN(len(seen))]}, Tool: "gripper"}
		for range 2 {
			c := 0.9
			vec := make([]float32, 384)
			for j := range vec {
				vec[j] = float32(r.NormFloat64())
			}
			an.Events = append(an.Events, rlds.Event{Subject: seen[r.IntN(len(seen))], Predicate: fmt.Sprintf("moved %d", idx),
				Object: seen[r.IntN(len(seen))], EdgeType: "assertion", Confidence: &c, Embedding: vec})
		}
		m := &rlds.Message{Agent: "robot-1", EpisodeID: "ep-long", Kind: rlds.KindStep,
			Step: &rlds.Step{Index: idx, Timestamp: t0.Add(time.Duration(idx) * 100 * time.Millisecond),
				Observation: rlds.Features{"state": {DType: rlds.Float32, Shape: []int{2}, Data: []float64{1, 2}}},
				Discount:    1, Annotations: an}}
		m.NormalizeEmbeddings()
		msgs = append(msgs, m)
	}
	return msgs
}

// BenchmarkApplyLongEpisode commits one 4,000-step episode, fsync off,
// in batches of 10 steps (a robot's second at 10 Hz) and of 1 step (a
// step committed as it arrives, as a daemon does at a steady rate), and
// reports what a step costs in the first and the last quarter of the
// episode: CPU (every goroutine's), bytes allocated, and the episode
// bytes written (its record and the chunks of its edge list). Work per
// step that grows with the episode shows as a last quarter dearer than
// the first.
//
//	go test ./rlds -run '^$' -bench ApplyLongEpisode -benchtime 1x
func BenchmarkApplyLongEpisode(b *testing.B) {
	const steps = 4000
	msgs := longEpisode(steps)
	ctx := context.Background()
	ap := &rlds.Applier{Embedder: embed.NewHashing(384)}
	for _, per := range []int{10, 1} {
		b.Run(fmt.Sprintf("batch=%d", per), func(b *testing.B) {
			for b.Loop() {
				s := openStore(b, b.TempDir())
				var cpu [2]float64
				var written, alloc [2]uint64
				var ms runtime.MemStats
				for i := 0; i < len(msgs); i += per {
					chunk := msgs[i:min(len(msgs), i+per)]
					q := -1
					switch {
					case i < steps/4:
						q = 0
					case i >= steps*3/4:
						q = 1
					}
					runtime.ReadMemStats(&ms)
					c0, w0, a0 := cpuSeconds(), s.Written(), ms.TotalAlloc
					if _, err := s.Update(ctx, func(bt *particle.Batch) error {
						for j, m := range chunk {
							if err := ap.Apply(ctx, bt, fmt.Sprintf("m%d", i+j), m); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					if q >= 0 {
						runtime.ReadMemStats(&ms)
						cpu[q] += cpuSeconds() - c0
						written[q] += uint64(s.Written().Sub(w0).Episodes)
						alloc[q] += ms.TotalAlloc - a0
					}
				}
				s.Close()
				quarter := float64(steps / 4)
				b.ReportMetric(cpu[0]*1e6/quarter, "cpu-µs/step-first-quarter")
				b.ReportMetric(cpu[1]*1e6/quarter, "cpu-µs/step-last-quarter")
				b.ReportMetric(float64(alloc[0])/quarter, "alloc-B/step-first-quarter")
				b.ReportMetric(float64(alloc[1])/quarter, "alloc-B/step-last-quarter")
				b.ReportMetric(float64(written[0])/quarter, "episode-B/step-first-quarter")
				b.ReportMetric(float64(written[1])/quarter, "episode-B/step-last-quarter")
			}
		})
	}
}

// TestLongEpisodeListsEachEdgeOnce applies a long episode whose steps
// keep re-observing the relations of its first steps (its edge list is
// then indexed, particle.Episode.HasEdge), forgets one of its objects
// half way (which removes edges from the middle of the list), and goes
// on: the episode must list each of its edges exactly once, and every
// edge that names it.
func TestLongEpisodeListsEachEdgeOnce(t *testing.T) {
	const steps = 400
	msgs := longEpisode(steps)
	for i, m := range msgs[1:] {
		// Each step also re-observes one relation of the first steps.
		first := msgs[1+i%5].Step.Annotations.Events[0]
		first.Embedding = nil
		m.Step.Annotations.Events = append(m.Step.Annotations.Events, first)
	}
	s := openStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	ap := &rlds.Applier{Embedder: embed.NewHashing(384)}
	for i := 0; i < len(msgs); i += 10 {
		if i == len(msgs)/2 {
			var victim string
			s.Read(func(r particle.Reader) {
				n := r.LookupAny(particle.DefaultNamespace, "object 7")
				if n == nil {
					t.Fatal("no node for object 7")
				}
				victim = n.ID
			})
			if _, err := s.Forget(ctx, victim, "test", "a removal from the middle", nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Update(ctx, func(b *particle.Batch) error {
			for j, m := range msgs[i:min(len(msgs), i+10)] {
				if err := ap.Apply(ctx, b, fmt.Sprintf("m%d", i+j), m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.Read(func(r particle.Reader) {
		ep := r.Episode(particle.DefaultNamespace, "ep-long")
		seen := map[string]bool{}
		for _, id := range ep.Edges {
			if seen[id] {
				t.Fatalf("edge %s listed twice", id)
			}
			seen[id] = true
		}
		if len(ep.Edges) < 300 {
			t.Fatalf("only %d edges listed: the index was not used", len(ep.Edges))
		}
		r.Edges(func(e *particle.Edge) bool {
			for _, p := range e.Provenance {
				if p.EpisodeID == "ep-long" && !seen[e.ID] {
					t.Errorf("edge %s names the episode and is not listed", e.ID)
					return false
				}
			}
			return true
		})
	})
}
