package wave

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"unsafe"
)

// A retraining builds a new state (quantiser and lists) in the
// background from the lists as they were when it started, while the
// writer goes on changing the current state and records the ids it
// touches. The rebuild then replays those ids against the new state (an
// id's entry there is dropped and copied afresh from the current state),
// in rounds outside the writer's lock until few are left, and swaps the
// state in under the lock. Searches see the old state or the new one,
// each complete.

// touch records id as changed for a running rebuild; the caller holds mu.
func (x *IVF) touch(id uint64) {
	if x.rebuild != nil {
		x.touched = append(x.touched, id)
	}
}

// maybeRebuild starts a background retraining when the index has reached
// TrainAt vectors (first training) or grown RetrainFactor times since
// the last; the caller holds mu. Should the previous retraining still
// run then (only when inserts outpace training by that factor), it waits
// for it, so that trainings happen at sizes fixed by the options and the
// index stays deterministic.
func (x *IVF) maybeRebuild() {
	n := x.ids.len()
	if n < x.opt.TrainAt || (x.trained > 0 && n < x.trained*x.opt.RetrainFactor) {
		return
	}
	if wg := x.rebuild; wg != nil {
		if x.trained == n {
			return // this retraining started at n
		}
		x.mu.Unlock()
		wg.Wait()
		x.mu.Lock()
	}
	snap, wg := x.startRebuild(n)
	go x.retrain(snap, n, x.opt.Seed, wg)
}

// startRebuild marks a retraining at n items begun and returns the
// lists as they are, for it; the caller holds mu and runs the
// retraining, which marks it done.
func (x *IVF) startRebuild(n int) ([]listSnap, *sync.WaitGroup) {
	x.trained = n
	st := x.st.Load()
	snap := make([]listSnap, len(st.lists))
	for i := range st.lists {
		d := st.lists[i].d.Load()
		snap[i] = listSnap{d, d.len()}
	}
	wg := new(sync.WaitGroup)
	wg.Add(1)
	x.rebuild = wg
	return snap, wg
}

// WaitRebuild waits for a running background retraining to finish.
func (x *IVF) WaitRebuild() {
	x.mu.Lock()
	wg := x.rebuild
	x.mu.Unlock()
	if wg != nil {
		wg.Wait()
	}
}

// entryVec returns e's vector: the referenced float32 one, else its
// normalised 4-bit decoding in buf.
func entryVec(e ivfEntry, buf []float32) []float32 {
	if e.vec != nil {
		return unsafe.Slice(e.vec, len(buf))
	}
	decode4(e.code, e.lo, e.step, buf)
	for i, c := range e.centre {
		buf[i] += c
	}
	Normalize(buf)
	return buf
}

// trainRand is the random source of a training at n items.
func trainRand(seed uint64, n int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(n)))
}

// quantiser trains the coarse quantiser of an index of n items on
// sample (at most ivfMaxSample of them): lists enough for n items grown
// RetrainFactor times to hold ListSize each.
func (x *IVF) quantiser(sample [][]float32, n int, rng *rand.Rand) *coarse {
	nlist := max(ivfMinLists, min(ivfMaxLists, n*x.opt.RetrainFactor/x.opt.ListSize, len(sample)/4))
	return trainCoarse(sample, x.dim, nlist, rng)
}

// trainFor trains x, untrained, for the n items about to be added, on a
// uniform sample of their unit vectors, as a retraining at n items
// would: a split's catch-alls' index before a fill adds them (fillSide).
// Added in the order of the parent's lists, which is by centroid, the
// catch-alls trained the index at 4,096 and 32,768 of them on a corner
// of the space each time: after a reopen of the medium bench's store
// the searches through the splits found 0.94 of their exact top 10
// under a selective filter against 0.96 from the index ingest built,
// and the trainings on the way to 262,144 items (the re-placing of
// every item included) took 4.4 of the 7.9 s of CPU of a 1M-edge
// store's fill (BENCHMARKS.md, fifty-fourth round). The training runs
// without x's lock; entries x took meanwhile (the items ingest adds
// beside the fill) are placed again in the new lists.
func (x *IVF) trainFor(sample [][]float32, n int) {
	if n < x.opt.TrainAt || len(sample) == 0 {
		return // the index trains itself as they come, as any does
	}
	x.mu.Lock()
	done := x.trained > 0 || x.rebuild != nil
	x.mu.Unlock()
	if done {
		return // trained already (read from a snapshot), or training
	}
	q := x.quantiser(sample, n, trainRand(x.opt.Seed, n))
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.trained > 0 || x.rebuild != nil {
		return // it trained meanwhile
	}
	old := x.st.Load()
	es := make([]ivfEntry, 0, x.ids.len())
	for li := range old.lists {
		d := old.lists[li].d.Load()
		for i := range d.len() {
			if !d.isDead(i) {
				es = append(es, d.entry(i, x.dim))
			}
		}
	}
	nst, nids := x.placeAll(q, es, x.ids.len())
	x.st.Store(nst)
	x.ids, x.deleted, x.trained = nids, 0, n
}

// placeAll returns a new state of q holding es, and the table of their
// ids (sized for expect). Each list is made with room for its entries
// and an eighth more, from a first pass that assigns every entry: grown
// from nothing a doubling at a time, the lists of a retraining at 32,768
// items made 19,700 more allocations and 8 MB more, copying entries on
// the way (BenchmarkIVFRetrain; BENCHMARKS.md, seventy-first round).
func (x *IVF) placeAll(q *coarse, es []ivfEntry, expect int) (*ivfState, idTable) {
	buf := make([]float32, x.dim)
	at := make([]int32, len(es))
	room := make([]int, q.nlist())
	// Both passes give way to waiting goroutines (a retraining runs
	// beside ingest), the second about every 64 entries: placing one
	// quantizes it against its list's centroid and appends it.
	gw := newGiveWay(q.assignDots())
	for i, e := range es {
		gw.step()
		prefetchVecAt(es, i+1, x.dim)
		l := q.assign(entryVec(e, buf))
		at[i] = int32(l)
		room[l]++
	}
	for l, r := range room {
		room[l] = r + r/8
	}
	st := newIVFState(q, x.dim, room)
	ids := idTable{expect: expect}
	var scratch coder
	gw = newGiveWay(giveWayDots / 64)
	for i, e := range es {
		gw.step()
		prefetchVecAt(es, i+1, x.dim)
		ids.put(e.id, x.placeIn(st, int(at[i]), e, entryVec(e, buf), &scratch))
	}
	return st, ids
}

// prefetchVecAt hints the float vector of es[i] (dim floats), if there
// is such an entry and it has one, into the caches: a retraining reads
// every entry's vector, 48 MB at 32,768 items, each at an address of
// its own, and the hint overlaps the next one's misses with the work
// on the current one.
func prefetchVecAt(es []ivfEntry, i, dim int) {
	if i < len(es) && es[i].vec != nil {
		PrefetchRange(unsafe.Pointer(es[i].vec), uintptr(dim)*4)
	}
}

// sameVector reports whether entry i of d holds the float vector entry j
// of e does: the same one, by address (an index keeps the vectors it is
// given and never writes them). Entries without one (read from a
// snapshot) are not compared.
func sameVector(d *listData, i int, e *listData, j int) bool {
	v := e.vecs[j].Load()
	return v != nil && v == d.vecs[i].Load()
}

// listSnap is a list's entries when a retraining started.
type listSnap struct {
	d *listData
	n int
}

// retrain trains a quantiser on a sample of the entries of snap (entries
// appended later are replayed), fills a new state and swaps it in.
func (x *IVF) retrain(snap []listSnap, n int, seed uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	dim := x.dim
	type ref struct {
		d *listData
		i int
	}
	var live []ref
	for _, ls := range snap {
		for i := range ls.n {
			if !ls.d.isDead(i) {
				live = append(live, ref{ls.d, i})
			}
		}
	}
	// By id: list order depends on how inserts and an earlier
	// retraining interleaved; the sample must not.
	slices.SortFunc(live, func(a, b ref) int { return cmp.Compare(a.d.ids[a.i], b.d.ids[b.i]) })
	rng := trainRand(seed, n)
	ns := min(len(live), ivfMaxSample)
	sample := make([][]float32, ns)
	for j, p := range rng.Perm(len(live))[:ns] {
		r := live[p]
		// The float vector itself when the entry has one: a copy of
		// each was 50 of a retraining's 87 MB allocated at 32,768 items.
		e := r.d.entry(r.i, dim)
		if e.vec != nil {
			sample[j] = unsafe.Slice(e.vec, dim)
		} else {
			sample[j] = entryVec(e, make([]float32, dim))
		}
	}
	q := x.quantiser(sample, n, rng)

	// An entry removed from here on is replayed below, as one added.
	es := make([]ivfEntry, 0, len(live))
	for _, r := range live {
		if !r.d.isDead(r.i) {
			es = append(es, r.d.entry(r.i, dim))
		}
	}
	nst, nids := x.placeAll(q, es, n)
	buf := make([]float32, dim)
	var scratch coder
	deleted := 0
	replay := func(id uint64) { // the caller holds mu
		cur, inCur := x.ids.get(id)
		var cd *listData // the current entry's list
		if inCur {
			cd = x.st.Load().lists[cur.list].d.Load()
		}
		if loc, ok := nids.get(id); ok {
			nd := nst.lists[loc.list].d.Load()
			if inCur && sameVector(nd, int(loc.pos), cd, int(cur.pos)) {
				// Its Meta alone may have changed: no need to place it
				// again (a quarter of the medium bench's replays).
				if m := cd.metas[cur.pos].meta(); m != nd.metas[loc.pos].meta() {
					x.metaIn(nst, &nids, &deleted, id, loc, m)
				}
				return
			}
			nd.markDead(int(loc.pos))
			nids.remove(id)
			deleted++
		}
		if inCur {
			e := cd.entry(int(cur.pos), dim)
			nids.put(id, x.place(nst, e, entryVec(e, buf), &scratch))
		}
	}
	// An id changed more than once is replayed once: the replay copies
	// it as it is now (a fifth of the medium bench's ids were repeats).
	// A round's ids are sorted outside the lock, which the indexer
	// waits for.
	once := func(ids []uint64) []uint64 {
		slices.Sort(ids)
		return slices.Compact(ids)
	}
	for {
		x.mu.Lock()
		ids := x.touched
		x.touched = nil
		if len(ids) <= 1024 {
			for _, id := range once(ids) {
				replay(id)
			}
			x.st.Store(nst)
			x.ids = nids
			x.deleted = deleted
			x.rebuild = nil
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
		for _, id := range once(ids) {
			x.mu.Lock()
			replay(id)
			x.mu.Unlock()
		}
	}
}
