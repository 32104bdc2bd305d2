package rlds_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// fleetSteps builds n annotated steps as a fleet lives them: 20 robots,
// episodes of 50 steps, each in a scene of 8 objects (of a vocabulary of
// 2,000) and 2 tools (of 40), seeing 2 objects per step, and an event
// every fifth step.
func fleetSteps(n int) []*rlds.Message {
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	out := make([]*rlds.Message, 0, n)
	for i := 0; i < n; i++ {
		ep, idx := i/50, i%50
		agent := fmt.Sprintf("robot-%02d", ep%20)
		obj := func(k int) string { return fmt.Sprintf("part %d", (ep*7919+k*104729)%2000) }
		a, b := obj(idx%8), obj((idx+3)%8)
		an := &rlds.Annotations{Entities: []string{a, b}, Tool: fmt.Sprintf("tool %d", (ep+idx/25)%40)}
		if idx%5 == 0 {
			conf := 0.9
			an.Events = []rlds.Event{{Subject: a, Predicate: "next_to", Object: b, Confidence: &conf}}
		}
		out = append(out, &rlds.Message{Kind: rlds.KindStep, Agent: agent, EpisodeID: fmt.Sprintf("ep-%06d", ep), Step: &rlds.Step{
			Index: idx, Timestamp: t0.Add(time.Duration(i) * 100 * time.Millisecond),
			Observation:         rlds.Features{"state": {DType: rlds.Float32, Shape: []int{7}, Data: []float64{1, 2, 3, 4, 5, 6, 7}}},
			Action:              rlds.Features{"": {DType: rlds.Float32, Shape: []int{7}, Data: []float64{.1, .2, .3, .4, .5, .6, .7}}},
			LanguageInstruction: "move the part to the bin",
			Annotations:         an,
		}})
	}
	return out
}

// BenchmarkApplySteps measures the apply-and-commit path of ingest (no
// NATS): batches of 256 annotated steps, one Badger transaction each,
// fsync off as in a bulk load (sync_writes is measured by ctxgraph bench).
func BenchmarkApplySteps(b *testing.B) {
	const batch = 256
	msgs := fleetSteps(batch * 64)
	o := particle.DefaultOptions(b.TempDir())
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ap := &rlds.Applier{Embedder: embed.NewHashing(384)}
	ctx := context.Background()
	b.ResetTimer()
	steps := 0
	for i := 0; b.Loop(); i++ {
		chunk := msgs[(i*batch)%len(msgs):][:batch]
		round := i / (len(msgs) / batch)
		if _, err := s.Update(ctx, func(bt *particle.Batch) error {
			for _, m := range chunk {
				if err := ap.Apply(ctx, bt, fmt.Sprintf("%s/%d/r%d", m.EpisodeID, m.Step.Index, round), m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		steps += batch
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
