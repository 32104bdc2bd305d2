package wave

import (
	"math"
	"math/rand/v2"
	"testing"
)

// codeKernelVectors returns vectors of dim to code: normal values,
// values on the int8 and 4-bit codes' rounding boundaries (halves
// after scaling), ±0 among them, and all zero.
func codeKernelVectors(r *rand.Rand, dim int) [][]float32 {
	normal, halves, zero := make([]float32, dim), make([]float32, dim), make([]float32, dim)
	for i := range dim {
		normal[i] = float32(r.NormFloat64())
		halves[i] = float32(i%255-127) + 0.5*float32(i%2) // scale 1: x·inv = x
	}
	if dim > 0 {
		halves[0] = 127 // the largest magnitude: inv exactly 1
	}
	if dim > 3 {
		halves[3] = float32(math.Copysign(0, -1))
	}
	return [][]float32{normal, halves, zero}
}

// TestQuantizeMatchesGo: the int8 codes and scale quantize gives (SIMD
// for whole blocks of 32 values) are those of the Go loops, bit for
// bit, for lengths around the blocks.
func TestQuantizeMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dim := range []int{1, 7, 8, 9, 31, 32, 33, 64, 100, 384, 385, 1536} {
		for k, v := range codeKernelVectors(r, dim) {
			got, want := make([]int8, dim), make([]int8, dim)
			for i := range got {
				got[i] = 99 // stale codes must be overwritten
			}
			scale := quantize(v, got)
			var wantScale float32
			if m := math.Float32frombits(maxAbsBitsGeneric(v)); m != 0 {
				quantizeCodesGeneric(v, want, 127/m)
				wantScale = m / 127
			}
			if scale != wantScale {
				t.Fatalf("dim=%d vector %d: scale %v, want %v", dim, k, scale, wantScale)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("dim=%d vector %d: code %d is %d, want %d (value %v)", dim, k, i, got[i], want[i], v[i])
				}
			}
		}
	}
}

// TestRangeKernelsMatchGo: minMax and residualMinMax (SIMD for lengths
// that are multiples of 8) give the range and the residual the Go loops
// give.
func TestRangeKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, dim := range []int{1, 8, 9, 16, 384, 385} {
		for _, v := range codeKernelVectors(r, dim) {
			lo, hi := minMax(v)
			wlo, whi := minMaxGeneric(v)
			if lo != wlo || hi != whi {
				t.Fatalf("dim=%d: minMax %v %v, want %v %v", dim, lo, hi, wlo, whi)
			}
			c := make([]float32, dim)
			for i := range c {
				c[i] = float32(r.NormFloat64()) / 3
			}
			res, wres := make([]float32, dim), make([]float32, dim)
			lo, hi = residualMinMax(v, c, res)
			wlo, whi = residualGeneric(v, c, wres)
			if lo != wlo || hi != whi {
				t.Fatalf("dim=%d: residual's range %v %v, want %v %v", dim, lo, hi, wlo, whi)
			}
			for i := range res {
				if math.Float32bits(res[i]) != math.Float32bits(wres[i]) {
					t.Fatalf("dim=%d: residual %d is %v, want %v", dim, i, res[i], wres[i])
				}
			}
		}
	}
}

// BenchmarkQuantize codes a 384-d vector in int8, as the graph's
// embedding codes for the planner's re-rank are made.
func BenchmarkQuantize(b *testing.B) {
	v := codeKernelVectors(rand.New(rand.NewPCG(1, 1)), 384)[0]
	c := make([]int8, len(v))
	for b.Loop() {
		quantize(v, c)
	}
}
