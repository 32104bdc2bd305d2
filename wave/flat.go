package wave

import (
	"fmt"
	"slices"
	"sync"
)

// Flat is an exact, brute-force [Index]: every search scores every
// admitted vector. It is the ground truth for approximate indexes and the
// right choice for small collections or very selective filters.
//
// Vectors live in one contiguous []float32, indexed by slot; removal
// moves the last slot into the freed one. Flat is safe for concurrent use.
type Flat struct {
	mu    sync.RWMutex
	dim   int
	vecs  []float32 // slot*dim .. slot*dim+dim
	ids   []uint64  // by slot
	metas []Meta    // by slot
	slot  map[uint64]int
}

var _ Index = (*Flat)(nil)

// NewFlat returns an empty exact index over dim-dimensional vectors.
// It panics if dim is not positive.
func NewFlat(dim int) *Flat {
	if dim <= 0 {
		panic(fmt.Sprintf("wave: NewFlat: dimension %d must be positive", dim))
	}
	return &Flat{dim: dim, slot: make(map[uint64]int)}
}

// Dim returns the vector dimension.
func (x *Flat) Dim() int { return x.dim }

// Len returns the number of vectors held.
func (x *Flat) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.ids)
}

// Grow makes room for n more vectors, so that adding that many copies
// nothing already held: a builder that knows how many vectors are coming
// (the store's counts) spares the index the doublings of its one
// contiguous array, each a copy of everything held so far into memory
// faulted in afresh. It does nothing for n ≤ 0.
func (x *Flat) Grow(n int) {
	if n <= 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.vecs = slices.Grow(x.vecs, n*x.dim)
	x.ids = slices.Grow(x.ids, n)
	x.metas = slices.Grow(x.metas, n)
	if len(x.slot) == 0 {
		x.slot = make(map[uint64]int, n)
	}
}

// Add inserts or replaces the vector of id. The vector is copied and
// L2-normalised (a zero vector is kept as is and scores 0 against
// everything). It fails with [ErrDimension] or [ErrNonFinite].
func (x *Flat) Add(id uint64, vec []float32, m Meta) error {
	if err := checkVec(vec, x.dim); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slot[id]
	if !ok {
		s = len(x.ids)
		x.ids = append(x.ids, id)
		x.metas = append(x.metas, m)
		x.vecs = slices.Grow(x.vecs, x.dim)[:len(x.vecs)+x.dim]
		x.slot[id] = s
	}
	x.metas[s] = m
	dst := x.vecs[s*x.dim : (s+1)*x.dim]
	copy(dst, vec)
	Normalize(dst)
	return nil
}

// Remove deletes id and reports whether it was present.
func (x *Flat) Remove(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slot[id]
	if !ok {
		return false
	}
	delete(x.slot, id)
	last := len(x.ids) - 1
	if s != last {
		lid := x.ids[last]
		x.ids[s] = lid
		x.metas[s] = x.metas[last]
		copy(x.vecs[s*x.dim:(s+1)*x.dim], x.vecs[last*x.dim:])
		x.slot[lid] = s
	}
	x.ids = x.ids[:last]
	x.metas = x.metas[:last]
	x.vecs = x.vecs[:last*x.dim]
	return true
}

// Search returns up to k vectors admitted by f, highest cosine similarity
// first (ties broken by lower id). A query of the wrong dimension or a
// k <= 0 returns nil.
func (x *Flat) Search(q []float32, k int, f *Filter) []Hit {
	if k <= 0 || len(q) != x.dim {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	top := topK{k: k, h: make([]Hit, 0, min(k, len(x.ids)))}
	if f.isZero() {
		for s, id := range x.ids {
			top.push(id, Dot(q, x.vecs[s*x.dim:(s+1)*x.dim]))
		}
	} else {
		for s, id := range x.ids {
			if f.Admits(id, x.metas[s]) {
				top.push(id, Dot(q, x.vecs[s*x.dim:(s+1)*x.dim]))
			}
		}
	}
	return top.sorted()
}

// Bytes returns the approximate memory held by the index.
func (x *Flat) Bytes() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	const metaSize, mapEntry = 24, 48
	return cap(x.vecs)*4 + cap(x.ids)*8 + cap(x.metas)*metaSize + len(x.slot)*mapEntry
}

// checkVec validates a vector about to be stored.
func checkVec(vec []float32, dim int) error {
	if len(vec) != dim {
		return fmt.Errorf("%w: got %d, want %d", ErrDimension, len(vec), dim)
	}
	if !finite(vec) {
		return ErrNonFinite
	}
	return nil
}

// isZero reports whether f admits everything without looking at items.
func (f *Filter) isZero() bool {
	return f.metaFree() && (f == nil || f.Allow == nil)
}

// worse reports whether a ranks below b: lower score, or equal score and
// higher id (so results are deterministic).
func worse(a, b Hit) bool {
	return a.Score < b.Score || (a.Score == b.Score && a.ID > b.ID)
}

// topK keeps the k best hits in a min-heap (worst at h[0]).
type topK struct {
	k int
	h []Hit
}

// push offers a candidate.
func (t *topK) push(id uint64, score float32) {
	c := Hit{ID: id, Score: score}
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		t.up(len(t.h) - 1)
		return
	}
	if !worse(t.h[0], c) {
		return
	}
	t.h[0] = c
	t.down(0)
}

// enters puts a hit of score in t (ID 0) and reports whether it
// entered: t was not full, or score is above its worst.
func (t *topK) enters(score float32) bool {
	if len(t.h) == t.k && score <= t.h[0].Score {
		return false
	}
	t.push(0, score)
	return true
}

func (t *topK) up(i int) {
	h := t.h
	for i > 0 {
		p := (i - 1) / 2
		if !worse(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (t *topK) down(i int) {
	h := t.h
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// sorted returns the held hits best first; t is unusable afterwards.
func (t *topK) sorted() []Hit {
	h := t.h
	slices.SortFunc(h, func(a, b Hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	if len(h) == 0 {
		return nil
	}
	return h
}
