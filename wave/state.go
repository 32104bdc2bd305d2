package wave

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas/blas32"
)

// StateVector is the context state vector of a session: an exponential
// moving average of the vectors its queries touch, kept at unit length
// (or zero before the first update). Its dimension is len(Vec).
//
// A StateVector is not safe for concurrent use; its session guards it.
type StateVector struct {
	Vec       []float32 `json:"vec"`
	Updates   int       `json:"updates"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewStateVector returns the zero state of dim dimensions. It panics if
// dim is negative.
func NewStateVector(dim int) *StateVector {
	if dim < 0 {
		panic(fmt.Sprintf("wave: NewStateVector(%d): negative dimension", dim))
	}
	return &StateVector{Vec: make([]float32, dim)}
}

// Dim is the state's dimension.
func (s *StateVector) Dim() int { return len(s.Vec) }

// Blend moves the state toward the weighted mean m of vecs:
//
//	state = normalise((1-alpha)·state + alpha·m),  m = Σ wᵢ·vᵢ / Σ wᵢ
//
// alpha in (0, 1] is the rate: 1 replaces the state by m's direction,
// small values let context build up over many requests. weights may be
// nil (all equal); otherwise it has one finite, non-negative weight per
// vector. On success Updates is incremented and UpdatedAt set to at.
//
// Blend is all-or-nothing: on error the state is unchanged. Wrong-length
// vectors wrap [ErrDimension]; NaN or ±Inf components or weights wrap
// [ErrNonFinite]. Blending nothing (no vectors, or weights summing to 0)
// is a no-op, as is a blend whose result is the zero vector (m cancels
// the state exactly). A state found holding NaN or ±Inf (corrupt) is
// reset to zero before blending.
func (s *StateVector) Blend(vecs [][]float32, weights []float64, alpha float64, at time.Time) error {
	if !(alpha > 0 && alpha <= 1) {
		return fmt.Errorf("wave: blend rate alpha must be in (0, 1], got %v", alpha)
	}
	dim := len(s.Vec)
	m := blas32.Vector{N: dim, Inc: 1, Data: make([]float32, dim)}
	if ok, err := weightedMean(m, vecs, weights); !ok || err != nil {
		return err
	}
	// m = alpha·m + (1-alpha)·state.
	blas32.Scal(float32(alpha), m)
	if alpha < 1 && nonFiniteAt(s.Vec) < 0 {
		blas32.Axpy(float32(1-alpha), blas32.Vector{N: dim, Inc: 1, Data: s.Vec}, m)
	}
	if ok, err := normalise(m); !ok || err != nil {
		return err
	}
	copy(s.Vec, m.Data)
	s.Updates++
	s.UpdatedAt = at
	return nil
}

// UnitMean sets dst to the weighted mean of vecs scaled to unit length:
// what Blend with alpha 1 makes of a state. It allocates nothing, and
// checks vecs and weights as Blend does; ok is false, with dst zero,
// where Blend would leave the state as it was (nothing to blend, or a
// zero mean).
func UnitMean(dst []float32, vecs [][]float32, weights []float64) (ok bool, err error) {
	clear(dst)
	m := blas32.Vector{N: len(dst), Inc: 1, Data: dst}
	if ok, err := weightedMean(m, vecs, weights); !ok || err != nil {
		return false, err
	}
	return normalise(m)
}

// weightedMean sets m (zero) to Σ (wᵢ/Σw)·vᵢ after checking every
// vector and weight; ok is false when the weights sum to 0 (nothing to
// blend).
func weightedMean(m blas32.Vector, vecs [][]float32, weights []float64) (ok bool, err error) {
	if weights != nil && len(weights) != len(vecs) {
		return false, fmt.Errorf("wave: blend got %d vectors but %d weights", len(vecs), len(weights))
	}
	dim := m.N
	var wsum float64
	for i, v := range vecs {
		if len(v) != dim {
			return false, fmt.Errorf("%w: blend vector %d has %d dimensions, want %d", ErrDimension, i, len(v), dim)
		}
		if j := nonFiniteAt(v); j >= 0 {
			return false, fmt.Errorf("%w: blend vector %d component %d is %v", ErrNonFinite, i, j, v[j])
		}
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0):
			return false, fmt.Errorf("%w: blend weight %d is %v", ErrNonFinite, i, w)
		case w < 0:
			return false, fmt.Errorf("wave: blend weight %d is negative (%v)", i, w)
		}
		wsum += w
	}
	switch {
	case wsum == 0:
		return false, nil
	case math.IsInf(wsum, 0):
		return false, fmt.Errorf("%w: blend weights sum to %v", ErrNonFinite, wsum)
	}
	for i, v := range vecs {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if w == 0 {
			continue
		}
		blas32.Axpy(float32(w/wsum), blas32.Vector{N: dim, Inc: 1, Data: v}, m)
	}
	return true, nil
}

// normalise scales m to unit length; ok is false when m is zero.
func normalise(m blas32.Vector) (ok bool, err error) {
	nrm := float64(blas32.Nrm2(m))
	switch {
	case nrm == 0:
		return false, nil
	case math.IsNaN(nrm) || math.IsInf(nrm, 0):
		return false, fmt.Errorf("%w: blend overflowed float32", ErrNonFinite)
	}
	blas32.Scal(float32(1/nrm), m)
	return true, nil
}

// nonFiniteAt is the index of the first NaN or ±Inf in v, or -1.
func nonFiniteAt(v []float32) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

// DimValue is one component of a vector.
type DimValue struct {
	Dim   int     `json:"dim"`
	Value float32 `json:"value"`
}

// StateSummary describes a state vector for people: its norm (1 once it
// has been updated, 0 before), its largest components and how many
// blends made it.
type StateSummary struct {
	Norm      float64    `json:"norm"`
	Top       []DimValue `json:"top"`
	Updates   int        `json:"updates"`
	UpdatedAt time.Time  `json:"updated_at,omitzero"`
}

// Summary returns the norm, the (at most) k non-zero components of
// largest magnitude, largest first (ties by dimension), and the update
// count.
func (s *StateVector) Summary(k int) StateSummary {
	sum := StateSummary{Updates: s.Updates, UpdatedAt: s.UpdatedAt}
	if len(s.Vec) > 0 {
		sum.Norm = float64(blas32.Nrm2(blas32.Vector{N: len(s.Vec), Inc: 1, Data: s.Vec}))
	}
	if k <= 0 {
		return sum
	}
	var all []DimValue
	for i, x := range s.Vec {
		if x != 0 {
			all = append(all, DimValue{Dim: i, Value: x})
		}
	}
	slices.SortFunc(all, func(a, b DimValue) int {
		if c := cmp.Compare(math.Abs(float64(b.Value)), math.Abs(float64(a.Value))); c != 0 {
			return c
		}
		return cmp.Compare(a.Dim, b.Dim)
	})
	sum.Top = all[:min(k, len(all)):min(k, len(all))]
	return sum
}

// String renders the summary on one line, e.g.
// "norm=1.000 updates=3 top=[17:+0.412 3:-0.380]".
func (s StateSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "norm=%.3f updates=%d top=[", s.Norm, s.Updates)
	for i, d := range s.Top {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%+.3f", d.Dim, d.Value)
	}
	b.WriteByte(']')
	return b.String()
}
