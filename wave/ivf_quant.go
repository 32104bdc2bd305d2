package wave

import (
	"math"
	"math/rand/v2"
	"unsafe"

	"gonum.org/v1/gonum/blas/blas32"
)

// coarse is the IVF's two-level coarse quantiser: a few top centroids,
// each with its own leaf centroids (the inverted lists). Assigning a
// vector costs len(top) + one top's leaves dot products (about 2·√nlist)
// instead of nlist; searches score every leaf to rank the lists.
type coarse struct {
	dim    int
	top    []float32 // k1 × dim
	first  []int32   // leaves of top j: first[j] .. first[j+1]
	leaves []float32 // nlist × dim
	// The leaves' int8 codes and scales (quantize), which searches rank
	// the lists by: a quarter of the memory of the float32 leaves, which
	// are read whole by every search.
	leafCodes  []int8
	leafScales []float32
}

// quantizeLeaves fills leafCodes and leafScales from leaves.
func (c *coarse) quantizeLeaves() {
	n := c.nlist()
	c.leafCodes = make([]int8, n*c.dim)
	c.leafScales = make([]float32, n)
	for i := range n {
		c.leafScales[i] = quantize(c.leaf(i), c.leafCodes[i*c.dim:(i+1)*c.dim])
	}
}

func (c *coarse) nlist() int { return len(c.leaves) / c.dim }

func (c *coarse) leaf(i int) []float32 { return c.leaves[i*c.dim : (i+1)*c.dim] }

// assign returns the list of v: the best leaf of the best top centroid.
func (c *coarse) assign(v []float32) int {
	j := nearest(c.top, v, c.dim)
	lo, hi := int(c.first[j]), int(c.first[j+1])
	return lo + nearest(c.leaves[lo*c.dim:hi*c.dim], v, c.dim)
}

// assignDots is about how many dot products assign takes: the top
// level's centroids and a top cell's leaves.
func (c *coarse) assignDots() int {
	top := len(c.top) / c.dim
	return top + c.nlist()/max(1, top)
}

// nearest returns the index of the centroid (in cs, dim apart) with the
// highest dot product with v.
// Centroids are compared four at a time (dot4), and the first of equal
// products wins.
func nearest(cs, v []float32, dim int) int {
	v = v[:dim]
	k := len(cs) / dim
	best, bs := 0, float32(math.Inf(-1))
	i := 0
	var s4 [4]float32
	for ; i+4 <= k; i += 4 {
		dot4(v, cs[i*dim:], dim, &s4)
		for j, s := range s4 {
			if s > bs {
				best, bs = i+j, s
			}
		}
	}
	for ; i < k; i++ {
		// By the same kernel as the others (its four products this
		// centroid's), so that products compare alike.
		dot4(v, cs[i*dim:], 0, &s4)
		if s4[0] > bs {
			best, bs = i, s4[0]
		}
	}
	return best
}

// nearestPair returns nearest's answer for v0 and for v1, with the
// products of four centroids at a time taken for both vectors at once
// (dot2x4): each centroid is read once for the two, and the centroids
// of a k-means run (96 KB at 64 × 384) are read from the L2 cache. A
// vector's answer does not depend on the vector it is paired with.
func nearestPair(cs, v0, v1 []float32, dim int) (best0, best1 int) {
	v0, v1 = v0[:dim], v1[:dim]
	k := len(cs) / dim
	s0, s1 := float32(math.Inf(-1)), float32(math.Inf(-1))
	i := 0
	var s [8]float32
	for ; i+4 <= k; i += 4 {
		dot2x4(v0, v1, cs[i*dim:], dim, &s)
		for j := range 4 {
			if s[j] > s0 {
				best0, s0 = i+j, s[j]
			}
			if s[4+j] > s1 {
				best1, s1 = i+j, s[4+j]
			}
		}
	}
	for ; i < k; i++ {
		dot2x4(v0, v1, cs[i*dim:], 0, &s) // as in nearest
		if s[0] > s0 {
			best0, s0 = i, s[0]
		}
		if s[4] > s1 {
			best1, s1 = i, s[4]
		}
	}
	return best0, best1
}

// kmeansIters bounds the Lloyd iterations of each k-means run, and a
// run stops sooner once fewer than one vector in kmeansSettled changes
// cluster in an iteration: on clustered data the leaves' runs moved 2%
// of their vectors in the second iteration and 0.5% in the third, and
// the iterations after that were half a retraining's time
// (BenchmarkIVFRetrain; BENCHMARKS.md, seventieth round).
const (
	kmeansIters   = 8
	kmeansSettled = 200
)

// trainCoarse fits a coarse quantiser with about nlist leaves (more where
// appendBalanced splits a crowded one) to the sample (unit vectors),
// deterministically for a given rng. The top level iterates over the
// whole sample: over 256 vectors a centroid (Faiss's cap), the rest
// assigned once after, a retraining took about 30% less CPU in the daemon,
// but in four of five pairs of runs its searches took about 28% longer
// for the same lists and items scored (BENCHMARKS.md, seventy-first
// round).
func trainCoarse(sample [][]float32, dim, nlist int, rng *rand.Rand) *coarse {
	nlist = max(1, min(nlist, len(sample)))
	k1 := max(1, int(math.Round(math.Sqrt(float64(nlist)))))
	top, assign := kmeans(sample, k1, dim, rng)
	c := &coarse{dim: dim, top: top, first: make([]int32, 1, k1+1)}
	members := make([][][]float32, k1)
	for i, a := range assign {
		members[a] = append(members[a], sample[i])
	}
	for j := range k1 {
		m := members[j]
		kids := max(1, min(len(m), int(math.Round(float64(nlist)*float64(len(m))/float64(len(sample))))))
		if len(m) == 0 {
			// An empty top cluster keeps its centroid as its only leaf.
			c.leaves = append(c.leaves, top[j*dim:(j+1)*dim]...)
		} else {
			cs, assign := kmeans(m, kids, dim, rng)
			c.leaves = appendBalanced(c.leaves, cs, assign, m, dim, float64(len(sample))/float64(nlist), rng)
		}
		c.first = append(c.first, int32(len(c.leaves)/dim))
	}
	return c
}

// maxLeafShare is how many times the mean share of the sample a leaf may
// hold before appendBalanced splits it.
const maxLeafShare = 2

// appendBalanced appends the leaves cs (dim apart) to leaves, where
// members[i] belongs to leaf assign[i]. A leaf holding more than
// maxLeafShare times mean members is replaced by a k-means split of its
// members into parts of about mean each. Dense regions of clustered
// data draw lists several times the mean length, and a query near one
// scans them; split, a search's work depends less on where it lands.
func appendBalanced(leaves, cs []float32, assign []int32, members [][]float32, dim int, mean float64, rng *rand.Rand) []float32 {
	k := len(cs) / dim
	counts := make([]int, k)
	for _, a := range assign {
		counts[a]++
	}
	for l := range k {
		if float64(counts[l]) <= maxLeafShare*mean {
			leaves = append(leaves, cs[l*dim:(l+1)*dim]...)
			continue
		}
		var sub [][]float32
		for i, a := range assign {
			if int(a) == l {
				sub = append(sub, members[i])
			}
		}
		parts, _ := kmeans(sub, int(math.Ceil(float64(counts[l])/mean)), dim, rng)
		leaves = append(leaves, parts...)
	}
	return leaves
}

// kmeans runs spherical k-means (dot-product assignment, normalised
// means) on vs from k distinct random seeds; it returns the centroids
// and each vector's cluster. An emptied cluster is re-seeded with a
// random vector.
//
// Each iteration reads each vector once: its cluster is found and its
// values added to that cluster's next centroid while they are in the
// cache, and the next vectors' are fetched meanwhile. Vectors are
// compared with the centroids two at a time (nearestPair). A sample of
// 48k vectors is 72 MB, more than the caches hold; with the sums taken
// in a second pass over it, that pass was a sixth of a retraining's
// time (BENCHMARKS.md, seventy-ninth round). Each cluster's sum adds
// its vectors in the same order as before, so the centroids are the
// same to the bit (TestKMeansOnePassAsTwo).
func kmeans(vs [][]float32, k, dim int, rng *rand.Rand) ([]float32, []int32) {
	k = max(1, min(k, len(vs)))
	cs := make([]float32, k*dim)
	for i, p := range rng.Perm(len(vs))[:k] {
		copy(cs[i*dim:], vs[p])
	}
	next := make([]float32, k*dim) // the next centroids, summed
	assign := make([]int32, len(vs))
	counts := make([]int, k)
	gw := newGiveWay(k) // a vector's step compares it with k centroids
	for it := range kmeansIters {
		changed := 0
		clear(next)
		clear(counts)
		took := func(i, c int) {
			gw.step()
			a := int32(c)
			if a != assign[i] || it == 0 {
				changed++
			}
			assign[i] = a
			counts[a]++
			// In float32, SIMD: a sum of unit vectors, normalised after.
			blas32.Axpy(1, blas32.Vector{N: dim, Inc: 1, Data: vs[i]}, blas32.Vector{N: dim, Inc: 1, Data: next[int(a)*dim : (int(a)+1)*dim]})
		}
		for i := 0; i < len(vs); i += 2 {
			j := min(i+1, len(vs)-1) // an odd last vector paired with itself
			for p := i + 2; p < min(i+4, len(vs)); p++ {
				PrefetchRange(unsafe.Pointer(unsafe.SliceData(vs[p])), uintptr(dim)*4)
			}
			a, b := nearestPair(cs, vs[i], vs[j], dim)
			took(i, a)
			if j != i {
				took(j, b)
			}
		}
		if changed == 0 {
			break
		}
		cs, next = next, cs
		for a := range k {
			c := cs[a*dim : (a+1)*dim]
			if counts[a] == 0 {
				copy(c, vs[rng.IntN(len(vs))])
				continue
			}
			Normalize(c)
		}
		if changed*kmeansSettled < len(vs) {
			break
		}
	}
	return cs, assign
}
