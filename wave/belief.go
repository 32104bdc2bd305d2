package wave

import (
	"math"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

const (
	// PriorStrength is the pseudo-count of evidence a new belief's prior
	// is worth: NewBelief(p) starts at Beta(p·2, (1-p)·2), so
	// NewBelief(0.5) is the uniform Beta(1, 1) and two observations
	// weigh as much as the prior.
	PriorStrength = 2.0
	// HypothesisUncertainty is the posterior variance above which a
	// belief counts as a hypothesis whatever its score: half the
	// variance of the uniform prior (1/12). NewBelief(0.5) is a
	// hypothesis, and so is it after one observation at confidence 1;
	// after two it is not. A prior p is confident enough on its own
	// when p(1-p)/3 <= 1/24, i.e. p <= 0.146 or p >= 0.854.
	HypothesisUncertainty = 1.0 / 24
)

// Belief is a Beta–Bernoulli estimate of how likely a node or edge is to
// be true. Alpha and Beta count the evidence for and against (prior
// pseudo-counts included); Score is the posterior mean
// Alpha/(Alpha+Beta). The zero Belief holds no evidence: its score is 0
// and its uncertainty maximal.
//
// A Belief is a value; it is not safe for concurrent mutation.
type Belief struct {
	Score     float64   `json:"score"`
	Alpha     float64   `json:"alpha"`
	Beta      float64   `json:"beta"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewBelief returns a belief with mean prior (clamped to [0, 1]; NaN
// means 0.5, no opinion) worth PriorStrength observations.
func NewBelief(prior float64) Belief {
	if math.IsNaN(prior) {
		prior = 0.5
	}
	p := clampUnit(prior)
	return Belief{Score: p, Alpha: p * PriorStrength, Beta: (1 - p) * PriorStrength}
}

// Observe adds one observation made with confidence c (clamped to
// [0, 1]): c to Alpha, 1-c to Beta. Repeated observations at c move the
// score toward c. UpdatedAt becomes at unless at is earlier (late,
// out-of-order evidence still counts but does not move time back). A NaN
// confidence is ignored.
func (b *Belief) Observe(confidence float64, at time.Time) {
	if math.IsNaN(confidence) {
		return
	}
	c := clampUnit(confidence)
	b.Alpha += c
	b.Beta += 1 - c
	b.Score = b.Alpha / (b.Alpha + b.Beta)
	if at.After(b.UpdatedAt) {
		b.UpdatedAt = at
	}
}

// Evidence is the total weight of observations and prior, Alpha+Beta.
func (b Belief) Evidence() float64 { return b.Alpha + b.Beta }

// Uncertainty is the variance of the Beta(Alpha, Beta) posterior, in
// [0, 0.25]: 1/12 for the uniform prior, shrinking as evidence grows.
// With no evidence at all it is 0.25, the supremum.
func (b Belief) Uncertainty() float64 {
	if b.Alpha > 0 && b.Beta > 0 {
		return distuv.Beta{Alpha: b.Alpha, Beta: b.Beta}.Variance()
	}
	// Degenerate: all evidence on one side (variance 0) or none at all.
	if b.Alpha+b.Beta > 0 {
		return 0
	}
	return 0.25
}

// IsHypothesis reports whether b is too weak to state as fact: its score
// is below threshold, or its uncertainty exceeds HypothesisUncertainty.
func (b Belief) IsHypothesis(threshold float64) bool {
	return b.Score < threshold || b.Uncertainty() > HypothesisUncertainty
}

// Merge folds the evidence of o into b, as if b had also seen what o saw:
// o's pseudo-counts beyond the neutral prior are added to b's.
func (b *Belief) Merge(o Belief) {
	prior := NewBelief(0.5)
	b.Alpha += math.Max(0, o.Alpha-prior.Alpha)
	b.Beta += math.Max(0, o.Beta-prior.Beta)
	if b.Alpha+b.Beta > 0 {
		b.Score = b.Alpha / (b.Alpha + b.Beta)
	}
	if o.UpdatedAt.After(b.UpdatedAt) {
		b.UpdatedAt = o.UpdatedAt
	}
}
