package wave

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestListGrowthKeepsEveryEntryAndSummary: a list grown by a push (its
// arrays copied whole) holds the entries it held, tombstones included,
// each with its meta, code, lo, step and vector, and block summaries
// that rule out what the entries' own would: those of a list whose
// every entry was set, and marked, one by one.
func TestListGrowthKeepsEveryEntryAndSummary(t *testing.T) {
	const dim, n = 24, 63 * blockSize // whole blocks: the push starts a new one
	rng := rand.New(rand.NewPCG(7, 7))
	cb := nibbleBytes(dim)
	entries := make([]ivfEntry, n)
	vecs := make([]float32, n)
	for i := range entries {
		m := Meta{Kind: Kind(rng.IntN(3)), Namespace: uint32(rng.IntN(4)), Agent: uint32(rng.IntN(6)), Site: uint32(rng.IntN(3)),
			Confidence: uint8(rng.IntN(100))}
		if rng.IntN(3) > 0 {
			m.Time = rng.Int64N(1e6) + 1
			m.End = m.Time + rng.Int64N(1e4)
		}
		code := make([]byte, cb)
		for j := range code {
			code[j] = byte(rng.Uint32())
		}
		entries[i] = ivfEntry{id: rng.Uint64(), meta: packMeta(m), lo: rng.Float32(), step: rng.Float32(), code: code, vec: &vecs[i]}
	}
	var l ivfList
	l.d.Store(newListData(n, dim)) // full, as a snapshot loads a list
	one := newListData(n, dim)     // the same entries, each set on its own
	for i, e := range entries {
		l.d.Load().set(i, e, cb)
		one.set(i, e, cb)
	}
	l.d.Load().n.Store(n)
	one.n.Store(n)
	for i := 0; i < n; i += 7 {
		l.d.Load().markDead(i)
		one.markDead(i)
	}
	old := l.d.Load()
	extra := ivfEntry{id: 1, code: make([]byte, cb)}
	if pos := l.push(extra, dim); pos != n {
		t.Fatalf("pushed at %d, want %d", pos, n)
	}
	d := l.d.Load()
	if d == old || len(d.ids) != 2*n || d.len() != n+1 {
		t.Fatalf("after the push: the same data %v, room %d, length %d", d == old, len(d.ids), d.len())
	}
	for i := range n {
		got, want := d.entry(i, dim), one.entry(i, dim)
		if !reflect.DeepEqual(got, want) || d.isDead(i) != one.isDead(i) {
			t.Fatalf("entry %d: %+v (dead %v), want %+v (dead %v)", i, got, d.isDead(i), want, one.isDead(i))
		}
	}
	for b := range (n + blockSize - 1) >> blockShift {
		g, w := &d.blk[b], &one.blk[b]
		if g.lo.Load() != w.lo.Load() || g.hi.Load() != w.hi.Load() || g.timeless.Load() != w.timeless.Load() ||
			g.open.Load() != w.open.Load() || g.agents.Load() != w.agents.Load() || g.sites.Load() != w.sites.Load() ||
			g.unsited.Load() != w.unsited.Load() || g.dead.Load() != w.dead.Load() {
			t.Fatalf("block %d's summary differs from its entries' own", b)
		}
	}
	if e := d.entry(n, dim); e.id != extra.id {
		t.Fatalf("the pushed entry reads back as %d", e.id)
	}
}

// BenchmarkListGrowFromFull: the first push into a list loaded full
// (as from a snapshot), which copies it: ns per entry copied.
func BenchmarkListGrowFromFull(b *testing.B) {
	const dim, n = 384, 1200
	cb := nibbleBytes(dim)
	full := newListData(n, dim)
	vec := make([]float32, dim)
	for i := range n {
		full.set(i, ivfEntry{id: uint64(i), meta: packMeta(Meta{Time: int64(i + 1), End: int64(i + 2), Agent: uint32(i % 7)}),
			code: make([]byte, cb), vec: &vec[0]}, cb)
	}
	full.n.Store(n)
	extra := ivfEntry{id: n, code: make([]byte, cb)}
	for b.Loop() {
		var l ivfList
		l.d.Store(full)
		l.push(extra, dim)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
