package rlds

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// fleetStep is a step as the bench workload's controllers send it: two
// state/action tensors, annotations and two events, each with a 384-d
// embedding of whole numbers.
func fleetStep(tb testing.TB) []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	vec := func() []float32 {
		v := make([]float32, 384)
		for i := range v {
			v[i] = float32(rng.IntN(255) - 127)
		}
		return v
	}
	conf := 0.47
	m := &Message{Kind: KindStep, Agent: "robot-000", EpisodeID: "ep-000000", Step: &Step{
		Index: 0, Timestamp: time.Date(2026, 10, 1, 2, 3, 34, 846e6, time.UTC),
		Observation: Features{"state": {DType: Float32, Shape: []int{7}, Data: []float64{-0.498, -1.483, -0.717, 0.169, 0.885, 0.579, 0.74}}},
		Action:      Features{"": {DType: Float32, Shape: []int{7}, Data: []float64{-0.056, 0.097, 0.1, -0.122, -0.005, 0.163, 0.108}}},
		Discount:    1, IsFirst: true, LanguageInstruction: "wipe the grey cable 0 with the grey bowl 0",
		Annotations: &Annotations{Entities: []string{"black towel 0", "grey cup 1"}, Tool: "parallel gripper", Events: []Event{
			{Subject: "grey marker 2", Predicate: "inside", Object: "red lid 1", EdgeType: "assertion", Confidence: &conf, Embedding: vec()},
			{Subject: "red towel 2", Predicate: "holds", Object: "grey marker 2", EdgeType: "assertion", Confidence: &conf, Embedding: vec()},
		}},
	}}
	raw, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// BenchmarkDecodeFleetStep compares DecodeMessage (the fast decoder)
// with encoding/json on the bench workload's steps, and DecodeMessage
// on the same step in msgpack.
func BenchmarkDecodeFleetStep(b *testing.B) {
	raw := fleetStep(b)
	_, mp := toMsgpack(b, raw)
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Message, error)
		raw    []byte
	}{{"fast", DecodeMessage, raw}, {"encoding-json", decodeJSON, raw}, {"msgpack", DecodeMessage, mp}} {
		b.Run(c.name, func(b *testing.B) {
			raw := c.raw
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
