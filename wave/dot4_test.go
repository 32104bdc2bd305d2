package wave

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot4MatchesDot: dot4's four products are those of dot (to float32
// rounding) for lengths the AVX2 kernel takes (multiples of 16) and
// others, vectors apart by more than their length, and values of
// either sign; a wrong lane or stride gives another vector's product.
func TestDot4MatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{16, 32, 48, 384, 400, 17, 8, 3} {
		for _, gap := range []int{0, 5, 16} {
			stride := n + gap
			cs := make([]float32, 3*stride+n)
			v := make([]float32, n)
			for i := range cs {
				cs[i] = float32(r.NormFloat64())
			}
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			var got [4]float32
			dot4(v, cs, stride, &got)
			for j := range got {
				var want, mag float64
				for i, x := range v {
					p := float64(x) * float64(cs[j*stride+i])
					want += p
					mag += math.Abs(p)
				}
				if math.Abs(float64(got[j])-want) > 1e-5*mag {
					t.Errorf("n=%d stride=%d: product %d is %v, want %v", n, stride, j, got[j], want)
				}
			}
		}
	}
}

// TestDot2x4MatchesDot: dot2x4's eight products are those of dot (to
// float32 rounding), each in its place, and a vector's products are the
// same to the bit whichever vector it is paired with.
func TestDot2x4MatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, n := range []int{8, 16, 24, 384, 17, 3} {
		for _, gap := range []int{0, 5} {
			stride := n + gap
			cs := randVec(3*stride + n)
			v0, v1, v2 := randVec(n), randVec(n), randVec(n)
			var got, other [8]float32
			dot2x4(v0, v1, cs, stride, &got)
			dot2x4(v0, v2, cs, stride, &other)
			for j := range 4 {
				for k, v := range [][]float32{v0, v1} {
					var want, mag float64
					for i, x := range v {
						p := float64(x) * float64(cs[j*stride+i])
						want += p
						mag += math.Abs(p)
					}
					if g := got[4*k+j]; math.Abs(float64(g)-want) > 1e-5*mag {
						t.Errorf("n=%d stride=%d: vector %d, centroid %d: %v, want %v", n, stride, k, j, g, want)
					}
				}
				if math.Float32bits(got[j]) != math.Float32bits(other[j]) {
					t.Errorf("n=%d: v0's product with centroid %d is %v paired with v1, %v with v2", n, j, got[j], other[j])
				}
			}
		}
	}
}

// TestNearestFindsTheHighestProduct: nearest returns the centroid of the
// highest dot product, for numbers of centroids around the groups of
// four dot4 takes, and the first of two equal centroids.
func TestNearestFindsTheHighestProduct(t *testing.T) {
	const dim = 384
	r := rand.New(rand.NewPCG(5, 5))
	for _, k := range []int{1, 3, 4, 5, 8, 9, 33, 64} {
		cs := make([]float32, k*dim)
		for i := range cs {
			cs[i] = float32(r.NormFloat64())
		}
		for c := range k {
			Normalize(cs[c*dim : (c+1)*dim])
		}
		for q := range 50 {
			v := make([]float32, dim)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			Normalize(v)
			want, ws := 0, math.Inf(-1)
			for c := range k {
				var s float64
				for i, x := range v {
					s += float64(x) * float64(cs[c*dim+i])
				}
				if s > ws {
					want, ws = c, s
				}
			}
			if got := nearest(cs, v, dim); got != want {
				t.Fatalf("k=%d query %d: nearest %d, want %d", k, q, got, want)
			}
			if got, _ := nearestPair(cs, v, cs[:dim], dim); got != want {
				t.Fatalf("k=%d query %d: nearestPair %d, want %d", k, q, got, want)
			}
			if _, got := nearestPair(cs, cs[:dim], v, dim); got != want {
				t.Fatalf("k=%d query %d: nearestPair's second %d, want %d", k, q, got, want)
			}
		}
		if k >= 2 {
			// The last centroid a copy of the first: the first wins.
			copy(cs[(k-1)*dim:], cs[:dim])
			if got := nearest(cs, cs[:dim], dim); got != 0 {
				t.Errorf("k=%d: a query equal to centroids 0 and %d gave %d, want 0", k, k-1, got)
			}
			if got, got2 := nearestPair(cs, cs[:dim], cs[:dim], dim); got != 0 || got2 != 0 {
				t.Errorf("k=%d: nearestPair of a query equal to centroids 0 and %d gave %d and %d, want 0", k, k-1, got, got2)
			}
		}
	}
}

// BenchmarkNearest compares a 384-d vector with k centroids as the
// index's quantiser does: four centroids at a time (dot4, every insert's
// placing), two vectors with four centroids at a time (dot2x4, a
// retraining's k-means; an op is two vectors), and one dot product each.
func BenchmarkNearest(b *testing.B) {
	const dim = 384
	r := rand.New(rand.NewPCG(6, 6))
	for _, k := range []int{32, 64} {
		cs := make([]float32, k*dim)
		for i := range cs {
			cs[i] = float32(r.NormFloat64())
		}
		vs := make([][]float32, 1024)
		for i := range vs {
			vs[i] = make([]float32, dim)
			for j := range vs[i] {
				vs[i][j] = float32(r.NormFloat64())
			}
		}
		b.Run(fmt.Sprintf("k=%d/dot4", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				nearest(cs, vs[i%len(vs)], dim)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*k), "ns/product")
		})
		b.Run(fmt.Sprintf("k=%d/pair", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				nearestPair(cs, vs[i%len(vs)], vs[(i+1)%len(vs)], dim)
				i += 2
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*k), "ns/product")
		})
		b.Run(fmt.Sprintf("k=%d/each", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				v := vs[i%len(vs)]
				best, bs := 0, float32(math.Inf(-1))
				for c := range k {
					if s := dot(v, cs[c*dim:(c+1)*dim]); s > bs {
						best, bs = c, s
					}
				}
				_ = best
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*k), "ns/product")
		})
	}
}
