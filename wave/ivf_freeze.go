package wave

import (
	"cmp"
	"math/bits"
	"slices"
)

// A snapshot of an IVF or of its splits is written from a freeze: the
// lists as they stood at one moment, noted under the writer's lock,
// then read and written with the lock released, while ingest goes on.
// Before the sixtieth round of BENCHMARKS.md a snapshot held the lock for
// its whole write: at a million edges 2.2 s for the index and 2.5 s for
// its splits at every vector checkpoint, new vectors and the commits
// behind them waiting.
//
// A freeze can be read later because a list's entries do not change once
// published: the writer appends past a list's published length, marks
// tombstones, and replaces a full or compacted list by a copy, leaving
// the old one as it was. So a freeze notes each list's data, its length
// and a copy of its tombstone bits, and reads exactly the entries live
// then. The one part of an entry that changes in place is its Meta's
// mutable fields (time, end, agent, site, confidence), read atomically:
// the snapshot may hold a value newer than the freeze. A caller that
// stamps the snapshot with the graph's generation before the freeze
// catches it up from that stamp after a crash (the daemon's catch-up
// removes every item changed since and adds it again), so such a value
// is replaced.

// listFreeze is a list's entries at a freeze: the first n of d, with
// the tombstone bits of their blocks then.
type listFreeze struct {
	d    *listData
	n    int
	dead []uint32
}

// freezeList notes d's entries as they are now; the caller holds the
// writer's lock.
func freezeList(d *listData) listFreeze {
	n := d.len()
	dead := make([]uint32, (n+blockSize-1)>>blockShift)
	for b := range dead {
		dead[b] = d.blk[b].dead.Load()
	}
	if r := n & (blockSize - 1); r != 0 {
		dead[len(dead)-1] |= blockAll &^ (1<<r - 1) // past n: not entries
	}
	return listFreeze{d: d, n: n, dead: dead}
}

// liveCount is the number of entries of f live at its freeze.
func (f *listFreeze) liveCount() int {
	dead := 0
	for _, m := range f.dead {
		dead += bits.OnesCount32(m & blockAll)
	}
	return len(f.dead)*blockSize - dead
}

// appendLive appends to refs the entries of f live at its freeze, in
// their order in the list.
func (f *listFreeze) appendLive(refs []entryRef) []entryRef {
	for b, m := range f.dead {
		for live := ^m & blockAll; live != 0; live &= live - 1 {
			refs = append(refs, entryRef{f.d, b<<blockShift | bits.TrailingZeros32(live)})
		}
	}
	return refs
}

// byID sorts refs by their ids.
func byID(refs []entryRef) {
	slices.SortFunc(refs, func(a, b entryRef) int { return cmp.Compare(a.d.ids[a.i], b.d.ids[b.i]) })
}

// ivfFreeze is an IVF's state at a freeze (freezeLocked): what
// WriteTo writes.
type ivfFreeze struct {
	dim     int
	opt     IVFOptions
	nprobe  int32
	trained int
	q       *coarse
	lists   []listFreeze
}

// freezeLocked notes x's state as it is now; the caller holds mu.
func (x *IVF) freezeLocked() *ivfFreeze {
	st := x.st.Load()
	f := &ivfFreeze{dim: x.dim, opt: x.opt, nprobe: x.nprobe.Load(), trained: x.trained, q: st.q, lists: make([]listFreeze, len(st.lists))}
	for li := range st.lists {
		f.lists[li] = freezeList(st.lists[li].d.Load())
	}
	return f
}

// sideFreeze is a split at a freeze: its keys' lists, each key's
// segments in order, and its catch-alls' index.
type sideFreeze struct {
	by     splitBy
	shared *ivfFreeze
	keys   []uint32
	segs   [][]listFreeze
}

// freezeLocked notes sd as it is now; the caller holds the IVF's mu and
// that of sd's catch-alls' index.
func (sd *ivfSide) freezeLocked() sideFreeze {
	al := sd.lists.Load()
	f := sideFreeze{by: sd.by, shared: sd.shared.freezeLocked(), keys: make([]uint32, len(al.sorted)), segs: make([][]listFreeze, len(al.sorted))}
	for k, ks := range al.sorted {
		f.keys[k] = ks.key
		for _, d := range al.lists[ks.slot].segs.Load().d {
			f.segs[k] = append(f.segs[k], freezeList(d))
		}
	}
	return f
}
