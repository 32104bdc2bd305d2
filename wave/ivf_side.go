package wave

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"unsafe"
)

// A split IVF holds its items a second time, apart by a key, for
// searches whose filter picks out few keys:
//
//   - split by agent ([IVF.SplitByAgent]), for searches whose filter
//     names one agent (the planner's same-agent guard). In the inverted
//     lists such a search admits one agent's items and every item of no
//     agent or several (the catch-alls: nodes, CMS spans, shared facts),
//     and both lie scattered over all the lists: under a confidence floor
//     or a time window the search probed four times the lists of an
//     unfiltered one to find enough of them. Split, the same search reads
//     the agent's own items from one list of its own (scanned whole, its
//     entries' metas checked first) and searches the catch-alls in an IVF
//     of their own, a tenth of the size, in one pass sharing one
//     candidate heap.
//   - split by time ([IVF.SplitByTime]), for searches under a narrow time
//     window. The items whose scope is closed and at most an hour long
//     (a step's events, facts observed once) lie in one list per hour of
//     their start; the others (timeless nodes, open or long-lived facts)
//     are the catch-alls. A window admits the items of the hours it
//     overlaps (and the hour before) and scattered catch-alls; in the
//     inverted lists a narrow window made the search probe hundreds of
//     lists. Split, the search scans the window's hours whole and the
//     catch-alls' index as above, when the hours hold few enough items
//     (timeScanFactor); a wide window searches the lists.
//
// A split holds the items' ids, metas and 4-bit codes again (of the
// whole vector in a key's list, which has no centroid; of the residual
// in the catch-alls' IVF) and references the same float vectors. It is
// derived: the IVF's snapshot does not hold it, a splits snapshot beside
// it may (ivf_side_snapshot.go). An item enters it once its float vector
// is known (at Add, or at Attach after a snapshot load, from a splits
// snapshot, or from a background pass over the lists), and the split
// serves searches only while it holds every live item.

// splitBy is what a split keys its lists by.
type splitBy uint8

const (
	byAgent splitBy = iota
	byTime
	splitKinds
)

// ivfSide is a split: the catch-alls' IVF and the keys' lists.
type ivfSide struct {
	by     splitBy
	shared *IVF
	lists  atomic.Pointer[sideLists]

	// The writer's state, under the IVF's mu.
	ids     idTable // a key list's item -> its slot and position
	dead    int     // tombstones in the keys' lists
	scratch coder
	// filling is set while a background pass adds the items the split
	// lacks; again asks it to pass once more.
	filling, again bool
	// loading is set while the split's entries read from a snapshot are
	// checked against the IVF (SplitsLoad.Load): it serves no search.
	loading    bool
	ready      atomic.Bool  // the split holds every live item
	live       atomic.Int64 // the IVF's live items, for searches
	sharedLive atomic.Int64 // the catch-alls' live items, for searches
}

// sideLists are a split's lists, replaced whole (copy on write) when a
// key gets its first one.
type sideLists struct {
	slot  map[uint32]uint32 // key -> index in lists
	lists []*sideList
	// sorted is the keys in increasing order, each with its slot: the
	// hours a window overlaps are a run of it.
	sorted []keySlot
}

type keySlot struct{ key, slot uint32 }

// timeBucketNS is the span of the split by time's lists: an item whose
// scope is closed and at most this long lies in the list of the span
// its start falls in.
const timeBucketNS = int64(3600e9)

// timeScanFactor bounds what a windowed search reads from the split by
// time: the window's lists are scanned whole while they hold at most
// timeScanFactor times the items of NProbe lists (what an unfiltered
// search scores at most); a wider window searches the lists.
var timeScanFactor = 2.0

// key returns m's list key in the split, ok false for a catch-all.
func (sd *ivfSide) key(m Meta) (key uint32, ok bool) {
	if sd.by == byAgent {
		return m.Agent, oneAgent(m.Agent)
	}
	return timeKey(m)
}

// timeKey is the split by time's key of m: the hour its scope starts in,
// if the scope is closed and at most an hour long.
func timeKey(m Meta) (uint32, bool) {
	if m.Time <= 0 || m.End < m.Time || m.End-m.Time > timeBucketNS || m.Time/timeBucketNS > math.MaxUint32 {
		return 0, false
	}
	return uint32(m.Time / timeBucketNS), true
}

// oneAgent reports whether agent key a names one agent (not none, not a
// set).
func oneAgent(a uint32) bool { return a != 0 && a&agentSetFlag == 0 }

// split makes x keep its items a second time apart by what by keys, if
// it does not yet.
func (x *IVF) split(by splitBy) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sides[by].Load() != nil {
		return
	}
	sd := &ivfSide{by: by, shared: NewIVF(x.dim, x.opt)}
	sd.lists.Store(&sideLists{slot: map[uint32]uint32{}})
	x.sides[by].Store(sd)
	x.sideChanged(sd)
	if x.ids.len() > 0 {
		x.fillSideLocked(sd)
	}
}

// sidesDo calls fn with each split x has; the caller holds mu.
func (x *IVF) sidesDo(fn func(sd *ivfSide)) {
	for by := range splitKinds {
		if sd := x.sides[by].Load(); sd != nil {
			fn(sd)
		}
	}
}

// SplitByAgent makes x keep its items a second time apart by agent, so
// that searches for one agent's items (Filter.Agent a single agent's
// key) read that agent's list and the catch-alls' index instead of the
// inverted lists (see ivf_side.go). Items x holds already enter the split
// in the background; until it holds every live item, searches use the
// lists. Calling it again does nothing.
func (x *IVF) SplitByAgent() { x.split(byAgent) }

// SplitByTime makes x keep its items a second time apart by the hour
// their scope starts in, so that searches under a narrow time window
// read the window's hours and the catch-alls' index instead of the
// inverted lists (see ivf_side.go). Like SplitByAgent, it fills in the
// background and serves once it holds every live item; a filter naming
// one agent uses the split by agent first.
func (x *IVF) SplitByTime() { x.split(byTime) }

// SplitReady reports whether searches for one agent use the split
// (SplitByAgent was called and the split holds every live item).
func (x *IVF) SplitReady() bool { return x.sideReady(byAgent) }

// SplitsReady reports whether every split x has made serves searches
// (holds every live item); true with none.
func (x *IVF) SplitsReady() bool {
	for by := range splitKinds {
		if sd := x.sides[by].Load(); sd != nil && !sd.ready.Load() {
			return false
		}
	}
	return true
}

// TimeSplitReady reports whether windowed searches use the split by
// time (SplitByTime was called and the split holds every live item).
func (x *IVF) TimeSplitReady() bool { return x.sideReady(byTime) }

func (x *IVF) sideReady(by splitBy) bool {
	sd := x.sides[by].Load()
	return sd != nil && sd.ready.Load()
}

// sideChanged updates the split's readiness after a change to it or to
// x's ids (sideAdd and sideRemove call it); the caller holds mu.
func (x *IVF) sideChanged(sd *ivfSide) {
	shared := sd.shared.Len()
	sd.ready.Store(!sd.loading && sd.ids.len()+shared == x.ids.len())
	sd.live.Store(int64(x.ids.len()))
	sd.sharedLive.Store(int64(shared))
}

// sideAdd puts id (vector vec, unit length, kept) in the split; the
// caller holds mu and has removed id from it.
func (x *IVF) sideAdd(sd *ivfSide, id uint64, vec []float32, m Meta) {
	defer x.sideChanged(sd)
	key, ok := sd.key(m)
	if !ok {
		_ = sd.shared.Add(id, vec, m) // vec was checked when x took it
		return
	}
	lists := len(sd.lists.Load().lists)
	l, slot := sd.list(key)
	if sd.by == byTime && int(slot) == lists {
		sd.trimBefore(key, x.dim) // a new hour
	}
	e := ivfEntry{id: id, meta: packMeta(m), vec: &vec[0]}
	e.code, e.lo, e.step = sd.scratch.residual(vec, nil)
	sd.ids.put(id, ivfLoc{slot, uint32(l.push(e, x.dim))})
}

// list returns key's list and its slot, making them if key has none;
// the caller holds mu.
func (sd *ivfSide) list(key uint32) (*sideList, uint32) {
	al := sd.lists.Load()
	if slot, ok := al.slot[key]; ok {
		return al.lists[slot], slot
	}
	nl := &sideLists{slot: make(map[uint32]uint32, len(al.slot)+1), lists: append(al.lists[:len(al.lists):len(al.lists)], newSideList(sd.expected(al, key)))}
	for k, v := range al.slot {
		nl.slot[k] = v
	}
	slot := uint32(len(al.lists))
	nl.slot[key] = slot
	nl.sorted = slices.Insert(slices.Clone(al.sorted), firstAtLeast(al.sorted, key), keySlot{key, slot})
	sd.lists.Store(nl)
	return nl.lists[slot], slot
}

// expected is the room a new list for key starts with: in the split by
// time, what the hour before it holds (a fleet's hours hold about as
// many items as one another, and a list grown a quarter at a time from
// nothing held some twenty segments); else none.
func (sd *ivfSide) expected(al *sideLists, key uint32) int {
	if sd.by != byTime {
		return 0
	}
	if at := firstAtLeast(al.sorted, key); at > 0 {
		return al.lists[al.sorted[at-1].slot].len()
	}
	return 0
}

// trimBefore gives back the room to grow into of the list of the key
// before key, when more than an eighth of it is empty (a copy of its
// last segment; the caller holds mu). An hour's items arrive mostly in
// time order, so when the next hour gets its list the one before is
// mostly complete; a late item grows it again.
func (sd *ivfSide) trimBefore(key uint32, dim int) {
	al := sd.lists.Load()
	if at := firstAtLeast(al.sorted, key); at > 0 {
		al.lists[al.sorted[at-1].slot].trim(dim)
	}
}

// firstAtLeast returns the index of the first of sorted whose key is at
// least key.
func firstAtLeast(sorted []keySlot, key uint32) int {
	i, _ := slices.BinarySearchFunc(sorted, key, func(e keySlot, k uint32) int { return cmp.Compare(e.key, k) })
	return i
}

// sideRemove takes id out of the split (x has dropped it, or will add
// it back); the caller holds mu.
func (x *IVF) sideRemove(sd *ivfSide, id uint64) {
	defer x.sideChanged(sd)
	if loc, ok := sd.ids.get(id); ok {
		d, i := sd.lists.Load().lists[loc.list].at(int(loc.pos))
		d.markDead(i)
		sd.ids.remove(id)
		sd.dead++
		// Items leave a key's list without any removal from x (an edge
		// observed again past its hour, an agent that changes): their
		// tombstones are reclaimed here, as the indexer does x's.
		if CleanupDue(sd.dead, sd.ids.len()) {
			x.compactSideLists(sd)
		}
		return
	}
	sd.shared.Remove(id)
	if CleanupDue(sd.shared.Tombstones(), sd.shared.Len()) {
		sd.shared.Cleanup()
	}
}

// sideSetMeta gives id's copy in the split the Meta m (its vector vec,
// nil when not known: then it leaves the split until attached); the
// caller holds mu.
func (x *IVF) sideSetMeta(sd *ivfSide, id uint64, vec *float32, m Meta) {
	key, keyed := sd.key(m)
	if loc, ok := sd.ids.get(id); ok {
		d, i := sd.lists.Load().lists[loc.list].at(int(loc.pos))
		nm := &d.metas[i]
		if was, _ := sd.key(nm.meta()); keyed && was == key && !nm.fixedDiffer(m) {
			nm.setMutable(m)
			d.widenAt(i)
			return
		}
	} else if !keyed && sd.shared.SetMeta(id, m) {
		return
	}
	x.sideRemove(sd, id)
	if vec != nil {
		x.sideAdd(sd, id, unsafe.Slice(vec, x.dim), m)
	}
}

// sidesHold reports whether every split holds id; the caller holds mu.
func (x *IVF) sidesHold(id uint64) bool {
	all := true
	x.sidesDo(func(sd *ivfSide) { all = all && sd.has(id) })
	return all
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
	if sd.loading {
		return // the load fills once it has checked what it read
	}
	if sd.filling {
		sd.again = true
		return
	}
	sd.filling = true
	go x.fillSide(sd)
}

// fillSide passes over the lists, one list under the lock at a time, so
// that ingest and searches go on, until a pass found every entry where
// it looked for it and no pass was asked for meanwhile. The catch-alls'
// index trains for the catch-alls to come (trainFor) while the first
// pass adds the keyed items; the catch-alls follow once it has.
func (x *IVF) fillSide(sd *ivfSide) {
	sample, shared := x.reserveSide(sd)
	trained := make(chan struct{})
	go func() {
		defer close(trained)
		sd.shared.trainFor(sample, shared)
	}()
	x.fillPass(sd, true)
	<-trained
	for {
		st, moved := x.fillPass(sd, false)
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

// fillPass adds to the split the items it lacks (the keyed ones alone
// with keyedOnly) from the lists of x's current state, which it returns
// with whether some item moved since the pass began (a retraining, a
// compaction: the next pass finds it where it is).
func (x *IVF) fillPass(sd *ivfSide, keyedOnly bool) (st *ivfState, moved bool) {
	st = x.st.Load()
	x.eachLacking(sd, st, func(li int, d *listData, i int) {
		m := d.metas[i].meta()
		if _, keyed := sd.key(m); keyedOnly && !keyed {
			return
		}
		id := d.ids[i]
		if loc, ok := x.ids.get(id); !ok || x.st.Load() != st || loc != (ivfLoc{uint32(li), uint32(i)}) {
			moved = true
			return
		}
		x.sideAdd(sd, id, unsafe.Slice(d.vecs[i].Load(), x.dim), m)
	})
	return st, moved
}

// eachLacking calls fn with each entry of st's lists that the split
// lacks (ivfSide.lacks), holding x's mu over one list at a time so that
// ingest and searches go on between them.
func (x *IVF) eachLacking(sd *ivfSide, st *ivfState, fn func(li int, d *listData, i int)) {
	for li := range st.lists {
		x.mu.Lock()
		d := st.lists[li].d.Load()
		for i := range d.len() {
			if sd.lacks(d, i) {
				fn(li, d, i)
			}
		}
		x.mu.Unlock()
	}
}

// reserveSide sizes the keys' lists for the items a fill is about to
// add, so that a reopen's split holds no room to grow into, and returns
// the number of catch-alls it is about to add with a uniform sample of
// their vectors (at most a retraining's), for the catch-alls' index to
// train on first (IVF.trainFor).
func (x *IVF) reserveSide(sd *ivfSide) (sample [][]float32, shared int) {
	want := map[uint32]int{}
	rng := rand.New(rand.NewPCG(x.opt.Seed, uint64(sd.by)))
	x.eachLacking(sd, x.st.Load(), func(_ int, d *listData, i int) {
		if key, ok := sd.key(d.metas[i].meta()); ok {
			want[key]++
			return
		}
		// Reservoir sampling: each catch-all so far is in the sample
		// with the same chance.
		shared++
		v := unsafe.Slice(d.vecs[i].Load(), x.dim)
		if len(sample) < ivfMaxSample {
			sample = append(sample, v)
		} else if j := rng.IntN(shared); j < ivfMaxSample {
			sample[j] = v
		}
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	for key, n := range want {
		l, _ := sd.list(key)
		l.reserve(l.len() + n)
	}
	return sample, shared
}

// sideCleanup compacts the keys' lists holding tombstones and the
// catch-alls' index; the caller holds mu.
func (x *IVF) sideCleanup(sd *ivfSide) {
	sd.shared.Cleanup()
	x.compactSideLists(sd)
}

// compactSideLists compacts the keys' lists holding tombstones; the
// caller holds mu.
func (x *IVF) compactSideLists(sd *ivfSide) {
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
		n += l.bytes(dim)
	}
	return n
}

// searchAgent is Search for a filter naming one agent on a ready split
// by agent: the catch-alls' index searched with the agent's list scanned
// first.
func (x *IVF) searchAgent(sd *ivfSide, q []float32, k int, f *Filter, stats *SearchStats) []Hit {
	// The agent's segments on the stack (a list of 100,000 entries has
	// about 40): a search for one agent allocates no more than another.
	var segs [48]*listData
	pre := segs[:0]
	al := sd.lists.Load()
	keys := 0
	if slot, ok := al.slot[f.Agent]; ok {
		pre, keys = al.lists[slot].appendTo(pre), 1
	}
	return x.searchSide(sd, q, k, f, pre, keys, stats)
}

// windowLists appends to pre the segments of the lists of sd (a split
// by time) that may hold items the window [from, to] admits (0: open),
// with the number of those lists, and returns ok false when they hold
// more than limit items: a wide window, for the inverted lists.
func (sd *ivfSide) windowLists(from, to int64, limit int, pre []*listData) (_ []*listData, keys int, ok bool) {
	al := sd.lists.Load()
	// A keyed item starts at most timeBucketNS before it ends: one that
	// overlaps the window starts in [from-timeBucketNS, to].
	lo, hi := uint32(0), uint32(math.MaxUint32)
	if from > timeBucketNS {
		lo = uint32(min((from-timeBucketNS)/timeBucketNS, math.MaxUint32))
	}
	if to > 0 {
		hi = uint32(min(to/timeBucketNS, math.MaxUint32))
	} else if to < 0 {
		return pre, 0, true // the window ends before any keyed item starts
	}
	n := 0
	for _, e := range al.sorted[firstAtLeast(al.sorted, lo):] {
		if e.key > hi {
			break
		}
		l := al.lists[e.slot]
		if n += l.len(); n > limit {
			return pre, keys, false
		}
		pre = l.appendTo(pre)
		keys++
	}
	return pre, keys, true
}

// searchTime is Search for a windowed filter on a ready split by time,
// and ok false when the window's lists hold too many items for it.
func (x *IVF) searchTime(sd *ivfSide, q []float32, k int, f *Filter, stats *SearchStats) (_ []Hit, ok bool) {
	st := x.st.Load()
	limit := int(timeScanFactor * float64(x.nprobe.Load()) * float64(sd.live.Load()) / float64(max(1, len(st.lists))))
	// A day's hours (each mostly one segment) on the stack: a windowed
	// search allocates no more than any other.
	var hours [48]*listData
	pre, keys, ok := sd.windowLists(f.From, f.To, limit, hours[:0])
	if !ok {
		return nil, false
	}
	return x.searchSide(sd, q, k, f, pre, keys, stats), true
}

// searchSide searches sd's catch-alls' index with the segments pre of
// keys of its lists scanned first (stats counts each list once).
func (x *IVF) searchSide(sd *ivfSide, q []float32, k int, f *Filter, pre []*listData, keys int, stats *SearchStats) []Hit {
	sh := sd.shared
	// The catch-alls' index probes as large a share of its lists as an
	// unfiltered search of x does of x's, and at least 8 (on the medium
	// bench, 4 gave the same-agent queries recall@10 0.91, 8 0.95).
	nprobe := max(8, int(x.nprobe.Load())*len(sh.st.Load().lists)/max(1, len(x.st.Load().lists)))
	hits := sh.search(q, k, f, pre, nprobe, int(sd.sharedLive.Load()), stats)
	if stats != nil {
		stats.Lists -= len(pre) - keys
	}
	return hits
}
