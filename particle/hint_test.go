package particle

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// TestHintsChangeNothing hints every seq of a store with edges, beyond
// its last and at the largest, and checks that the records read the same
// after: a hint makes no code and moves no record.
func TestHintsChangeNothing(t *testing.T) {
	s := openFactsStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	_, err := s.Update(ctx, func(b *Batch) error {
		ids, err := putThings(b, DefaultNamespace, 4)
		if err != nil {
			return err
		}
		for i := range 8 {
			_, _, err := b.Observe(Observation{Namespace: DefaultNamespace, Source: ids[i%2], Target: ids[2+i%2], Type: EdgeAssertion,
				Predicate: "near", Confidence: 0.5, At: t0.Add(time.Duration(i) * time.Minute), Decay: wave.DecayExp, HalfLife: time.Hour,
				Provenance: Provenance{EpisodeID: "ep-1", Agent: "ur5-alpha", ObservedAt: t0.Add(time.Duration(i) * time.Minute)},
				Embed:      func() ([]float32, error) { return []float32{1, float32(i), 0, 0}, nil }})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.syncCoder() // it makes the commit's codes: not while the hints run
	// What the hints might touch, read without making codes (EmbeddingCode
	// would): the facts and salience records, and every code chunk's
	// presence and states.
	read := func(r Reader, last uint64) []any {
		var out []any
		for seq := range last {
			out = append(out, r.EdgeFactsBySeq(seq), r.EdgeSalienceBySeq(seq), r.EdgeBySeq(seq), r.NodeBySeq(seq))
		}
		for k := range r.v.codes.chunks {
			ch := r.v.codes.chunks[k].Load()
			out = append(out, ch != nil)
			if ch != nil {
				for i := range ch.state {
					out = append(out, ch.state[i].Load())
				}
			}
		}
		return out
	}
	s.Read(func(r Reader) {
		if r.v.codes.dim == 0 {
			t.Fatal("no codes to hint")
		}
		last := uint64(len(r.v.edgeFacts) + 2*codeChunkSeqs)
		before := read(r, last)
		for seq := range last {
			r.HintEdgeFacts(seq)
			r.HintEdgeScore(seq)
			r.HintBySeq(seq, seq)
			r.HintEmbeddingCode(seq)
		}
		r.HintEdgeFacts(math.MaxUint64)
		r.HintEdgeScore(math.MaxUint64)
		r.HintBySeq(math.MaxUint64, math.MaxUint64)
		r.HintEmbeddingCode(math.MaxUint64)
		Reader{}.HintEdgeFacts(1)
		Reader{}.HintEdgeScore(1)
		Reader{}.HintBySeq(1, 1)
		Reader{}.HintEmbeddingCode(1)
		after := read(r, last)
		if len(after) != len(before) {
			t.Fatalf("%d records after hints, %d before", len(after), len(before))
		}
		for i := range before {
			if after[i] != before[i] {
				t.Fatalf("record %d: %v after hints, %v before", i, after[i], before[i])
			}
		}
	})
	checkFacts(t, s.Store, "hinted")
}
