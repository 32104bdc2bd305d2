package wave

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// IVFOptions configure an [IVF]. Zero fields take the defaults.
type IVFOptions struct {
	// NProbe is the number of nearest lists a search probes (default
	// 32) unless the lists left cannot hold a better item than its k-th
	// best, which it checks from an eighth of them on; a filtered search
	// probes more until it has seen enough items the filter admits.
	NProbe int
	// TrainAt is the number of vectors at which the coarse quantiser is
	// first trained (default 4096); below it the index is one list and
	// searches are exact. It is retrained each time the index grows by
	// RetrainFactor since the last training.
	TrainAt int
	// RetrainFactor is the growth that triggers a retraining (default 8).
	RetrainFactor int
	// ListSize is the mean list length a training aims for at
	// RetrainFactor times the size it trains at (default 256).
	ListSize int
	// Seed makes training deterministic.
	Seed uint64
}

// DefaultIVFOptions returns the defaults.
func DefaultIVFOptions() IVFOptions {
	var o IVFOptions
	o.ensureDefaults()
	return o
}

func (o *IVFOptions) ensureDefaults() {
	if o.NProbe <= 0 {
		o.NProbe = 32
	}
	if o.TrainAt <= 0 {
		o.TrainAt = 4096
	}
	if o.RetrainFactor <= 1 {
		o.RetrainFactor = 8
	}
	if o.ListSize <= 0 {
		o.ListSize = 256
	}
}

// Bounds on the quantiser: lists, and vectors sampled to train it.
const (
	ivfMaxLists  = 4096
	ivfMinLists  = 16
	ivfMaxSample = 48 * 1024
)

// IVF is an inverted-file [Index] for L2-normalised vectors, built for
// fast inserts and filtered search.
//
// # Storage
//
// A two-level k-means coarse quantiser (see coarse) splits the vectors
// into inverted lists; a leaf that would hold over twice the mean share
// of the training sample is split by k-means of its members (see
// appendBalanced), so that a query near a dense region scans lists of
// about the usual length. Each list holds, contiguously by position, the
// ids, a compact [Meta], a tombstone flag, 4-bit codes with a
// per-vector offset and step (quant4.go), and a reference to the caller's float32 vector for exact
// rescoring. IVF does not copy float vectors: [IVF.Add] keeps vec, and
// the caller must not modify it afterwards (a vector that is not unit
// length is the exception: IVF keeps a normalised copy).
//
// An insert quantises the vector and finds its list with about 2·√nlist
// dot products, a few µs. Until TrainAt vectors exist the index is one
// list (searches are exact); training then runs in the background, on a
// sample, and again whenever the index has grown RetrainFactor times,
// while searches and inserts go on (see rebuild).
//
// # Search
//
// A search ranks the lists by their centroid's similarity to the query
// and scans the nearest NProbe (or from an eighth of them on, stops as soon
// as the lists left cannot hold a better item than its k-th best),
// checking the cheap Meta fields of the filter inline before scoring and
// asking [Filter.Allow] only about an item that would enter the result
// heap. When the filter admits few items it keeps probing further lists
// (up to all of them, which is exact) until it has seen enough admitted
// ones. The best candidates by
// 4-bit score are rescored with the float32 vectors.
//
// # Concurrency
//
// Searches take no lock: they read the current state through atomic
// pointers, and lists publish appended entries with an atomic length.
// Writers (Add, Remove, SetMeta, Attach, Cleanup) serialise on a mutex
// held for microseconds, so the planner never waits on ingest.
type IVF struct {
	dim    int
	opt    IVFOptions
	nprobe atomic.Int32
	st     atomic.Pointer[ivfState]
	pool   sync.Pool // *ivfSearcher

	mu      sync.Mutex
	ids     idTable // live id -> position
	deleted int     // tombstones in the current state
	// trained is the size the current quantiser was trained at (0: not
	// yet); retraining starts at RetrainFactor times it.
	trained int
	// rebuild is set while a background retraining runs; touched
	// collects the ids changed meanwhile, which it replays.
	rebuild *sync.WaitGroup
	touched []uint64
	// changed records the items given a vector since ExpectSplits, while
	// a load of the splits waits to read them (nil otherwise).
	changed map[uint64]struct{}
	scratch coder // the writer's, under mu
	// sides are the splits by agent and by time (nil: none; see
	// ivf_side.go).
	sides [splitKinds]atomic.Pointer[ivfSide]
}

// ivfState is one quantiser and its lists; a retraining swaps in a new
// state.
type ivfState struct {
	q     *coarse // nil: one list, exact
	lists []ivfList
}

// ivfLoc is an entry's position: list and index in it.
type ivfLoc struct{ list, pos uint32 }

var _ Index = (*IVF)(nil)

// NewIVF returns an empty IVF index over dim-dimensional vectors. It
// panics if dim is not positive.
func NewIVF(dim int, o IVFOptions) *IVF {
	if dim <= 0 || dim > maxDim {
		panic(fmt.Sprintf("wave: NewIVF: dimension %d out of range", dim))
	}
	o.ensureDefaults()
	x := &IVF{dim: dim, opt: o}
	x.nprobe.Store(int32(o.NProbe))
	x.st.Store(newIVFState(nil, dim, nil))
	x.pool.New = func() any { return new(ivfSearcher) }
	return x
}

// newIVFState returns a state with q's lists (one without q), empty,
// list i with room for room[i] entries (none when room is nil).
func newIVFState(q *coarse, dim int, room []int) *ivfState {
	n := 1
	if q != nil {
		n = q.nlist()
		if q.leafCodes == nil {
			q.quantizeLeaves()
		}
	}
	st := &ivfState{q: q, lists: make([]ivfList, n)}
	for i := range st.lists {
		capacity := 0
		if room != nil {
			capacity = room[i]
		}
		d := newListData(capacity, dim)
		if q != nil {
			d.centre = q.leaf(i)
		}
		st.lists[i].d.Store(d)
	}
	return st
}

// Dim returns the vector dimension.
func (x *IVF) Dim() int { return x.dim }

// Len returns the number of live vectors.
func (x *IVF) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ids.len()
}

// Lists returns the number of inverted lists (1 before training).
func (x *IVF) Lists() int { return len(x.st.Load().lists) }

// ListStats describes an IVF's inverted lists as searches walk them: the
// entries each list has published, tombstones included (its splits'
// lists apart).
type ListStats struct {
	Lists   int
	Entries int
	// Seen is the mean length of the list an entry lies in
	// (Σ len² / Σ len): what a search walks, on average, where an item
	// lies. Uneven lists make it larger than Entries / Lists.
	Seen    float64
	Longest int
}

// ListStats returns the lengths of x's inverted lists, read without its
// lock: a retraining's new lists once it has swapped them in.
func (x *IVF) ListStats() ListStats {
	st := x.st.Load()
	s := ListStats{Lists: len(st.lists)}
	var sq float64
	for i := range st.lists {
		n := st.lists[i].d.Load().len()
		s.Entries += n
		sq += float64(n) * float64(n)
		s.Longest = max(s.Longest, n)
	}
	if s.Entries > 0 {
		s.Seen = sq / float64(s.Entries)
	}
	return s
}

// SetNProbe sets the number of lists an unfiltered search probes at
// most, unless the bound rules out a better item than its k-th best
// sooner (from an eighth of them on; IVFOptions.NProbe).
func (x *IVF) SetNProbe(n int) { x.nprobe.Store(int32(max(1, n))) }

// NProbe returns the number of lists an unfiltered search probes at
// most (see SetNProbe).
func (x *IVF) NProbe() int { return int(x.nprobe.Load()) }

// Options returns the options the index was built with.
func (x *IVF) Options() IVFOptions { return x.opt }

// Has reports whether id is in the index.
func (x *IVF) Has(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ids.has(id)
}

// CleanupDue reports whether an index holding live entries and
// tombstones removed ones is due a compaction: once they pass 5% of it
// (and 64), the rule the planner's indexer applies to an index and a
// split applies to its own lists.
func CleanupDue(tombstones, live int) bool { return tombstones > 64 && tombstones*20 > live }

// Tombstones is the number of removed entries not yet compacted away.
func (x *IVF) Tombstones() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.deleted
}

// Add inserts or replaces the vector of id. IVF keeps vec (see the type
// doc): the caller must not modify it later. It fails with
// [ErrDimension] or [ErrNonFinite].
func (x *IVF) Add(id uint64, vec []float32, m Meta) error {
	if err := checkVec(vec, x.dim); err != nil {
		return err
	}
	vec = unit(vec)
	e := ivfEntry{id: id, meta: packMeta(m), vec: &vec[0]}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(id)
	x.noteChanged(id)
	st := x.st.Load()
	x.ids.put(id, x.place(st, e, vec, &x.scratch))
	x.sidesDo(func(sd *ivfSide) { x.sideAdd(sd, id, vec, m) })
	x.touch(id)
	x.maybeRebuild()
	return nil
}

// noteChanged records that id was given a vector, for a load of the
// splits waiting (ExpectSplits); the caller holds mu.
func (x *IVF) noteChanged(id uint64) {
	if x.changed != nil {
		x.changed[id] = struct{}{}
	}
}

// unit returns v if it is unit length (or zero), else a normalised copy.
func unit(v []float32) []float32 {
	ss := dot(v, v) // the SIMD kernel: a reopen asks this of every vector
	if ss == 0 || unitNorm(ss) {
		return v
	}
	c := append([]float32(nil), v...)
	Normalize(c)
	return c
}

// place appends e (whose vector is vec) to its list in st, coding the
// residual from the list's centre with scratch.
func (x *IVF) place(st *ivfState, e ivfEntry, vec []float32, scratch *coder) ivfLoc {
	l := 0
	if st.q != nil {
		l = st.q.assign(vec)
	}
	return x.placeIn(st, l, e, vec, scratch)
}

// placeIn appends e (whose vector is vec) to list l of st.
func (x *IVF) placeIn(st *ivfState, l int, e ivfEntry, vec []float32, scratch *coder) ivfLoc {
	list := &st.lists[l]
	e.code, e.lo, e.step = scratch.residual(vec, list.d.Load().centre)
	return ivfLoc{uint32(l), uint32(list.push(e, x.dim))}
}

// coder is the scratch of coding residuals.
type coder struct {
	res  []float32
	code []byte
}

// residual returns the 4-bit code of vec − centre (vec itself when centre
// is nil), valid until the next call, with its lo and step.
func (c *coder) residual(vec, centre []float32) ([]byte, float32, float32) {
	if len(c.res) != len(vec) {
		c.res = make([]float32, len(vec))
		c.code = make([]byte, nibbleBytes(len(vec)))
	}
	if centre == nil || len(vec) == 0 {
		lo, step := quantize4(vec, c.code)
		return c.code, lo, step
	}
	// The residual and its range in one pass.
	r := c.res[:len(vec)]
	lo, hi := residualMinMax(vec, centre, r)
	lo, step := pack4(r, c.code, lo, hi)
	return c.code, lo, step
}

// Remove deletes id and reports whether it was present. Its entry stays
// as a tombstone until [IVF.Cleanup].
func (x *IVF) Remove(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	ok := x.removeLocked(id)
	if ok {
		x.touch(id)
	}
	return ok
}

func (x *IVF) removeLocked(id uint64) bool {
	loc, ok := x.ids.get(id)
	if !ok {
		return false
	}
	d := x.st.Load().lists[loc.list].d.Load()
	d.markDead(int(loc.pos))
	x.ids.remove(id)
	x.deleted++
	x.sidesDo(func(sd *ivfSide) { x.sideRemove(sd, id) })
	return true
}

// SetMeta replaces the Meta of id, keeping its vector, and reports
// whether id is present.
func (x *IVF) SetMeta(id uint64, m Meta) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.setMetaLocked(id, m)
}

func (x *IVF) setMetaLocked(id uint64, m Meta) bool {
	loc, ok := x.ids.get(id)
	if !ok {
		return false
	}
	x.setMetaAt(id, loc, m)
	return true
}

// setMetaAt is setMetaLocked for id at loc.
func (x *IVF) setMetaAt(id uint64, loc ivfLoc, m Meta) {
	d := x.st.Load().lists[loc.list].d.Load()
	if d.metas[loc.pos].meta() == m && x.sidesHold(id) {
		// Nothing changes: an item reinforced with its Meta as it was,
		// in every split already (a quarter of the medium bench's
		// calls; the others move the scope's end or the confidence).
		return
	}
	x.sidesDo(func(sd *ivfSide) { x.sideSetMeta(sd, id, d.vecs[loc.pos].Load(), m) })
	x.metaIn(x.st.Load(), &x.ids, &x.deleted, id, loc, m)
	x.touch(id)
}

// metaIn gives the entry of id at loc in st the Meta m; ids and deleted
// are st's table of ids and count of tombstones.
func (x *IVF) metaIn(st *ivfState, ids *idTable, deleted *int, id uint64, loc ivfLoc, m Meta) {
	d := st.lists[loc.list].d.Load()
	nm := &d.metas[loc.pos]
	if nm.fixedDiffer(m) {
		// Fields written once: re-append the entry with the new Meta.
		e := d.entry(int(loc.pos), x.dim)
		e.meta = packMeta(m)
		e.code = append([]byte(nil), e.code...)
		d.markDead(int(loc.pos))
		*deleted++
		ids.put(id, ivfLoc{loc.list, uint32(st.lists[loc.list].push(e, x.dim))})
	} else {
		nm.setMutable(m)
		d.widenAt(int(loc.pos))
	}
}

// Attach gives id (loaded from a snapshot, which holds no float vectors)
// its float32 vector for exact rescoring, and reports whether id is
// present. Like Add, IVF keeps vec. Until attached, an item is scored
// from its 4-bit code.
func (x *IVF) Attach(id uint64, vec []float32) bool {
	return x.attach(id, vec, nil)
}

// AttachMeta is Attach and SetMeta in one step (one lock and look-up per
// item when an index is filled from its snapshot).
func (x *IVF) AttachMeta(id uint64, vec []float32, m Meta) bool {
	return x.attach(id, vec, &m)
}

func (x *IVF) attach(id uint64, vec []float32, m *Meta) bool {
	if len(vec) != x.dim {
		return false
	}
	vec = unit(vec)
	x.mu.Lock()
	defer x.mu.Unlock()
	loc, ok := x.ids.get(id)
	if !ok {
		return false
	}
	d := x.st.Load().lists[loc.list].d.Load()
	d.vecs[loc.pos].Store(&vec[0])
	x.noteChanged(id)
	if m != nil {
		x.setMetaAt(id, loc, *m) // touches id; the split takes the vector
		return true
	}
	x.sidesDo(func(sd *ivfSide) {
		if !sd.has(id) {
			x.sideAdd(sd, id, vec, d.metas[loc.pos].meta())
		}
	})
	x.touch(id)
	return true
}

// Cleanup compacts the lists holding tombstones and returns the number
// removed. During a background retraining it does nothing (the new
// lists hold no tombstones). It compacts the splits, if any, as well
// (not counted).
func (x *IVF) Cleanup() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.sidesDo(x.sideCleanup)
	if x.rebuild != nil || x.deleted == 0 {
		return 0
	}
	st := x.st.Load()
	removed := 0
	for li := range st.lists {
		removed += st.lists[li].compact(x.dim, func(id uint64, pos int) { x.ids.put(id, ivfLoc{uint32(li), uint32(pos)}) })
	}
	x.deleted -= removed
	return removed
}

// Bytes returns the approximate memory held by the index, without the
// float vectors it references.
func (x *IVF) Bytes() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.st.Load()
	n := 0
	for i := range st.lists {
		n += st.lists[i].d.Load().bytes(x.dim)
	}
	if st.q != nil {
		n += 4 * (len(st.q.leaves) + len(st.q.top))
	}
	x.sidesDo(func(sd *ivfSide) { n += sd.bytes(x.dim) })
	return n + x.ids.bytes()
}
