package bench

import (
	"cmp"
	"slices"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/wave"
)

// brute is exact filtered search the fast way round, for ground truth:
// it scores every vector (a dot product is cheap) and asks the filter
// about the best first until k pass. The planner's filter (a view lookup
// and a policy check per item) is what makes a filtered flat scan slow,
// and this asks it about a few hundred items instead of every one. It
// returns what [wave.Flat] returns: the k best admitted, ties to the
// lower id.
type brute struct {
	ids    []uint64
	metas  []wave.Meta
	vecs   []float32
	scores []float32
	order  []int32
}

// newBrute copies every vector the daemon's indexer indexes (nodes,
// edges, episodes of the index's dimension), normalised as the index
// stores them, with the same metadata (the run checks it against
// wave.Flat on the first queries).
// Its arrays are sized from the store's counts before the copy, so the
// copy faults in its memory once, without the doublings of appends.
func newBrute(store *particle.Store) *brute {
	n := vectorsAtMost(store.Counts())
	b := &brute{ids: make([]uint64, 0, n), metas: make([]wave.Meta, 0, n), vecs: make([]float32, 0, n*Dims)}
	add := func(id uint64, v []float32, m wave.Meta) {
		if len(v) != Dims {
			return
		}
		n := len(b.vecs)
		b.vecs = append(b.vecs, v...)
		wave.Normalize(b.vecs[n:])
		b.ids = append(b.ids, id)
		b.metas = append(b.metas, m)
	}
	store.Read(func(r particle.Reader) {
		// The metadata the planner's indexer gives the index.
		r.Nodes(func(n *particle.Node) bool {
			add(n.Seq, n.Embedding, planner.NodeMeta(n))
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			add(e.Seq, e.Embedding, planner.EdgeMeta(e))
			return true
		})
		r.Episodes(func(e *particle.Episode) bool {
			add(e.Seq, e.Embedding, planner.EpisodeMeta(e))
			return true
		})
	})
	b.scores = make([]float32, len(b.ids))
	b.order = make([]int32, len(b.ids))
	return b
}

func (b *brute) Len() int { return len(b.ids) }

// better orders slots best first: higher score, then lower id.
func (b *brute) better(x, y int32) int {
	if c := cmp.Compare(b.scores[y], b.scores[x]); c != 0 {
		return c
	}
	return cmp.Compare(b.ids[x], b.ids[y])
}

// Search returns the k best vectors f admits to the unit query q (not
// safe for concurrent use: it reuses its scratch).
func (b *brute) Search(q []float32, k int, f *wave.Filter) []wave.Hit {
	if k <= 0 || len(q) != Dims {
		return nil
	}
	for i := range b.ids {
		b.scores[i] = wave.Dot(q, b.vecs[i*Dims:(i+1)*Dims])
		b.order[i] = int32(i)
	}
	var out []wave.Hit
	// Take the best in growing chunks: one partial selection usually
	// suffices; a very selective filter sorts everything once.
	rest := b.order
	for chunk := 256; len(rest) > 0 && len(out) < k; chunk *= 8 {
		var head []int32
		if chunk >= len(rest) {
			slices.SortFunc(rest, b.better)
			head, rest = rest, nil
		} else {
			head = b.top(rest, chunk)
			rest = rest[chunk:]
		}
		for _, s := range head {
			if f.Admits(b.ids[s], b.metas[s]) {
				out = append(out, wave.Hit{ID: b.ids[s], Score: b.scores[s]})
				if len(out) == k {
					break
				}
			}
		}
	}
	return out
}

// top moves the n best slots of s to its front, sorted, and returns
// them; s[n:] keeps the rest. A heap of the n best so far, worst at the
// root, replaced whenever a better slot comes.
func (b *brute) top(s []int32, n int) []int32 {
	h := s[:n]
	worse := func(i, j int) bool { return b.better(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			m := l
			if r := l + 1; r < n && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for i := n; i < len(s); i++ {
		if b.better(s[i], h[0]) < 0 {
			s[i], h[0] = h[0], s[i]
			down(0)
		}
	}
	slices.SortFunc(h, b.better)
	return h
}

// vectorsAtMost is how many vectors a store of counts c holds at most:
// one per node, edge and episode.
func vectorsAtMost(c particle.Counts) int {
	n := c.Episodes
	for _, k := range c.Nodes {
		n += k
	}
	for _, k := range c.Edges {
		n += k
	}
	return int(n)
}
