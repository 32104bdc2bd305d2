package wave

import "testing"

// TestListPrefetchWithinItsEntries hints lists of every shape the
// search meets (empty, shorter than a block, longer than the hinted
// blocks, with spare capacity): the hints index only the list's own
// arrays, so a bound wrong by one panics here.
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
			d.set(i, ivfEntry{id: uint64(i), lo: lo, step: step, code: code}, cb)
		}
		d.n.Store(int32(c.n))
		d.prefetchHeader()
		d.prefetchEntries(cb, false)
		d.prefetchEntries(cb, true)
		if d.len() != c.n {
			t.Fatalf("n=%d: len %d after the hints", c.n, d.len())
		}
	}
}
