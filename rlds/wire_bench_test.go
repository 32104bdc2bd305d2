package rlds

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkDecodeMessage decodes a step as a controller sends it: two
// small vectors, an encoded image, annotations.
func BenchmarkDecodeMessage(b *testing.B) {
	img := make([]byte, 3000)
	for i := range img {
		img[i] = byte(i * 7)
	}
	conf := 0.9
	m := &Message{Kind: KindStep, Agent: "robot-01", EpisodeID: "ep-000001", Step: &Step{
		Index: 3, Timestamp: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		Observation: Features{
			"state": {DType: Float32, Shape: []int{7}, Data: []float64{0.12, -0.5, 0.33, 1.25, -0.75, 0.5, 0.01}},
			"image": {DType: Image, Encoding: "jpeg", Bytes: img},
		},
		Action:              Features{"": {DType: Float32, Shape: []int{7}, Data: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}}},
		LanguageInstruction: "move the part to the bin",
		Annotations: &Annotations{Entities: []string{"part 12", "bin 3"}, Tool: "gripper",
			Events: []Event{{Subject: "part 12", Predicate: "next_to", Object: "bin 3", Confidence: &conf}}},
	}}
	raw, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	delete(m.Step.Observation, "image")
	noImage, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	// The short form controllers write by hand: plain arrays.
	short := []byte(`{"kind":"step","agent":"robot-01","episode_id":"ep-000001","step":{"index":3,"timestamp":"2026-06-01T00:00:00Z","observation":{"state":[0.12,-0.5,0.33,1.25,-0.75,0.5,0.01]},"action":[0.1,0.2,0.3,0.4,0.5,0.6,0.7],"reward":0,"discount":1,"is_first":false,"is_last":false,"is_terminal":false,"annotations":{"entities":["part 12","bin 3"],"tool":"gripper"}}}`)
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"full", raw}, {"full-no-image", noImage}, {"short", short}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeMessage(c.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
