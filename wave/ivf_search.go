package wave

import (
	"slices"
	"unsafe"
)

// ivfSearcher is a search's scratch, pooled.
type ivfSearcher struct {
	lists []cand    // list scores; slot = list index
	heap  []ivfCand // min-heap of the best candidates by int8 score
}

// ivfCand is a scored entry.
type ivfCand struct {
	score float32
	i     int32
	d     *listData
}

// Admitted items a filtered search wants to have seen, per result-heap
// slot, before it stops probing lists beyond NProbe.
const ivfSeenPerSlot = 8

// Search returns up to k live vectors admitted by f, highest cosine
// similarity first. A query of the wrong dimension or k <= 0 returns nil.
//
// It probes the NProbe lists nearest q, keeping the max(4k, 40) best by
// int8 score among the items f admits; f's Meta fields are checked
// before scoring, f.Allow only for an item that would enter that heap.
// While the heap is not full, or the items seen are estimated to include
// fewer than 8 admitted ones per heap slot, or (under a filter) one of
// the last max(4, NProbe/4) lists improved the heap, it probes on in order of
// list distance (up to every list: exact). The estimate extrapolates
// Allow's answers about heap candidates, which overrates a filter that
// favours items near q; the last condition covers that case. The heap is rescored with the
// float32 vectors.
func (x *IVF) Search(q []float32, k int, f *Filter) []Hit {
	if k <= 0 || len(q) != x.dim {
		return nil
	}
	if f.isZero() {
		f = nil
	}
	st := x.st.Load()
	s := x.pool.Get().(*ivfSearcher)
	defer x.pool.Put(s)
	keep := max(4*k, 40)
	s.heap = s.heap[:0]

	nl := len(st.lists)
	s.lists = s.lists[:0]
	if st.q == nil {
		s.lists = append(s.lists, cand{0, 0})
	} else {
		for i := range nl {
			s.lists = append(s.lists, cand{dot(q, st.q.leaf(i)), uint32(i)})
		}
	}
	nprobe := min(int(x.nprobe.Load()), nl)
	// Rank the nprobe nearest lists first; the rest only if needed.
	partialSort(s.lists, nprobe)

	metaFree := f.metaFree()
	var mc metaCheck
	var allow func(uint64) bool
	if f != nil {
		allow = f.Allow
		mc = compileMeta(f)
	}
	var passed, asked, allowed int
	// lastGain is the last list that put a candidate in the heap: probing
	// past NProbe goes on while recent lists still do.
	lastGain := 0
	patience := max(4, nprobe/4)
	for li := range s.lists {
		if li == nprobe && nprobe < nl {
			sortCands(s.lists[nprobe:])
		}
		lc := s.lists[li]
		if li >= nprobe && len(s.heap) >= keep {
			est := passed
			if asked > 0 {
				est = passed * allowed / asked
			}
			if est >= ivfSeenPerSlot*keep && (f == nil || li-lastGain > patience) {
				break
			}
		}
		d := st.lists[lc.slot].d.Load()
		n := d.len()
		codes := d.codes[:n*x.dim]
		for i := range n {
			if d.isDead(i) {
				continue
			}
			if !metaFree && !mc.admits(&d.metas[i]) {
				continue
			}
			passed++
			o := i * x.dim
			sc := d.scales[i] * dotI8(q, codes[o:o+x.dim:o+x.dim])
			if len(s.heap) == keep && sc <= s.heap[0].score {
				continue
			}
			if allow != nil {
				asked++
				if !allow(d.ids[i]) {
					continue
				}
				allowed++
			}
			s.push(ivfCand{sc, int32(i), d}, keep)
			lastGain = li
		}
	}
	return s.rerank(q, k, x.dim)
}

// partialSort moves the n best of cs (by score) to its front, sorted.
func partialSort(cs []cand, n int) {
	if n >= len(cs) {
		sortCands(cs)
		return
	}
	// A min-heap of the n best at the front, then sort it.
	h := cs[:n]
	less := func(a, b cand) bool { return a.score < b.score || (a.score == b.score && a.slot > b.slot) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			m := l
			if r := l + 1; r < n && less(h[r], h[l]) {
				m = r
			}
			if !less(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for j := n; j < len(cs); j++ {
		if less(h[0], cs[j]) {
			h[0], cs[j] = cs[j], h[0]
			down(0)
		}
	}
	sortCands(h)
}

// push offers c to the min-heap of at most keep candidates.
func (s *ivfSearcher) push(c ivfCand, keep int) {
	h := s.heap
	if len(h) < keep {
		h = append(h, c)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p].score <= h[i].score {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
		s.heap = h
		return
	}
	h[0] = c
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].score < h[l].score {
			m = r
		}
		if h[m].score >= h[i].score {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// rerank rescores the heap with the float32 vectors (an entry without
// one keeps its int8 score) and returns the best k, one hit per id.
func (s *ivfSearcher) rerank(q []float32, k, dim int) []Hit {
	if len(s.heap) == 0 {
		return nil
	}
	out := make([]Hit, 0, len(s.heap))
	for _, c := range s.heap {
		sc := c.score
		if p := c.d.vecs[c.i].Load(); p != nil {
			sc = dot(q, unsafe.Slice(p, dim))
		}
		out = append(out, Hit{ID: c.d.ids[c.i], Score: sc})
	}
	slices.SortFunc(out, func(a, b Hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	// An id being replaced can be seen twice by a search racing the
	// writer; keep its best.
	j := 0
	for _, h := range out {
		if j == k {
			break
		}
		if !slices.ContainsFunc(out[:j], func(o Hit) bool { return o.ID == h.ID }) {
			out[j] = h
			j++
		}
	}
	return out[:j]
}
