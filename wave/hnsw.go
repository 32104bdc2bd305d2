package wave

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// HNSWOptions configures an [HNSW] index. Start from [DefaultHNSWOptions];
// zero fields take their defaults.
type HNSWOptions struct {
	// M is the number of neighbours a node links to on insert; layer 0
	// keeps up to 2*M per node, upper layers M. Default 16.
	M int
	// EfConstruction is the candidate list size while inserting.
	// Default 200.
	EfConstruction int
	// EfSearch is the candidate list size while searching (never less
	// than k). Default 96: recall@10 about 0.955 on 200k x 384 clustered
	// vectors (0.943 at 80, 0.98 at 128); see [HNSW.SetEfSearch].
	EfSearch int
	// Seed seeds the level generator. Building with one goroutine from
	// one seed gives the same graph every time.
	Seed uint64
}

// DefaultHNSWOptions returns the default options.
func DefaultHNSWOptions() HNSWOptions {
	return HNSWOptions{M: 16, EfConstruction: 200, EfSearch: 96}
}

func (o *HNSWOptions) ensureDefaults() {
	d := DefaultHNSWOptions()
	if o.M <= 0 {
		o.M = d.M
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = d.EfConstruction
	}
	if o.EfSearch <= 0 {
		o.EfSearch = d.EfSearch
	}
}

const (
	// maxLevel bounds node levels; P(level >= 24) is M^-24.
	maxLevel = 24
	// maxM bounds HNSWOptions.M.
	maxM = 128
	// maxDim bounds the dimension (it also bounds snapshot allocations).
	maxDim = 1 << 16

	// exactMin: a filter whose candidate set is at most this big is
	// always answered by exact search over the set.
	exactMin = 4096
	// exactFrac: a filter estimated to admit less than this fraction of
	// the items is answered by exact search.
	exactFrac = 0.02
	// sampleSize is how many items the selectivity estimate asks.
	sampleSize = 256
)

// Slot states. A slot is free (unused, reusable), live (searchable),
// deleted (a tombstone: still routes searches, never returned) or
// condemned (a tombstone being unlinked by Cleanup).
const (
	stateFree uint32 = iota
	stateLive
	stateDeleted
	stateCondemned
)

// HNSW is an approximate nearest-neighbour [Index]: a hierarchical
// navigable small world graph (Malkov & Yashunin, 2016) over
// L2-normalised vectors, scored by dot product.
//
// # Storage
//
// Nodes live in slots (uint32). Slots are grouped in fixed pages holding
// the vectors contiguously, their int8 quantisation, the ids, a compact
// [Meta] copy, the state, the level and the layer-0 neighbour lists, so a
// search touches no maps. Pages never move; the page directory is
// swapped atomically on growth.
//
// Searches walk the graph scoring the int8 codes (a quarter of the
// memory traffic of float32, which bounds search speed at 384-d) and
// rescore the best candidates with the float32 vectors, so returned
// scores are exact. Inserts build the graph from the float32 vectors.
//
// # Concurrency
//
// Search takes no lock besides a shared read lock (the gate). Add links a
// node while other searches and adds run: each node's neighbour lists are
// guarded by a per-node mutex for writers and read with atomic loads.
// Remove and replacing Add leave a tombstone that keeps routing searches
// but is never returned; [HNSW.Cleanup] unlinks tombstones and recycles
// their slots after waiting (via the gate) for searches that may still
// see them.
//
// Lock order: wmu, gate, cleanMu, levelMu, a node lock, mu. mu and node
// locks are leaves held briefly.
type HNSW struct {
	dim     int
	m, m0   int
	efC     int
	efS     atomic.Int32
	seed    uint64
	mL      float64
	stride0 int // (m0+1) uint32: count then neighbours
	strideU int // (m+1) uint32 per upper layer
	shift   uint
	mask    uint32

	// wmu is held shared by mutations and exclusively by WriteTo, so a
	// snapshot sees no half-done mutation while searches go on.
	wmu sync.RWMutex
	// gate is held shared by every operation that walks the graph.
	// Cleanup takes it exclusively as a barrier before reusing slots.
	gate    sync.RWMutex
	cleanMu sync.Mutex
	// levelMu serialises inserts that raise the top level.
	levelMu sync.Mutex
	// top is the entry point: 0 = empty, else 1<<63 | level<<32 | slot.
	top atomic.Uint64

	dir    atomic.Pointer[[]*hnswPage]
	nslots atomic.Uint32 // slot high-water mark

	mu       sync.Mutex
	ids      map[uint64]uint32 // live id -> slot
	free     []uint32
	rng      *rand.Rand
	deleted  int                 // tombstones (deleted + condemned)
	postings map[uint64][]uint32 // postingKey -> slots in allocation order

	pool sync.Pool // *searcher
}

var _ Index = (*HNSW)(nil)

// hnswPage holds 1<<HNSW.shift slots.
type hnswPage struct {
	vecs   []float32
	codes  []int8    // int8 quantisation of vecs, dim per slot
	scales []float32 // vecs[i] ≈ scales[slot] * codes[i]
	ids    []uint64
	metas  []nodeMeta
	state  []atomic.Uint32
	levels []uint8
	links0 []uint32   // stride0 per slot
	upper  [][]uint32 // per slot: level*strideU, layers 1..level
	locks  []sync.Mutex
}

// nodeMeta is Meta packed into 32 bytes. time, end, agent and place may
// change in place ([HNSW.SetMeta], [IVF.SetMeta]) while searches read
// them: they are accessed atomically once the slot is live.
type nodeMeta struct {
	time  int64
	end   int64
	ns    uint32
	agent uint32
	// place is the site key << 8 | the confidence level.
	place uint32
	kind  Kind
	typ   uint8
}

// fixedDiffer reports whether m changes a field of nm written once
// (namespace, kind, type): an index then re-appends the entry.
func (nm *nodeMeta) fixedDiffer(m Meta) bool {
	return nm.ns != m.Namespace || nm.kind != m.Kind || nm.typ != m.Type
}

func packPlace(m Meta) uint32 { return (m.Site&siteMask)<<8 | uint32(m.Confidence) }

func packMeta(m Meta) nodeMeta {
	return nodeMeta{time: m.Time, end: m.End, ns: m.Namespace, agent: m.Agent, place: packPlace(m), kind: m.Kind, typ: m.Type}
}

func (m *nodeMeta) meta() Meta {
	place := atomic.LoadUint32(&m.place)
	return Meta{Kind: m.kind, Namespace: m.ns, Type: m.typ,
		Time: atomic.LoadInt64(&m.time), End: atomic.LoadInt64(&m.end),
		Agent: atomic.LoadUint32(&m.agent), Site: place >> 8, Confidence: uint8(place)}
}

// setMutable writes m's fields that change in place (the writer only).
func (m *nodeMeta) setMutable(to Meta) {
	atomic.StoreInt64(&m.time, to.Time)
	atomic.StoreInt64(&m.end, to.End)
	atomic.StoreUint32(&m.agent, to.Agent)
	atomic.StoreUint32(&m.place, packPlace(to))
}

// cand is a scored slot.
type cand struct {
	score float32
	slot  uint32
}

func packTop(slot uint32, level int) uint64 { return 1<<63 | uint64(level)<<32 | uint64(slot) }
func topSlot(t uint64) uint32               { return uint32(t) }
func topLevel(t uint64) int                 { return int(t>>32) & 0xff }

// NewHNSW returns an empty HNSW index over dim-dimensional vectors.
// It panics if dim is not in [1, 65536] or o.M exceeds 128.
func NewHNSW(dim int, o HNSWOptions) *HNSW {
	if dim <= 0 || dim > maxDim {
		panic(fmt.Sprintf("wave: NewHNSW: dimension %d not in [1, %d]", dim, maxDim))
	}
	o.ensureDefaults()
	if o.M > maxM {
		panic(fmt.Sprintf("wave: NewHNSW: M %d > %d", o.M, maxM))
	}
	if o.M < 2 {
		o.M = 2
	}
	h := &HNSW{
		dim:      dim,
		m:        o.M,
		m0:       2 * o.M,
		efC:      o.EfConstruction,
		seed:     o.Seed,
		mL:       1 / math.Log(float64(o.M)),
		ids:      make(map[uint64]uint32),
		postings: make(map[uint64][]uint32),
		rng:      rand.New(rand.NewPCG(o.Seed, 0x5851f42d4c957f2d)),
	}
	h.efS.Store(int32(min(o.EfSearch, math.MaxInt32)))
	h.stride0 = h.m0 + 1
	h.strideU = h.m + 1
	// About 1 MiB of vectors per page, between 1 and 1024 slots.
	per := (1 << 20) / (4 * dim)
	h.shift = uint(min(10, max(0, bits.Len(uint(per))-1)))
	h.mask = 1<<h.shift - 1
	h.dir.Store(new([]*hnswPage))
	h.pool.New = func() any { return new(searcher) }
	return h
}

// Dim returns the vector dimension.
func (h *HNSW) Dim() int { return h.dim }

// Len returns the number of live vectors.
func (h *HNSW) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// Tombstones returns the number of removed or replaced vectors still
// held in the graph; [HNSW.Cleanup] reclaims them.
func (h *HNSW) Tombstones() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deleted
}

// SetEfSearch sets the search candidate list size (see
// [HNSWOptions.EfSearch]); ef <= 0 restores the default.
func (h *HNSW) SetEfSearch(ef int) {
	if ef <= 0 {
		ef = DefaultHNSWOptions().EfSearch
	}
	h.efS.Store(int32(min(ef, math.MaxInt32)))
}

// EfSearch returns the search candidate list size.
func (h *HNSW) EfSearch() int { return int(h.efS.Load()) }

// Options returns the options the index was built with.
func (h *HNSW) Options() HNSWOptions {
	return HNSWOptions{M: h.m, EfConstruction: h.efC, EfSearch: h.EfSearch(), Seed: h.seed}
}

func (h *HNSW) newPage() *hnswPage {
	n := 1 << h.shift
	return &hnswPage{
		vecs:   make([]float32, n*h.dim),
		codes:  make([]int8, n*h.dim),
		scales: make([]float32, n),
		ids:    make([]uint64, n),
		metas:  make([]nodeMeta, n),
		state:  make([]atomic.Uint32, n),
		levels: make([]uint8, n),
		links0: make([]uint32, n*h.stride0),
		upper:  make([][]uint32, n),
		locks:  make([]sync.Mutex, n),
	}
}

// page returns the page and index within it of slot s.
func (h *HNSW) page(s uint32) (*hnswPage, int) {
	return (*h.dir.Load())[s>>h.shift], int(s & h.mask)
}

// vec returns the stored vector of slot s.
func (h *HNSW) vec(s uint32) []float32 {
	p, i := h.page(s)
	o := i * h.dim
	return p.vecs[o : o+h.dim : o+h.dim]
}

// list returns the neighbour list of node i of p on layer l: element 0
// is the count, then the neighbours. Readers use atomic loads; writers
// hold the node lock and use atomic stores.
func (h *HNSW) list(p *hnswPage, i, l int) []uint32 {
	if l == 0 {
		return p.links0[i*h.stride0 : (i+1)*h.stride0 : (i+1)*h.stride0]
	}
	return p.upper[i][(l-1)*h.strideU : l*h.strideU : l*h.strideU]
}

// readList appends the neighbours in l to buf.
func readList(l []uint32, buf []uint32) []uint32 {
	n := int(atomic.LoadUint32(&l[0]))
	n = min(n, len(l)-1)
	for j := 1; j <= n; j++ {
		buf = append(buf, atomic.LoadUint32(&l[j]))
	}
	return buf
}

// writeList replaces the neighbours in l; the caller holds the node lock.
func writeList(l []uint32, ns []cand) {
	for j, c := range ns {
		atomic.StoreUint32(&l[j+1], c.slot)
	}
	atomic.StoreUint32(&l[0], uint32(len(ns)))
}

func postingKey(field byte, v uint32) uint64 { return uint64(field)<<32 | uint64(v) }

const (
	fieldNamespace byte = 1 + iota
	fieldKind
	fieldType
)

// addPostings records slot s under m's cheap fields; the caller holds mu.
func (h *HNSW) addPostings(s uint32, m Meta) {
	for _, k := range [...]uint64{
		postingKey(fieldNamespace, m.Namespace),
		postingKey(fieldKind, uint32(m.Kind)),
		postingKey(fieldType, uint32(m.Type)),
	} {
		h.postings[k] = append(h.postings[k], s)
	}
}

func (h *HNSW) randomLevel() int {
	u := 1 - h.rng.Float64() // (0, 1]
	return min(int(-math.Log(u)*h.mL), maxLevel)
}

// Add inserts or replaces the vector of id. The vector is copied and
// L2-normalised (a zero vector is kept and scores 0). Replacing inserts
// a new node and leaves the old one as a tombstone. It fails with
// [ErrDimension] or [ErrNonFinite].
func (h *HNSW) Add(id uint64, vec []float32, m Meta) error {
	if err := checkVec(vec, h.dim); err != nil {
		return err
	}
	h.wmu.RLock()
	defer h.wmu.RUnlock()
	h.gate.RLock()
	defer h.gate.RUnlock()

	slot, level := h.alloc(m)
	p, i := h.page(slot)
	p.locks[i].Lock()
	v := p.vecs[i*h.dim : (i+1)*h.dim]
	copy(v, vec)
	Normalize(v)
	p.scales[i] = quantize(v, p.codes[i*h.dim:(i+1)*h.dim])
	p.ids[i] = id
	p.metas[i] = packMeta(m)
	p.levels[i] = uint8(level)
	atomic.StoreUint32(&p.links0[i*h.stride0], 0)
	if level > 0 {
		p.upper[i] = make([]uint32, level*h.strideU)
	} else {
		p.upper[i] = nil
	}
	p.state[i].Store(stateLive)
	p.locks[i].Unlock()

	h.link(slot, level)

	h.mu.Lock()
	if old, ok := h.ids[id]; ok {
		op, oi := h.page(old)
		if op.state[oi].CompareAndSwap(stateLive, stateDeleted) {
			h.deleted++
		}
	}
	h.ids[id] = slot
	h.mu.Unlock()
	return nil
}

// alloc reserves a slot and draws its level.
func (h *HNSW) alloc(m Meta) (uint32, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	level := h.randomLevel()
	var s uint32
	if n := len(h.free); n > 0 {
		s = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		s = h.nslots.Load()
		if s == math.MaxUint32 {
			panic("wave: HNSW full")
		}
		if int(s>>h.shift) >= len(*h.dir.Load()) {
			d := append(slices.Clip(*h.dir.Load()), h.newPage())
			h.dir.Store(&d)
		}
		h.nslots.Store(s + 1)
	}
	h.addPostings(s, m)
	return s, level
}

// link connects a freshly written node to the graph.
func (h *HNSW) link(slot uint32, level int) {
	h.levelMu.Lock()
	top := h.top.Load()
	if top == 0 {
		h.top.Store(packTop(slot, level))
		h.levelMu.Unlock()
		return
	}
	tl := topLevel(top)
	if level > tl {
		defer h.levelMu.Unlock()
	} else {
		h.levelMu.Unlock()
	}

	s := h.getSearcher()
	defer h.pool.Put(s)
	q := h.vec(slot)
	ep := topSlot(top)
	epScore := dot(q, h.vec(ep))
	for l := tl; l > level; l-- {
		ep, epScore = h.greedy(s, q, ep, epScore, l, false)
	}
	s.entries = append(s.entries[:0], cand{epScore, ep})
	for l := min(level, tl); l >= 0; l-- {
		s.begin(h)
		s.visit(slot) // never link to itself
		w := h.searchLayer(s, q, s.entries, h.efC, l, nil, false)
		s.sel = h.heuristic(w, h.m, s.sel[:0])
		for _, c := range s.sel {
			h.addLink(s, slot, c.slot, c.score, l)
			h.addLink(s, c.slot, slot, c.score, l)
		}
		if len(w) > 0 {
			s.entries = append(s.entries[:0], w...)
		}
	}
	if level > tl {
		h.top.Store(packTop(slot, level))
	}
}

// addLink adds nb (scoring sc against target) to target's list on layer
// l, shrinking the list with the heuristic when it is full.
func (h *HNSW) addLink(s *searcher, target, nb uint32, sc float32, l int) {
	p, i := h.page(target)
	p.locks[i].Lock()
	defer p.locks[i].Unlock()
	if st := p.state[i].Load(); st == stateFree || int(p.levels[i]) < l {
		return
	}
	ls := h.list(p, i, l)
	n := int(ls[0])
	for _, x := range ls[1 : n+1] {
		if x == nb {
			return
		}
	}
	if n < len(ls)-1 {
		atomic.StoreUint32(&ls[n+1], nb)
		atomic.StoreUint32(&ls[0], uint32(n+1))
		return
	}
	tv := h.vec(target)
	cs := append(s.shrink[:0], cand{sc, nb})
	for _, x := range ls[1 : n+1] {
		xp, xi := h.page(x)
		if xp.state[xi].Load() != stateLive {
			continue // drop tombstones while we are here
		}
		cs = append(cs, cand{dot(tv, h.vec(x)), x})
	}
	sortCands(cs)
	s.shrink = cs
	s.sel2 = h.heuristic(cs, len(ls)-1, s.sel2[:0])
	writeList(ls, s.sel2)
}

// heuristic appends to out up to m of cs (sorted best first), keeping a
// candidate only if it is closer to the base than to every candidate
// kept so far (HNSW's neighbour selection heuristic). Fewer than m
// candidates are all kept.
func (h *HNSW) heuristic(cs []cand, m int, out []cand) []cand {
	if len(cs) <= m {
		return append(out, cs...)
	}
	for _, c := range cs {
		if len(out) >= m {
			break
		}
		vc := h.vec(c.slot)
		good := true
		for _, o := range out {
			if dot(vc, h.vec(o.slot)) > c.score {
				good = false
				break
			}
		}
		if good {
			out = append(out, c)
		}
	}
	return out
}

func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.slot < b.slot:
			return -1
		case a.slot > b.slot:
			return 1
		}
		return 0
	})
}

// greedy walks layer l from ep to the best node reachable by single
// improving steps.
func (h *HNSW) greedy(s *searcher, q []float32, ep uint32, epScore float32, l int, quant bool) (uint32, float32) {
	for changed := true; changed; {
		changed = false
		p, i := h.page(ep)
		s.buf = readList(h.list(p, i, l), s.buf[:0])
		for _, n := range s.buf {
			if d := h.score(q, n, quant); d > epScore {
				ep, epScore, changed = n, d, true
			}
		}
	}
	return ep, epScore
}

// score returns the similarity of q to slot s: exact, or from the int8
// codes (a quarter of the memory traffic) when quant is set.
func (h *HNSW) score(q []float32, s uint32, quant bool) float32 {
	p, i := h.page(s)
	o := i * h.dim
	if quant {
		return CodeDot(q, p.codes[o:o+h.dim:o+h.dim], p.scales[i])
	}
	return dot(q, p.vecs[o:o+h.dim:o+h.dim])
}

// rerank rescores the best candidates of w (sorted best first, scored
// from the int8 codes) with the exact vectors and sorts them again. The
// quantisation error (about 1e-3) only reorders near-ties, so the best
// 4k (at least 40) are enough; and it stops, those after dropped, once
// the next candidate's code score, bounded as the IVF's rerank bounds a
// 4-bit one (rerankBound, with the largest scale of the codes in w for
// a step), is under the k-th best exact score of distinct ids. Each
// vector is hinted rerankAhead candidates before it is read.
func (h *HNSW) rerank(q []float32, w []cand, k int) []cand {
	w = w[:min(len(w), max(4*k, 40))]
	var scale float32
	for _, c := range w {
		p, i := h.page(c.slot)
		scale = max(scale, p.scales[i])
	}
	qn := float32(math.Sqrt(float64(dot(q, q))))
	hint := func(j int) {
		if j < len(w) {
			prefetch(&h.vec(w[j].slot)[0])
		}
	}
	for j := range min(rerankAhead, len(w)) {
		hint(j)
	}
	var room [64]Hit
	best := bestDistinct{k: k, h: room[:0]}
	for j := range w {
		if t, ok := best.kth(); ok && rerankBound(w[j].score, scale, qn) < t {
			w = w[:j] // neither this candidate nor any after it can rank
			break
		}
		hint(j + rerankAhead)
		w[j].score = h.score(q, w[j].slot, false)
		p, i := h.page(w[j].slot)
		best.push(p.ids[i], w[j].score)
	}
	sortCands(w)
	return w
}

// bestDistinct holds the k best scores of distinct ids pushed to it,
// best first.
type bestDistinct struct {
	k int
	h []Hit
}

// push offers id's score sc (an id pushed again keeps its best).
func (b *bestDistinct) push(id uint64, sc float32) {
	for i, e := range b.h {
		if e.ID == id {
			if sc <= e.Score {
				return
			}
			b.h = slices.Delete(b.h, i, i+1)
			break
		}
	}
	at := len(b.h)
	for at > 0 && sc > b.h[at-1].Score {
		at--
	}
	if at < b.k {
		b.h = slices.Insert(b.h, at, Hit{ID: id, Score: sc})
		b.h = b.h[:min(len(b.h), b.k)]
	}
}

// kth is the k-th best score, once k ids have one.
func (b *bestDistinct) kth() (float32, bool) {
	if b.k <= 0 || len(b.h) < b.k {
		return 0, false
	}
	return b.h[b.k-1].Score, true
}

// admit reports whether slot s may be returned under f (nil = any).
func (h *HNSW) admit(s uint32, f *Filter) bool {
	p, i := h.page(s)
	if p.state[i].Load() != stateLive {
		return false
	}
	return f == nil || f.Admits(p.ids[i], p.metas[i].meta())
}

// searchLayer runs the HNSW beam search on layer l from entries, keeping
// the ef best admitted nodes; it traverses nodes f rejects (and
// tombstones) but does not collect them. It returns the result best
// first, in s.out. The caller has called s.begin.
func (h *HNSW) searchLayer(s *searcher, q []float32, entries []cand, ef, l int, f *Filter, quant bool) []cand {
	s.cand = s.cand[:0]
	s.res = s.res[:0]
	for _, e := range entries {
		if !s.visit(e.slot) {
			continue
		}
		s.pushCand(e)
		if h.admit(e.slot, f) {
			s.pushRes(e, ef)
		}
	}
	for len(s.cand) > 0 {
		c := s.popCand()
		if len(s.res) >= ef && c.score < s.res[0].score {
			break
		}
		p, i := h.page(c.slot)
		nbs := readList(h.list(p, i, l), s.buf[:0])
		k := 0
		for _, n := range nbs {
			if s.visit(n) {
				nbs[k] = n
				k++
				if quant {
					p, i := h.page(n)
					prefetchCode(&p.codes[i*h.dim])
				} else {
					prefetch(&h.vec(n)[0])
				}
			}
		}
		for _, n := range nbs[:k] {
			d := h.score(q, n, quant)
			if len(s.res) < ef || d > s.res[0].score {
				s.pushCand(cand{d, n})
				if h.admit(n, f) {
					s.pushRes(cand{d, n}, ef)
				}
			}
		}
		s.buf = nbs
	}
	s.out = append(s.out[:0], s.res...)
	sortCands(s.out)
	return s.out
}

// Search returns up to k live vectors admitted by f, highest cosine
// similarity first. A query of the wrong dimension or k <= 0 returns nil.
//
// Unfiltered searches walk the graph with ef = max(EfSearch, k).
// Filtered searches first estimate how many items the filter admits,
// using the per-namespace, -kind and -type postings and a sample of
// Admits calls; when that is small (under 2% of the items, or a
// candidate set of at most 4096) they score the admitted items exactly,
// otherwise they walk the graph through all nodes but collect only
// admitted ones, as far as an unfiltered search would go.
func (h *HNSW) Search(q []float32, k int, f *Filter) []Hit {
	if k <= 0 || len(q) != h.dim {
		return nil
	}
	if f.isZero() {
		f = nil
	}
	h.gate.RLock()
	defer h.gate.RUnlock()
	top := h.top.Load()
	if top == 0 {
		return nil
	}
	s := h.getSearcher()
	defer h.pool.Put(s)
	ef := max(int(h.efS.Load()), k)
	if f != nil {
		exact, frac := h.plan(s, f)
		if exact {
			return h.exact(s, q, k, f)
		}
		// The walk collects only admitted nodes and goes on until it
		// holds ef of them, so it explores about ef/frac nodes. Keeping
		// ef*frac admitted (twice that for margin, at least 2k) explores
		// about as far as an unfiltered search with ef would.
		ef = min(ef, max(2*k, int(math.Ceil(2*float64(ef)*frac))))
	}
	ep := topSlot(top)
	epScore := h.score(q, ep, true)
	for l := topLevel(top); l > 0; l-- {
		ep, epScore = h.greedy(s, q, ep, epScore, l, true)
	}
	s.begin(h)
	s.entries = append(s.entries[:0], cand{epScore, ep})
	w := h.searchLayer(s, q, s.entries, ef, 0, f, true)
	return h.hits(h.rerank(q, w, k), k)
}

// hits converts the best k of w (sorted, best first) to Hits, dropping a
// duplicate id (an id being replaced can briefly have two live nodes).
func (h *HNSW) hits(w []cand, k int) []Hit {
	if len(w) == 0 {
		return nil
	}
	out := make([]Hit, 0, min(k, len(w)))
next:
	for _, c := range w {
		if len(out) == k {
			break
		}
		p, i := h.page(c.slot)
		id := p.ids[i]
		for _, o := range out {
			if o.ID == id {
				continue next
			}
		}
		out = append(out, Hit{ID: id, Score: c.score})
	}
	return out
}

// plan decides how to answer a filtered search. It leaves in s.lists
// the candidate slot lists from the postings (s.all when there are
// none) and returns whether to search exactly and the estimated
// fraction of live items f admits.
func (h *HNSW) plan(s *searcher, f *Filter) (exact bool, frac float64) {
	h.mu.Lock()
	live := len(h.ids)
	total := int(h.nslots.Load())
	s.all = true
	s.lists = s.lists[:0]
	pick := func(keys []uint64) {
		n := 0
		for _, k := range keys {
			n += len(h.postings[k])
		}
		if n < total || s.all {
			total, s.all = n, false
			s.lists = s.lists[:0]
			for _, k := range keys {
				if l := h.postings[k]; len(l) > 0 {
					s.lists = append(s.lists, l)
				}
			}
		}
	}
	if f.Namespace != 0 {
		pick(append(s.keys[:0], postingKey(fieldNamespace, f.Namespace)))
	}
	if len(f.Kinds) > 0 {
		s.keys = s.keys[:0]
		for _, k := range f.Kinds {
			if key := postingKey(fieldKind, uint32(k)); !slices.Contains(s.keys, key) {
				s.keys = append(s.keys, key)
			}
		}
		pick(s.keys)
	}
	if len(f.Types) > 0 {
		s.keys = s.keys[:0]
		for _, t := range f.Types {
			if key := postingKey(fieldType, uint32(t)); !slices.Contains(s.keys, key) {
				s.keys = append(s.keys, key)
			}
		}
		pick(s.keys)
	}
	h.mu.Unlock()
	if total <= exactMin || live == 0 {
		return true, 0
	}
	// Estimate the admitted fraction from an even sample of the set.
	n := min(sampleSize, total)
	hit := 0
	for j := range n {
		pos := (2*j + 1) * total / (2 * n)
		if h.admit(s.slotAt(pos), f) {
			hit++
		}
	}
	admitted := float64(hit) / float64(n) * float64(total)
	frac = min(1, admitted/float64(live))
	return frac < exactFrac, frac
}

// slotAt returns the pos-th slot of the candidate set.
func (s *searcher) slotAt(pos int) uint32 {
	if s.all {
		return uint32(pos)
	}
	for _, l := range s.lists {
		if pos < len(l) {
			return l[pos]
		}
		pos -= len(l)
	}
	return 0
}

// exact scores every admitted slot of the candidate set left by plan,
// from the int8 codes, and reranks the best with the exact vectors.
func (h *HNSW) exact(s *searcher, q []float32, k int, f *Filter) []Hit {
	keep := max(4*k, 40)
	s.res = s.res[:0]
	scan := func(sl uint32) {
		p, i := h.page(sl)
		if p.state[i].Load() != stateLive || !f.Admits(p.ids[i], p.metas[i].meta()) {
			return
		}
		o := i * h.dim
		s.pushRes(cand{CodeDot(q, p.codes[o:o+h.dim:o+h.dim], p.scales[i]), sl}, keep)
	}
	if s.all {
		n := h.nslots.Load()
		for sl := range n {
			scan(sl)
		}
	} else {
		// Postings hop around memory: fetch a few items ahead.
		const ahead = 6
		for _, l := range s.lists {
			for j, sl := range l {
				if j+ahead < len(l) {
					p, i := h.page(l[j+ahead])
					prefetchLine(unsafe.Pointer(&p.metas[i]))
					prefetchLine(unsafe.Pointer(&p.state[i]))
					prefetchCode(&p.codes[i*h.dim])
				}
				scan(sl)
			}
		}
	}
	s.out = append(s.out[:0], s.res...)
	sortCands(s.out)
	return h.hits(h.rerank(q, s.out, k), k)
}

// Remove deletes id and reports whether it was present. The node stays
// in the graph as a tombstone (routing searches, never returned) until
// [HNSW.Cleanup].
func (h *HNSW) Remove(id uint64) bool {
	h.wmu.RLock()
	defer h.wmu.RUnlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.ids[id]
	if !ok {
		return false
	}
	delete(h.ids, id)
	p, i := h.page(s)
	if p.state[i].CompareAndSwap(stateLive, stateDeleted) {
		h.deleted++
	}
	return true
}

// Cleanup unlinks the tombstones left by Remove and replacing Add and
// makes their slots reusable; it returns how many it reclaimed. Each
// live node that pointed at a tombstone is relinked (with the selection
// heuristic) to its remaining neighbours and the tombstone's neighbours,
// as in FreshDiskANN's delete consolidation.
//
// Searches and adds keep running, except for two short barriers that
// wait for in-flight operations. The work is proportional to the number
// of nodes times the fraction of their neighbours that are tombstones;
// call it when Tombstones grows past a few percent of Len.
func (h *HNSW) Cleanup() int {
	h.wmu.RLock()
	defer h.wmu.RUnlock()
	h.cleanMu.Lock()
	defer h.cleanMu.Unlock()

	n := h.nslots.Load()
	condemned := 0
	for sl := range n {
		p, i := h.page(sl)
		if p.state[i].CompareAndSwap(stateDeleted, stateCondemned) {
			condemned++
		}
	}
	if condemned == 0 {
		return 0
	}
	// Barrier 1: an insert that saw a condemned node as live may still
	// link to it; wait for it. Later inserts see it condemned.
	h.gate.Lock()
	h.gate.Unlock() //nolint:staticcheck // empty critical section is the barrier

	// Repair every slot allocated so far: an insert that allocated a slot
	// after n was read may have linked a node condemned since.
	s := h.getSearcher()
	for sl := range h.nslots.Load() {
		h.repair(s, sl)
	}
	h.pool.Put(s)

	// Move the entry point off a condemned node.
	h.levelMu.Lock()
	if top := h.top.Load(); top != 0 {
		p, i := h.page(topSlot(top))
		if p.state[i].Load() == stateCondemned {
			h.top.Store(h.newTop())
		}
	}
	h.levelMu.Unlock()

	// Barrier 2: no search may still hold a condemned slot.
	h.gate.Lock()
	defer h.gate.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for sl := range n {
		p, i := h.page(sl)
		if p.state[i].Load() != stateCondemned {
			continue
		}
		p.state[i].Store(stateFree)
		p.levels[i] = 0
		p.upper[i] = nil
		p.links0[i*h.stride0] = 0
		h.free = append(h.free, sl)
		h.deleted--
	}
	for k, l := range h.postings {
		nl := make([]uint32, 0, len(l))
		for _, sl := range l {
			p, i := h.page(sl)
			if p.state[i].Load() != stateFree {
				nl = append(nl, sl)
			}
		}
		if len(nl) == 0 {
			delete(h.postings, k)
		} else {
			h.postings[k] = nl
		}
	}
	return condemned
}

// newTop returns the highest-level node that is not condemned or free
// (0 if none). The caller holds levelMu.
func (h *HNSW) newTop() uint64 {
	var best uint64
	bestLevel := -1
	n := h.nslots.Load()
	for sl := range n {
		p, i := h.page(sl)
		p.locks[i].Lock()
		st := p.state[i].Load()
		if (st == stateLive || st == stateDeleted) && int(p.levels[i]) > bestLevel {
			bestLevel = int(p.levels[i])
			best = packTop(sl, bestLevel)
		}
		p.locks[i].Unlock()
	}
	return best
}

// repair replaces condemned neighbours of node sl on every layer. The
// node keeps its other neighbours (pruning them would cut the in-links
// that make the graph navigable); each condemned one is replaced from
// the condemned nodes' own neighbours, preferring by the selection
// heuristic candidates that add a new direction, then the closest.
func (h *HNSW) repair(s *searcher, sl uint32) {
	p, i := h.page(sl)
	p.locks[i].Lock()
	defer p.locks[i].Unlock()
	if st := p.state[i].Load(); st == stateFree || st == stateCondemned {
		return
	}
	v := h.vec(sl)
	for l := 0; l <= int(p.levels[i]); l++ {
		ls := h.list(p, i, l)
		n := int(ls[0])
		gone := 0
		for _, x := range ls[1 : n+1] {
			if h.stateOf(x) == stateCondemned {
				gone++
			}
		}
		if gone == 0 {
			continue
		}
		s.begin(h)
		s.visit(sl)
		keep := s.sel2[:0]
		for _, x := range ls[1 : n+1] {
			if h.stateOf(x) != stateCondemned && s.visit(x) {
				keep = append(keep, cand{dot(v, h.vec(x)), x})
			}
		}
		cs := s.shrink[:0]
		for _, x := range ls[1 : n+1] {
			if h.stateOf(x) != stateCondemned {
				continue
			}
			xp, xi := h.page(x)
			s.buf = readList(h.list(xp, xi, l), s.buf[:0])
			for _, y := range s.buf {
				if st := h.stateOf(y); st != stateLive && st != stateDeleted {
					continue
				}
				if s.visit(y) {
					cs = append(cs, cand{dot(v, h.vec(y)), y})
				}
			}
		}
		sortCands(cs)
		want := min(len(ls)-1, len(keep)+gone)
		// First pass: diverse candidates; second: the closest left.
		for pass := 0; pass < 2 && len(keep) < want; pass++ {
			for j, c := range cs {
				if len(keep) >= want {
					break
				}
				if c.slot == math.MaxUint32 {
					continue
				}
				good := true
				if pass == 0 {
					vc := h.vec(c.slot)
					for _, o := range keep {
						if dot(vc, h.vec(o.slot)) > c.score {
							good = false
							break
						}
					}
				}
				if good {
					keep = append(keep, c)
					cs[j].slot = math.MaxUint32
				}
			}
		}
		s.shrink, s.sel2 = cs, keep
		writeList(ls, keep)
	}
}

func (h *HNSW) stateOf(sl uint32) uint32 {
	p, i := h.page(sl)
	return p.state[i].Load()
}

// Bytes returns the approximate memory held by the index.
func (h *HNSW) Bytes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	const mapEntry = 24
	b := len(h.ids)*mapEntry + cap(h.free)*4
	for _, l := range h.postings {
		b += cap(l)*4 + mapEntry
	}
	for _, p := range *h.dir.Load() {
		b += cap(p.vecs)*4 + cap(p.codes) + cap(p.scales)*4 + cap(p.ids)*8 + cap(p.metas)*16 + cap(p.state)*4 +
			cap(p.levels) + cap(p.links0)*4 + cap(p.upper)*24 + cap(p.locks)*8
		for _, u := range p.upper {
			b += cap(u) * 4
		}
	}
	return b
}

func (h *HNSW) getSearcher() *searcher { return h.pool.Get().(*searcher) }

// searcher is the per-search scratch space, pooled so a search allocates
// only its result.
type searcher struct {
	mark                            []uint32 // visited: mark[slot] == epoch
	epoch                           uint32
	cand                            []cand // max-heap on score: frontier
	res                             []cand // min-heap on score: best ef admitted
	out, entries, sel, sel2, shrink []cand
	buf                             []uint32
	lists                           [][]uint32 // candidate set of a filtered search, unless all
	all                             bool
	keys                            []uint64
	hits                            []Hit
}

// begin starts a new visited set.
func (s *searcher) begin(h *HNSW) {
	if n := int(h.nslots.Load()); len(s.mark) < n {
		s.mark = make([]uint32, n+n/4+1024)
		s.epoch = 0
	}
	s.epoch++
	if s.epoch == 0 {
		clear(s.mark)
		s.epoch = 1
	}
}

// visit marks sl and reports whether it was unvisited.
func (s *searcher) visit(sl uint32) bool {
	if int(sl) >= len(s.mark) {
		m := make([]uint32, int(sl)+int(sl)/4+1024)
		copy(m, s.mark)
		s.mark = m
	}
	if s.mark[sl] == s.epoch {
		return false
	}
	s.mark[sl] = s.epoch
	return true
}

func (s *searcher) pushCand(c cand) {
	s.cand = append(s.cand, c)
	h := s.cand
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].score >= h[i].score {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (s *searcher) popCand() cand {
	h := s.cand
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	s.cand = h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].score > h[l].score {
			m = r
		}
		if h[i].score >= h[m].score {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}

// pushRes adds c to the result min-heap, evicting the worst beyond ef.
func (s *searcher) pushRes(c cand, ef int) {
	h := s.res
	if len(h) >= ef {
		if c.score <= h[0].score {
			return
		}
		h[0] = c
		siftDownMin(h, 0)
		return
	}
	h = append(h, c)
	s.res = h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].score <= h[i].score {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func siftDownMin(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].score < h[l].score {
			m = r
		}
		if h[i].score <= h[m].score {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
