package wave

import (
	"slices"
	"testing"
)

// TestRerankStopChangesNoHit: rescoring the candidates in order of their
// bounds and stopping once no bound left can rank finds the hits that
// rescoring every candidate finds, under Meta fields, under an Allow
// that admits most (the asks deferred to the rerank, some refused
// there) or a third, hinted or not, for k of 1 to 60; and it reads
// fewer vectors.
func TestRerankStopChangesNoHit(t *testing.T) {
	x, vecs, agents := agentsIVF(t, 29, 5)
	mostly := func(id uint64) bool { return id%20 != 7 }
	third := func(id uint64) bool { return id%3 == 1 }
	var hinted int
	hint := func(uint64) { hinted++ }
	filters := []*Filter{nil, {From: 3000, To: 3400}, {Agent: agents[2]},
		{Allow: mostly}, {Allow: mostly, Hint: hint}, {Allow: third, Hint: hint},
		{Allow: mostly, Hint: hint, Agent: agents[1], From: 2000, To: 5000}}
	defer func(e bool) { rerankEarly = e }(rerankEarly)
	var early, every SearchStats
	for fi, f := range filters {
		for _, k := range []int{1, 10, 60} {
			for qi, q := range vecs[:60] {
				var all, stopped SearchStats
				rerankEarly = false
				want := x.searchWith(q, k, f, &all)
				rerankEarly = true
				got := x.searchWith(q, k, f, &stopped)
				if !slices.Equal(got, want) {
					t.Fatalf("filter %d, k %d, query %d: %v, want %v", fi, k, qi, got, want)
				}
				if stopped.Rescored > all.Rescored {
					t.Fatalf("filter %d, k %d, query %d: %d vectors read stopping early, %d reading all", fi, k, qi, stopped.Rescored, all.Rescored)
				}
				early.Rescored += stopped.Rescored
				every.Rescored += all.Rescored
				early.Asked += stopped.Asked
				every.Asked += all.Asked
			}
		}
	}
	t.Logf("vectors read: %d stopping early, %d reading all; Allow asked %d and %d times; %d hints", early.Rescored, every.Rescored, early.Asked, every.Asked, hinted)
	if early.Rescored*10 > every.Rescored*9 {
		t.Errorf("stopping early read %d vectors, reading all %d: not a tenth fewer", early.Rescored, every.Rescored)
	}
	if hinted == 0 {
		t.Error("no candidate was hinted")
	}
}

// searchWith is x.Search(q, k, f) with f's stats counted into st.
func (x *IVF) searchWith(q []float32, k int, f *Filter, st *SearchStats) []Hit {
	var g Filter
	if f != nil {
		g = *f
	}
	g.Stats = st
	return x.Search(q, k, &g)
}

// TestHNSWRerankStopChangesNoHit: the HNSW's rerank, stopping once no
// candidate left can rank, finds the hits that rescoring every one of
// the best 4k (at least 40) finds, unfiltered and under the filtered
// recall cases (the beam search and the exact scan of a selective
// filter), for k of 1 to 60, with an id added twice (replaced: a
// tombstone and a new slot) among them.
func TestHNSWRerankStopChangesNoHit(t *testing.T) {
	h, _ := build(t, clustered(31, 4000, 32, 10), HNSWOptions{Seed: 2})
	vecs := clustered(37, 60, 32, 10)
	if err := h.Add(5, vecs[0], fixMeta(5)); err != nil { // replaces id 5
		t.Fatal(err)
	}
	defer func(e bool) { rerankEarly = e }(rerankEarly)
	filters := []*Filter{nil}
	for _, tc := range filteredCases {
		filters = append(filters, tc.f)
	}
	for fi, f := range filters {
		for _, k := range []int{1, 10, 60} {
			for qi, q := range vecs {
				rerankEarly = false
				want := h.Search(q, k, f)
				rerankEarly = true
				if got := h.Search(q, k, f); !slices.Equal(got, want) {
					t.Fatalf("filter %d, k %d, query %d: %v, want %v", fi, k, qi, got, want)
				}
			}
		}
	}
}

// TestBestDistinctKeepsEachIDsBest: bestDistinct keeps the k best scores
// of distinct ids, an id pushed again keeping its best.
func TestBestDistinctKeepsEachIDsBest(t *testing.T) {
	var b bestDistinct
	b.k = 3
	for _, p := range []Hit{{1, 0.5}, {2, 0.9}, {1, 0.7}, {3, 0.1}, {2, 0.2}, {4, 0.6}, {5, 0.05}} {
		b.push(p.ID, p.Score)
	}
	if want := []Hit{{2, 0.9}, {1, 0.7}, {4, 0.6}}; !slices.Equal(b.h, want) {
		t.Fatalf("%v, want %v", b.h, want)
	}
	if t3, ok := b.kth(); !ok || t3 != 0.6 {
		t.Fatalf("kth %v %v, want 0.6", t3, ok)
	}
	if _, ok := (&bestDistinct{k: 2, h: []Hit{{1, 1}}}).kth(); ok {
		t.Fatal("kth of one of two")
	}
}
