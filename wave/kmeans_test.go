package wave

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas/blas32"
)

// kmeansTwoPasses is kmeans as it was before it summed the next
// centroids in the pass that assigns the vectors: a second pass over
// the vectors after the first. It compares one vector at a time with
// the centroids, by the products kmeans takes (nearestPair).
func kmeansTwoPasses(vs [][]float32, k, dim int, rng *rand.Rand) ([]float32, []int32) {
	k = max(1, min(k, len(vs)))
	cs := make([]float32, k*dim)
	for i, p := range rng.Perm(len(vs))[:k] {
		copy(cs[i*dim:], vs[p])
	}
	assign := make([]int32, len(vs))
	counts := make([]int, k)
	for it := range kmeansIters {
		changed := 0
		for i, v := range vs {
			c, _ := nearestPair(cs, v, v, dim)
			a := int32(c)
			if a != assign[i] || it == 0 {
				changed++
			}
			assign[i] = a
		}
		if changed == 0 {
			break
		}
		// The new centroids, summed in place (in float32, SIMD: a sum
		// of unit vectors, normalised after) and normalised.
		clear(cs)
		clear(counts)
		for i, v := range vs {
			a := int(assign[i])
			counts[a]++
			blas32.Axpy(1, blas32.Vector{N: dim, Inc: 1, Data: v}, blas32.Vector{N: dim, Inc: 1, Data: cs[a*dim : (a+1)*dim]})
		}
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

// TestKMeansOnePassAsTwo: k-means that sums the next centroids as it
// assigns the vectors gives the centroids and clusters, to the bit,
// that summing them in a second pass gives: on clustered vectors,
// uniform ones, and repeated ones with more centroids than distinct
// vectors (clusters that empty and are re-seeded).
func TestKMeansOnePassAsTwo(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, c := range []struct {
		name           string
		n, dim, k, grp int
	}{
		{"clustered", 3000, 384, 48, 100},
		{"uniform", 2000, 16, 64, 0},
		{"repeated", 600, 32, 40, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			centres := make([][]float32, c.grp)
			for g := range centres {
				centres[g] = make([]float32, c.dim)
				for j := range centres[g] {
					centres[g][j] = float32(r.NormFloat64())
				}
			}
			vs := make([][]float32, c.n)
			for i := range vs {
				vs[i] = make([]float32, c.dim)
				for j := range vs[i] {
					switch {
					case c.name == "repeated":
						vs[i][j] = centres[i%c.grp][j]
					case c.grp > 0:
						vs[i][j] = centres[i%c.grp][j] + 0.3*float32(r.NormFloat64())
					default:
						vs[i][j] = float32(r.NormFloat64())
					}
				}
				Normalize(vs[i])
			}
			for seed := range uint64(3) {
				wantCS, wantAssign := kmeansTwoPasses(vs, c.k, c.dim, rand.New(rand.NewPCG(seed, 1)))
				cs, assign := kmeans(vs, c.k, c.dim, rand.New(rand.NewPCG(seed, 1)))
				if !slices.Equal(assign, wantAssign) {
					t.Fatalf("seed %d: clusters differ from two passes'", seed)
				}
				for i := range cs {
					if math.Float32bits(cs[i]) != math.Float32bits(wantCS[i]) {
						t.Fatalf("seed %d: centroid value %d is %v, two passes' %v", seed, i, cs[i], wantCS[i])
					}
				}
			}
		})
	}
}
