package embed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Projection maps numeric vectors of one fixed length (a robot's
// observation or action, flattened) to unit-length float32 vectors of
// another, with a Gaussian random projection: y = R·x / ‖R·x‖, where R
// has independent standard normal entries. By the Johnson–Lindenstrauss
// lemma such a projection roughly preserves the angles between inputs,
// so states that point the same way stay close in cosine similarity.
//
// R is derived from the seed alone (a PCG stream fed through
// Box–Muller, independent of math/rand's internals), so every process
// that builds a Projection with the same (inDim, outDim, seed) projects
// the same way and stored vectors stay comparable (across CPU
// architectures, up to last-bit differences of math.Log). A Projection serves exactly one input length; build one
// per observation or action layout. Inputs are used as given: scale or
// standardise features with different units first, or the largest will
// dominate.
//
// The zero input has no direction: it projects to the zero vector,
// without error; callers that index vectors should skip it.
//
// A Projection is immutable and safe for concurrent use.
type Projection struct {
	in, out int
	r       *mat.Dense // out × in
	pool    sync.Pool  // *[]float64 of length out
}

// NewProjection returns the projection from inDim to outDim dimensions
// determined by seed. It panics if either dimension is below 1, as
// make does for a negative length.
func NewProjection(inDim, outDim int, seed int64) *Projection {
	if inDim < 1 || outDim < 1 {
		panic(fmt.Sprintf("embed: NewProjection(%d, %d): dimensions must be positive", inDim, outDim))
	}
	data := make([]float64, inDim*outDim)
	src := rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)
	for i := 0; i < len(data); i += 2 {
		z0, z1 := boxMuller(src)
		data[i] = z0
		if i+1 < len(data) {
			data[i+1] = z1
		}
	}
	p := &Projection{in: inDim, out: outDim, r: mat.NewDense(outDim, inDim, data)}
	p.pool.New = func() any { s := make([]float64, outDim); return &s }
	return p
}

// boxMuller turns two uniform draws from src into two independent
// standard normal deviates. It uses only src's specified bit stream and
// basic math, so the result does not depend on math/rand's internals.
func boxMuller(src *rand.PCG) (float64, float64) {
	const inv53 = 1.0 / (1 << 53)
	u1 := (float64(src.Uint64()>>11) + 1) * inv53 // (0, 1]
	u2 := float64(src.Uint64()>>11) * inv53       // [0, 1)
	r := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	return r * c, r * s
}

// InputDim is the input length p accepts.
func (p *Projection) InputDim() int { return p.in }

// Dimensions is the length of p's output vectors.
func (p *Projection) Dimensions() int { return p.out }

// Project returns the unit-length projection of x. It fails with
// [ErrDimension] if len(x) is not InputDim, and with [ErrInvalid] if x
// holds NaN or ±Inf. The zero vector projects to the zero vector.
func (p *Projection) Project(x []float64) ([]float32, error) {
	if len(x) != p.in {
		return nil, fmt.Errorf("%w: projection input has %d values, want %d", ErrDimension, len(x), p.in)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: projection input component %d is %v", ErrInvalid, i, v)
		}
	}
	yp := p.pool.Get().(*[]float64)
	defer p.pool.Put(yp)
	y := *yp
	blas64.Gemv(blas.NoTrans, 1, p.r.RawMatrix(),
		blas64.Vector{N: p.in, Inc: 1, Data: x}, 0,
		blas64.Vector{N: p.out, Inc: 1, Data: y})
	out := make([]float32, p.out)
	nrm := blas64.Nrm2(blas64.Vector{N: p.out, Inc: 1, Data: y})
	if nrm == 0 {
		return out, nil
	}
	if math.IsInf(nrm, 0) || math.IsNaN(nrm) {
		return nil, fmt.Errorf("%w: projection overflows float64", ErrInvalid)
	}
	inv := 1 / nrm
	for i, v := range y {
		out[i] = float32(v * inv)
	}
	return out, nil
}
