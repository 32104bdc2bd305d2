package bench

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/ctxgraph/ctxgraph/wave"
)

// topics is the two-level cluster structure of a workload's embeddings:
// Clusters random directions, each with SubClusters sub-topics around
// it. An item is a sub-topic plus noise: items of one sub-topic have
// cosine about 0.74, of sibling sub-topics about 0.45, of different
// clusters about 0.
type topics struct {
	subs [][]float32 // Clusters*SubClusters unit vectors
	per  int         // SubClusters
}

const (
	subSpread  = 0.8 // noise norm around a cluster, for its sub-topics
	itemSpread = 0.6 // noise norm around a sub-topic, for its items
)

func newTopics(r *rand.Rand, clusters, per int) *topics {
	t := &topics{per: per}
	for range clusters {
		c := gaussian(r, nil, 1)
		for range per {
			s := gaussian(r, nil, subSpread)
			for i := range s {
				s[i] += c[i]
			}
			wave.Normalize(s)
			t.subs = append(t.subs, s)
		}
	}
	return t
}

// gaussian fills v (or a new vector) with noise of expected norm scale.
func gaussian(r *rand.Rand, v []float32, scale float64) []float32 {
	if v == nil {
		v = make([]float32, Dims)
	}
	sigma := scale / math.Sqrt(Dims)
	for i := range v {
		v[i] = float32(sigma * r.NormFloat64())
	}
	if scale == 1 {
		wave.Normalize(v)
	}
	return v
}

// item draws a vector of sub-topic s and quantises it to integers in
// [-127, 127], the form it travels in (short JSON): q is what the wire
// carries, v = normalise(q) is what the daemon stores and what ground
// truth is computed on.
func (t *topics) item(r *rand.Rand, s int, q, v []float32) {
	gaussian(r, v, itemSpread)
	var peak float32
	for i, x := range t.subs[s] {
		v[i] += x
		peak = max(peak, float32(math.Abs(float64(v[i]))))
	}
	for i, x := range v {
		q[i] = float32(math.Round(float64(x / peak * 127)))
		v[i] = q[i]
	}
	wave.Normalize(v)
}

// intVec is a vector of whole numbers that marshals as a JSON array of
// integers, several times faster than encoding/json's float formatting.
type intVec []float32

func (q intVec) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 4*len(q)+2)
	b = append(b, '[')
	for i, x := range q {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']'), nil
}
