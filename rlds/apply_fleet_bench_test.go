package rlds_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// mediumFleet builds n wire messages shaped like the medium bench preset
// (cmd/internal/bench): 50 robots streaming at once (one message per
// robot per round), episodes of 40 steps between a start and an end,
// 8 sites of 625 objects, 12 objects in view per episode, 2 of them
// annotated per step with the robot's tool, and 1.5 events per step on
// average, each a new relation carrying its own 384-dimension vector.
func mediumFleet(n int) []*rlds.Message {
	const (
		robots, sites, steps, inView, dims = 50, 8, 40, 12, 384
	)
	colours := []string{"red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "pink", "brown", "silver"}
	kinds := []string{"block", "bowl", "cup", "mug", "bottle", "can", "box", "sponge", "towel", "spoon", "fork", "plate",
		"lid", "drawer", "tray", "bin", "jar", "banana", "apple", "carrot", "marker", "screwdriver", "wrench", "hammer"}
	tools := []string{"parallel gripper", "suction cup", "soft gripper", "vacuum wand", "screwdriver bit", "wiping pad", "hook", "magnetic gripper"}
	preds := []string{"located_in", "on_top_of", "next_to", "inside", "holds", "touches", "blocks", "supports"}
	types := []string{"assertion", "assertion", "assertion", "causal", "temporal", "membership"}
	r := rand.New(rand.NewPCG(1, 2))
	name := func(site, k int) string {
		e := k*sites + site
		return fmt.Sprintf("%s %s %d", colours[e%len(colours)], kinds[e/len(colours)%len(kinds)], e/(len(colours)*len(kinds)))
	}
	type plan struct {
		id    string
		next  int
		seen  []string
		instr string
		start time.Time
		used  map[[2]int]bool
	}
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	cur := make([]*plan, robots)
	episodes := 0
	fresh := func(robot int) *plan {
		p := &plan{id: fmt.Sprintf("ep-%06d", episodes), start: t0.Add(time.Duration(episodes) * time.Minute), used: map[[2]int]bool{}}
		episodes++
		for _, k := range r.Perm(625)[:inView] {
			p.seen = append(p.seen, name(robot%sites, k))
		}
		p.instr = fmt.Sprintf("pick up the %s and put it in the %s", p.seen[0], p.seen[1])
		return p
	}
	out := make([]*rlds.Message, 0, n)
	for len(out) < n {
		for robot := range cur {
			if len(out) == n {
				break
			}
			if cur[robot] == nil {
				cur[robot] = fresh(robot)
			}
			p := cur[robot]
			m := &rlds.Message{Agent: fmt.Sprintf("robot-%03d", robot), EpisodeID: p.id}
			i := p.next
			p.next++
			switch {
			case i == 0:
				m.Kind = rlds.KindEpisodeStart
				m.Start = &rlds.EpisodeStart{StartTime: p.start, Location: fmt.Sprintf("lab %d", robot%sites),
					LanguageInstruction: p.instr, Metadata: map[string]any{"operator": "fleet-sim"}}
			case i > steps:
				ok, reward := r.Float64() < 0.8, 1.0
				m.Kind = rlds.KindEpisodeEnd
				m.End = &rlds.EpisodeEnd{EndTime: p.start.Add(steps * 100 * time.Millisecond), Success: &ok, RewardSum: &reward, Steps: steps}
				cur[robot] = nil
			default:
				idx := i - 1
				a, b := p.seen[r.IntN(inView)], p.seen[r.IntN(inView)]
				ents := []string{a}
				if a != b {
					ents = append(ents, b)
				}
				an := &rlds.Annotations{Entities: ents, Tool: tools[(robot+3*(idx*2/steps))%len(tools)]}
				events := 1
				if r.Float64() < 0.5 {
					events = 2
				}
				for range events {
					s, o := r.IntN(inView), r.IntN(inView)
					if s == o || p.used[[2]int{s, o}] {
						continue
					}
					p.used[[2]int{s, o}], p.used[[2]int{o, s}] = true, true
					c := math.Round((0.2+0.8*r.Float64())*100) / 100
					vec := make([]float32, dims)
					for j := range vec {
						vec[j] = float32(r.NormFloat64())
					}
					ev := rlds.Event{Subject: p.seen[s], Predicate: preds[r.IntN(len(preds))], Object: p.seen[o],
						EdgeType: types[r.IntN(len(types))], Confidence: &c, Embedding: vec}
					if r.Float64() < 0.08 {
						ev.DenyRoles = []string{"visitor"}
					}
					an.Events = append(an.Events, ev)
				}
				state, action := make([]float64, 7), make([]float64, 7)
				for j := range state {
					state[j], action[j] = math.Round(r.NormFloat64()*1000)/1000, math.Round(r.NormFloat64()*100)/1000
				}
				m.Kind = rlds.KindStep
				m.Step = &rlds.Step{Index: idx, Timestamp: p.start.Add(time.Duration(idx) * 100 * time.Millisecond),
					Observation: rlds.Features{"state": {DType: rlds.Float32, Shape: []int{7}, Data: state}},
					Action:      rlds.Features{"": {DType: rlds.Float32, Shape: []int{7}, Data: action}},
					Discount:    1, IsFirst: idx == 0, IsLast: idx == steps-1, LanguageInstruction: p.instr, Annotations: an}
			}
			out = append(out, m)
		}
	}
	return out
}

var errAbort = errors.New("abort")

// cpuSeconds is the process's user plus system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// report gives the wall and CPU (every goroutine's, Badger's included)
// microseconds per message since cpu0.
func report(b *testing.B, msgs int, cpu0 float64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(msgs), "µs/msg")
	b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(msgs), "cpu-µs/msg")
}

// BenchmarkApplyFleet measures the daemon's commit path on messages
// shaped like the medium preset, batches of 1024 messages (the daemon's
// ingest.batch_size until it became 2048; kept so that the figures of
// the rounds compare), fsync off.
//
//   - commit: apply, encode, Badger commit and publish, one batch after
//     another into a growing store;
//   - apply: only the apply of a batch (the transaction is then
//     dropped), on a store holding the batches before it.
func BenchmarkApplyFleet(b *testing.B) {
	const batch, batches = 1024, 16
	msgs := mediumFleet(batch * batches)
	for _, m := range msgs {
		m.NormalizeEmbeddings() // as the daemon's decoders hand them over
	}
	ctx := context.Background()
	open := func(b *testing.B) *particle.Store {
		o := particle.DefaultOptions(b.TempDir())
		o.SyncWrites = false
		s, err := particle.Open(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	ap := &rlds.Applier{Embedder: embed.NewHashing(384)}
	apply := func(bt *particle.Batch, chunk []*rlds.Message, round int) error {
		for j, m := range chunk {
			if err := ap.Apply(ctx, bt, fmt.Sprintf("%d/r%d", j, round), m); err != nil {
				return err
			}
		}
		return nil
	}
	episodes := make([]string, len(msgs))
	for i, m := range msgs {
		episodes[i] = m.EpisodeID
	}
	b.Run("commit", func(b *testing.B) {
		s := open(b)
		defer func() {
			for i, m := range msgs {
				m.EpisodeID = episodes[i]
			}
		}()
		steps, cpu0 := 0, cpuSeconds()
		for i := 0; b.Loop(); i++ {
			chunk := msgs[(i%batches)*batch:][:batch]
			if round := i / batches; round > 0 {
				// The workload again, as new episodes: a step already
				// stored is not applied twice.
				for j, m := range chunk {
					m.EpisodeID = episodes[(i%batches)*batch+j] + "-" + strconv.Itoa(round)
				}
			}
			if _, err := s.Update(ctx, func(bt *particle.Batch) error { return apply(bt, chunk, i) }); err != nil {
				b.Fatal(err)
			}
			steps += batch
		}
		report(b, steps, cpu0)
	})
	b.Run("apply", func(b *testing.B) {
		s := open(b)
		const held = batches / 2
		for i := range held {
			if _, err := s.Update(ctx, func(bt *particle.Batch) error { return apply(bt, msgs[i*batch:][:batch], i) }); err != nil {
				b.Fatal(err)
			}
		}
		steps, cpu0 := 0, cpuSeconds()
		for i := 0; b.Loop(); i++ {
			chunk := msgs[(held+i%held)*batch:][:batch]
			if _, err := s.Update(ctx, func(bt *particle.Batch) error {
				if err := apply(bt, chunk, held+i%held); err != nil {
					return err
				}
				return errAbort
			}); !errors.Is(err, errAbort) {
				b.Fatal(err)
			}
			steps += batch
		}
		report(b, steps, cpu0)
	})
}
