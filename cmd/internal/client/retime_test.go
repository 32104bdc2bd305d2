package client

import (
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// Retiming moves every timestamp of a stream by the same offset, the
// first to now, the steps of a steps message too.
func TestRetimerShiftsEveryTimestamp(t *testing.T) {
	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	msgs := []*rlds.Message{
		{Kind: rlds.KindEpisodeStart, Start: &rlds.EpisodeStart{StartTime: at(0)}},
		{Kind: rlds.KindSteps, Steps: []rlds.Step{{Index: 0, Timestamp: at(1)}, {Index: 1, Timestamp: at(1.5)}}},
		{Kind: rlds.KindStep, Step: &rlds.Step{Index: 2, Timestamp: at(2)}},
		{Kind: rlds.KindEpisodeEnd, End: &rlds.EpisodeEnd{EndTime: at(3)}},
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := Retimer{Now: func() time.Time { return now }}
	var got []time.Duration
	for _, m := range msgs {
		r.Retime(m)
	}
	got = append(got, msgs[0].Start.StartTime.Sub(now), msgs[1].Steps[0].Timestamp.Sub(now), msgs[1].Steps[1].Timestamp.Sub(now),
		msgs[2].Step.Timestamp.Sub(now), msgs[3].End.EndTime.Sub(now))
	want := []time.Duration{0, time.Second, 1500 * time.Millisecond, 2 * time.Second, 3 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("retimed offsets from now %v, want %v", got, want)
	}

	// A stream that starts with a steps message is retimed from its
	// first step.
	first := &rlds.Message{Kind: rlds.KindSteps, Steps: []rlds.Step{{Timestamp: at(5)}, {Timestamp: at(6)}}}
	r = Retimer{Now: func() time.Time { return now }}
	r.Retime(first)
	if !first.Steps[0].Timestamp.Equal(now) || !first.Steps[1].Timestamp.Equal(now.Add(time.Second)) {
		t.Fatalf("steps retimed to %v, %v", first.Steps[0].Timestamp, first.Steps[1].Timestamp)
	}
}
