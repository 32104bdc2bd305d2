package wave

import (
	"sync/atomic"
	"unsafe"
)

// An IVF split by agent ([IVF.SplitByAgent]) holds its items a second
// time, apart by agent, for searches whose filter names one agent (the
// planner's same-agent guard). In the inverted lists such a search
// admits one agent's items and every item of no agent or several (the
// catch-alls: nodes, CMS spans, shared facts), and both lie scattered
// over all the lists: under a confidence floor or a time window the
// search probed four times the lists of an unfiltered one to find
// enough of them. Split, the same search reads the agent's own items
// from one list of its own (scanned whole, its entries' metas checked
// first) and searches the catch-alls in an IVF of their own, a tenth of
// the size, in one pass sharing one candidate heap.
//
// The split holds the items' ids, metas and 4-bit codes again (of the
// whole vector in an agent's list, which has no centroid; of the
// residual in the catch-alls' IVF) and references the same float
// vectors. It is derived: a snapshot does not hold it. An item enters
// it once its float vector is known (at Add, or at Attach after a
// snapshot load, or from a background pass over the lists), and the
// split serves searches only while it holds every live item.

// ivfSide is the split: the catch-alls' IVF and the agents' lists.
type ivfSide struct {
	shared *IVF
	lists  atomic.Pointer[agentLists]

	// The writer's state, under the IVF's mu.
	ids     idTable // an agent list's item -> its slot and position
	dead    int     // tombstones in the agents' lists
	scratch coder
	// filling is set while a background pass adds the items the split
	// lacks; again asks it to pass once more.
	filling, again bool
	ready          atomic.Bool // the split holds every live item
}

// agentLists are the agents' lists, replaced whole (copy on write) when
// an agent gets its first one.
type agentLists struct {
	slot  map[uint32]uint32 // agent key -> index in lists
	lists []*ivfList
}

// oneAgent reports whether agent key a names one agent (not none, not a
// set).
func oneAgent(a uint32) bool { return a != 0 && a&agentSetFlag == 0 }

// SplitByAgent makes x keep its items a second time apart by agent, so
// that searches for one agent's items (Filter.Agent a single agent's
// key) read that agent's list and the catch-alls' index instead of the
// inverted lists (see ivf_side.go). Items x holds already enter the split
// in the background; until it holds every live item, searches use the
// lists. Calling it again does nothing.
func (x *IVF) SplitByAgent() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.side.Load() != nil {
		return
	}
	o := x.opt
	sd := &ivfSide{shared: NewIVF(x.dim, o)}
	sd.lists.Store(&agentLists{slot: map[uint32]uint32{}})
	x.side.Store(sd)
	x.sideChanged(sd)
	if x.ids.len() > 0 {
		x.fillSideLocked(sd)
	}
}

// SplitReady reports whether searches for one agent use the split
// (SplitByAgent was called and the split holds every live item).
func (x *IVF) SplitReady() bool {
	sd := x.side.Load()
	return sd != nil && sd.ready.Load()
}

// sideChanged updates the split's readiness after a change to it or to
// x's ids (sideAdd and sideRemove call it); the caller holds mu.
func (x *IVF) sideChanged(sd *ivfSide) {
	sd.ready.Store(sd.ids.len()+sd.shared.Len() == x.ids.len())
}

// sideAdd puts id (vector vec, unit length, kept) in the split; the
// caller holds mu and has removed id from it.
func (x *IVF) sideAdd(sd *ivfSide, id uint64, vec []float32, m Meta) {
	defer x.sideChanged(sd)
	if !oneAgent(m.Agent) {
		_ = sd.shared.Add(id, vec, m) // vec was checked when x took it
		return
	}
	l, slot := sd.list(m.Agent, x.dim)
	e := ivfEntry{id: id, meta: packMeta(m), vec: &vec[0]}
	e.code, e.lo, e.step = sd.scratch.residual(vec, nil)
	sd.ids.put(id, ivfLoc{slot, uint32(l.push(e, x.dim))})
}

// list returns agent a's list and its slot, making them if a has none;
// the caller holds mu.
func (sd *ivfSide) list(a uint32, dim int) (*ivfList, uint32) {
	al := sd.lists.Load()
	if slot, ok := al.slot[a]; ok {
		return al.lists[slot], slot
	}
	nl := &agentLists{slot: make(map[uint32]uint32, len(al.slot)+1), lists: append(al.lists[:len(al.lists):len(al.lists)], new(ivfList))}
	for k, v := range al.slot {
		nl.slot[k] = v
	}
	slot := uint32(len(al.lists))
	nl.slot[a] = slot
	nl.lists[slot].d.Store(newListData(0, dim))
	sd.lists.Store(nl)
	return nl.lists[slot], slot
}

// sideRemove takes id out of the split (x has dropped it, or will add
// it back); the caller holds mu.
func (x *IVF) sideRemove(sd *ivfSide, id uint64) {
	defer x.sideChanged(sd)
	if loc, ok := sd.ids.get(id); ok {
		sd.lists.Load().lists[loc.list].d.Load().markDead(int(loc.pos))
		sd.ids.remove(id)
		sd.dead++
		return
	}
	sd.shared.Remove(id)
}

// sideSetMeta gives id's copy in the split the Meta m (its vector vec,
// nil when not known: then it leaves the split until attached); the
// caller holds mu.
func (x *IVF) sideSetMeta(sd *ivfSide, id uint64, vec *float32, m Meta) {
	if loc, ok := sd.ids.get(id); ok {
		d := sd.lists.Load().lists[loc.list].d.Load()
		nm := &d.metas[loc.pos]
		if atomic.LoadUint32(&nm.agent) == m.Agent && !nm.fixedDiffer(m) {
			nm.setMutable(m)
			d.widenAt(int(loc.pos))
			return
		}
	} else if !oneAgent(m.Agent) && sd.shared.SetMeta(id, m) {
		return
	}
	x.sideRemove(sd, id)
	if vec != nil {
		x.sideAdd(sd, id, unsafe.Slice(vec, x.dim), m)
	}
}

// has reports whether the split holds id; the caller holds mu.
func (sd *ivfSide) has(id uint64) bool {
	return sd.ids.has(id) || sd.shared.Has(id)
}

// lacks reports whether d's entry i is live, has its float vector and is
// not in the split yet: what a fill adds; the caller holds mu.
func (sd *ivfSide) lacks(d *listData, i int) bool {
	return d.vecs[i].Load() != nil && !d.isDead(i) && !sd.has(d.ids[i])
}

// fillSideLocked starts (or asks for another) background pass adding to
// the split the live items with a vector it lacks; the caller holds mu.
func (x *IVF) fillSideLocked(sd *ivfSide) {
	if sd.filling {
		sd.again = true
		return
	}
	sd.filling = true
	go x.fillSide(sd)
}

// fillSide passes over the lists, one list under the lock at a time, so
// that ingest and searches go on, until a pass found every entry where
// it looked for it and no pass was asked for meanwhile.
func (x *IVF) fillSide(sd *ivfSide) {
	x.reserveSide(sd)
	for {
		st := x.st.Load()
		moved := false
		for li := range st.lists {
			x.mu.Lock()
			d := st.lists[li].d.Load()
			for i := range d.len() {
				if !sd.lacks(d, i) {
					continue
				}
				id := d.ids[i]
				if loc, ok := x.ids.get(id); !ok || x.st.Load() != st || loc != (ivfLoc{uint32(li), uint32(i)}) {
					// Moved since the pass began (a retraining, a
					// compaction): the next pass finds it where it is.
					moved = true
					continue
				}
				x.sideAdd(sd, id, unsafe.Slice(d.vecs[i].Load(), x.dim), d.metas[i].meta())
			}
			x.mu.Unlock()
		}
		x.mu.Lock()
		if !sd.again && !moved && x.st.Load() == st {
			sd.filling = false
			x.mu.Unlock()
			return
		}
		sd.again = false
		x.mu.Unlock()
	}
}

// reserveSide sizes the agents' lists for the items a fill is about to
// add, so that a reopen's split holds no room to grow into (a list
// grown by doubling is a quarter empty on average).
func (x *IVF) reserveSide(sd *ivfSide) {
	want := map[uint32]int{}
	st := x.st.Load()
	for li := range st.lists {
		x.mu.Lock()
		d := st.lists[li].d.Load()
		for i := range d.len() {
			if a := atomic.LoadUint32(&d.metas[i].agent); oneAgent(a) && sd.lacks(d, i) {
				want[a]++
			}
		}
		x.mu.Unlock()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for a, n := range want {
		l, _ := sd.list(a, x.dim)
		d := l.d.Load()
		if need := d.len() + n; need > len(d.ids) {
			l.grow(d, need, x.dim, false)
		}
	}
}

// sideCleanup compacts the agents' lists holding tombstones and the
// catch-alls' index; the caller holds mu.
func (x *IVF) sideCleanup(sd *ivfSide) {
	sd.shared.Cleanup()
	if sd.dead == 0 {
		return
	}
	for slot, l := range sd.lists.Load().lists {
		sd.dead -= l.compact(x.dim, func(id uint64, pos int) { sd.ids.put(id, ivfLoc{uint32(slot), uint32(pos)}) })
	}
}

// bytes is the memory the split holds, approximately, without the
// float vectors; the caller holds mu.
func (sd *ivfSide) bytes(dim int) int {
	n := sd.shared.Bytes() + sd.ids.bytes()
	for _, l := range sd.lists.Load().lists {
		n += l.d.Load().bytes(dim)
	}
	return n
}

// searchSplit is Search for a filter naming one agent on a ready split:
// the catch-alls' index searched with the agent's list scanned first.
func (x *IVF) searchSplit(sd *ivfSide, q []float32, k int, f *Filter, stats *SearchStats) []Hit {
	var pre *listData
	al := sd.lists.Load()
	if slot, ok := al.slot[f.Agent]; ok {
		pre = al.lists[slot].d.Load()
	}
	sh := sd.shared
	// The catch-alls' index probes as large a share of its lists as an
	// unfiltered search of x does of x's, and at least 8 (on the medium
	// bench, 4 gave the same-agent queries recall@10 0.91, 8 0.95).
	nprobe := max(8, int(x.nprobe.Load())*len(sh.st.Load().lists)/max(1, len(x.st.Load().lists)))
	return sh.search(q, k, f, pre, nprobe, stats)
}
