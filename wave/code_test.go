package wave

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestCodeBoundHolds quantises vectors of every shape the planner meets
// (unit, unnormalised, sparse, one large component, all extremes) and
// checks that the float32 dot product with a query is always within
// CodeBound of CodeDot, and that the bound is tight enough to use (a
// few percent of a unit dot product's range for 384 dimensions).
func TestCodeBoundHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for _, dim := range []int{1, 3, 16, 100, 384, 1536} {
		code := make([]int8, dim)
		for trial := range 400 {
			v, q := make([]float32, dim), make([]float32, dim)
			for i := range v {
				v[i] = float32(r.NormFloat64())
				q[i] = float32(r.NormFloat64())
			}
			switch trial % 5 {
			case 1:
				Normalize(v)
				Normalize(q)
			case 2: // sparse
				for i := range v {
					if r.IntN(8) != 0 {
						v[i] = 0
					}
				}
			case 3: // one large component
				v[r.IntN(dim)] = 1e3
			case 4: // every component at an extreme of its step
				for i := range v {
					v[i] = float32(1 - 2*float64(i%2))
					q[i] = float32(1 - 2*float64((i/2)%2))
				}
			}
			scale := Quantize(v, code)
			var qn float64
			for _, x := range q {
				qn += float64(x) * float64(x)
			}
			bound := CodeBound(float32(math.Sqrt(qn)), scale, dim)
			exact, approx := Dot(q, v), CodeDot(q, code, scale)
			if d := math.Abs(float64(exact - approx)); d > float64(bound) {
				t.Fatalf("dim %d trial %d: |%v − %v| = %v > bound %v", dim, trial, exact, approx, d, bound)
			} else if bound > 0 {
				worst = max(worst, d/float64(bound))
			}
			if dim == 384 && trial%5 == 1 && bound > 0.05 {
				t.Fatalf("unit vectors of 384 dimensions: bound %v, too loose to use", bound)
			}
		}
	}
	t.Logf("largest error seen: %.2f of the bound", worst)
}
