package wave

import (
	"fmt"
	"math"
	"time"
)

// StateVector is the context state vector of a session.
type StateVector struct {
	Vec       []float32 `json:"vec"`
	Updates   int       `json:"updates"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewStateVector returns a zero state of dim dimensions.
func NewStateVector(dim int) *StateVector { return &StateVector{Vec: make([]float32, dim)} }

// Blend moves the state toward the weighted mean of vecs at rate alpha
// and normalises it.
func (s *StateVector) Blend(vecs [][]float32, weights []float64, alpha float64, at time.Time) error {
	if len(vecs) != len(weights) {
		return fmt.Errorf("wave: %d vectors, %d weights", len(vecs), len(weights))
	}
	mean := make([]float64, len(s.Vec))
	var wsum float64
	for i, v := range vecs {
		if len(v) != len(s.Vec) {
			return fmt.Errorf("%w: vector %d has %d dimensions, want %d", ErrDimension, i, len(v), len(s.Vec))
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: vector %d", ErrNonFinite, i)
			}
			mean[j] += weights[i] * float64(x)
		}
		wsum += weights[i]
	}
	if wsum == 0 {
		return nil
	}
	for j := range s.Vec {
		s.Vec[j] = float32((1-alpha)*float64(s.Vec[j]) + alpha*mean[j]/wsum)
	}
	Normalize(s.Vec)
	s.Updates++
	s.UpdatedAt = at
	return nil
}
