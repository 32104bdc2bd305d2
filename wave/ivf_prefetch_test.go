package wave

import (
	"slices"
	"testing"
)

// TestListPrefetchWithinItsEntries hints lists of every shape the
// search meets (empty, shorter than a block, longer than the hinted
// blocks, with spare capacity): the hints index only the list's own
// arrays, so a bound wrong by one panics here; the block verdicts read
// ahead are the summaries' own, one per block.
func TestListPrefetchWithinItsEntries(t *testing.T) {
	const dim = 384
	cb := nibbleBytes(dim)
	v := make([]float32, dim)
	v[0] = 1
	code := make([]byte, cb)
	lo, step := quantize4(v, code)
	for _, c := range []struct{ n, capacity int }{{0, 0}, {0, 8}, {1, 1}, {2, 2}, {3, 40}, {blockSize, blockSize}, {listAheadBlocks*blockSize + 5, 400}} {
		d := newListData(c.capacity, dim)
		for i := range c.n {
			// The first block timeless, the others at times 1000+i.
			var m nodeMeta
			if i >= blockSize {
				m.time, m.end = int64(1000+i), int64(1000+i)
			}
			d.set(i, ivfEntry{id: uint64(i), meta: m, lo: lo, step: step, code: code}, cb)
		}
		d.n.Store(int32(c.n))
		d.prefetchHeader()
		d.prefetchEntries(cb, false, false)
		d.prefetchEntries(cb, true, false)
		d.prefetchEntries(cb, true, true)
		for _, f := range []*Filter{{From: 1, To: 2}, {From: 1000 + blockSize, To: 1000 + blockSize + 3}, {To: 1 << 40}, {Agent: 7}} {
			mc := compileMeta(f)
			masks := d.prefetchAdmitted(&mc, cb, nil)
			if want := (c.n + blockSize - 1) / blockSize; len(masks) != want {
				t.Fatalf("n=%d: %d block verdicts, want %d", c.n, len(masks), want)
			}
			for bi, m := range masks {
				if want := mc.visit(&d.blk[bi]); m != want {
					t.Fatalf("n=%d, filter %+v: block %d verdict %#x, want %#x", c.n, *f, bi, m, want)
				}
			}
		}
		if d.len() != c.n {
			t.Fatalf("n=%d: len %d after the hints", c.n, d.len())
		}
	}
}

// agentsIVF builds an IVF (IVFOptions.Seed ivfSeed) over 6,000 clustered
// 32-d vectors (seed): every third a node, the others edges of the
// three agents it returns, each at a time of its own.
func agentsIVF(t testing.TB, seed, ivfSeed uint64) (*IVF, [][]float32, []uint32) {
	vecs := clustered(seed, 6000, 32, 12)
	agents := []uint32{AgentKey("r1"), AgentKey("r2"), AgentKey("r3")}
	meta := func(i int) Meta {
		if i%3 == 0 {
			return Meta{Kind: KindNode}
		}
		return Meta{Kind: KindEdge, Time: int64(1000 + i), End: int64(1005 + i), Agent: agents[i%len(agents)]}
	}
	x, _ := buildIVFMeta(t, vecs, IVFOptions{TrainAt: 1000, Seed: ivfSeed}, meta)
	return x, vecs, agents
}

// TestListsAheadChangesNoHit searches the same index under time windows,
// agents and none at every hinting distance: the block verdicts a search
// reads ahead and reuses (prefetchAdmitted) must give the hits it finds
// without them, so a verdict used for the wrong list or block fails here;
// and so must the codes a list's scan hints ahead of the entry it scores
// (entriesAhead), at any distance.
func TestListsAheadChangesNoHit(t *testing.T) {
	x, vecs, agents := agentsIVF(t, 83, 3)
	filters := []*Filter{nil, {From: 4000, To: 4040}, {To: 1100, Kinds: []Kind{KindEdge}},
		{From: 6990}, {From: 1, To: 2}, {Agent: agents[1]}, {Agent: agents[2], From: 2000, To: 2600}}
	defer func(a, e int) { listsAhead, entriesAhead = a, e }(listsAhead, entriesAhead)
	for _, f := range filters {
		for qi, q := range vecs[:40] {
			listsAhead, entriesAhead = 0, 0
			want := x.Search(q, 10, f)
			for _, a := range []int{1, 2, 4} {
				listsAhead = a
				if got := x.Search(q, 10, f); !slices.Equal(got, want) {
					t.Fatalf("filter %+v, query %d, %d lists ahead: %v, want %v", f, qi, a, got, want)
				}
			}
			// Entries hinted ahead, within a block, across blocks and
			// past the list's end.
			for _, e := range []int{1, 8, 40, 1000} {
				entriesAhead = e
				if got := x.Search(q, 10, f); !slices.Equal(got, want) {
					t.Fatalf("filter %+v, query %d, %d entries ahead: %v, want %v", f, qi, e, got, want)
				}
			}
		}
	}
}
