package wave

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"gonum.org/v1/gonum/floats"
)

// DecayFn names the curve by which salience fades with age.
type DecayFn string

// The decay curves. With t = age / half-life, each is 1 at t = 0, 0.5 at
// t = 1 and non-increasing in t:
//
//	exp     0.5^t          halves every half-life; for fast-moving context
//	power   1 / (1 + t)    long tail: a third at 2 half-lives, a tenth at 9
//	linear  max(0, 1 - t/2) reaches 0 at two half-lives and stays there
const (
	DecayExp    DecayFn = "exp"
	DecayPower  DecayFn = "power"
	DecayLinear DecayFn = "linear"
)

// Decay is how salience fades with age. The empty Fn means [DecayExp].
//
// An invalid Decay (an unknown Fn, or a HalfLife that is not positive)
// does not decay at all: its Factor is 1. A misconfigured edge thus keeps
// its salience rather than losing it; call [Decay.Validate] where
// configuration enters the system.
type Decay struct {
	Fn       DecayFn
	HalfLife time.Duration
}

// Validate reports an unknown function and a non-positive half-life
// (both, if both are wrong).
func (d Decay) Validate() error {
	var errs []error
	switch d.Fn {
	case "", DecayExp, DecayPower, DecayLinear:
	default:
		errs = append(errs, fmt.Errorf("wave: unknown decay function %q (want %q, %q or %q)",
			d.Fn, DecayExp, DecayPower, DecayLinear))
	}
	if d.HalfLife <= 0 {
		errs = append(errs, fmt.Errorf("wave: decay half-life must be positive, got %v", d.HalfLife))
	}
	return errors.Join(errs...)
}

// valid reports whether d decays (see Decay).
func (d Decay) valid() bool {
	switch d.Fn {
	case "", DecayExp, DecayPower, DecayLinear:
		return d.HalfLife > 0
	}
	return false
}

// Factor is the multiplier of a score after age: 1 at age 0 (and for
// negative ages, treated as 0), 0.5 at one half-life, non-increasing.
func (d Decay) Factor(age time.Duration) float64 {
	if !d.valid() {
		return 1
	}
	return d.factor(float64(max(age, 0)) / float64(d.HalfLife))
}

// factor is the decay curve at t = age/half-life >= 0.
func (d Decay) factor(t float64) float64 {
	switch d.Fn {
	case DecayPower:
		return 1 / (1 + t)
	case DecayLinear:
		return max(0, 1-t/2)
	default:
		return math.Exp2(-t)
	}
}

// Apply returns score decayed from last to now. A last after now (clock
// skew between writers) counts as age 0.
func (d Decay) Apply(score float64, last, now time.Time) float64 {
	return score * d.Factor(now.Sub(last))
}

// batchChunk is how many factors ApplyBatch computes at a time, in a
// pooled buffer, so that it does not allocate.
const batchChunk = 256

// batchBufs holds ApplyBatch's buffers (a stack array would escape:
// gonum's assembly kernels take the slices).
var batchBufs = sync.Pool{New: func() any { return new([batchChunk]float64) }}

// ApplyBatch sets dst[i] to scores[i] decayed over ageSeconds[i]
// seconds, for a whole candidate set, agreeing with [Decay.Apply] to
// within floating-point rounding. Ages that are negative or NaN count as
// 0; +Inf decays to 0. dst may be scores or ageSeconds (in-place). It
// panics if the three lengths differ, as gonum's floats does.
func (d Decay) ApplyBatch(dst, scores, ageSeconds []float64) {
	if len(dst) != len(scores) || len(dst) != len(ageSeconds) {
		panic(fmt.Sprintf("wave: ApplyBatch slice lengths differ: dst %d, scores %d, ages %d",
			len(dst), len(scores), len(ageSeconds)))
	}
	if !d.valid() {
		copy(dst, scores)
		return
	}
	perHalfLife := 1 / d.HalfLife.Seconds()
	buf := batchBufs.Get().(*[batchChunk]float64)
	defer batchBufs.Put(buf)
	for lo := 0; lo < len(dst); lo += batchChunk {
		hi := min(lo+batchChunk, len(dst))
		t := buf[:hi-lo]
		floats.ScaleTo(t, perHalfLife, ageSeconds[lo:hi]) // t = age / half-life
		for i, x := range t {
			if !(x > 0) { // negative or NaN
				t[i] = 0
			}
		}
		switch d.Fn {
		case DecayPower: // score / (1 + t)
			floats.AddConst(1, t)
			floats.DivTo(dst[lo:hi], scores[lo:hi], t)
			continue
		case DecayLinear: // score * max(0, 1 - t/2)
			floats.Scale(-0.5, t)
			floats.AddConst(1, t)
			for i, x := range t {
				t[i] = max(0, x)
			}
		default: // score * 2^-t
			for i, x := range t {
				t[i] = math.Exp2(-x)
			}
		}
		floats.MulTo(dst[lo:hi], scores[lo:hi], t)
	}
}

// Reinforce returns score pushed toward 1 by amount, saturating:
// score + amount*(1-score). amount is clamped to [0, 1] and score to
// [0, 1] first (NaN counts as 0), so the result is always in [0, 1]:
// Reinforce(s, 0) = s, Reinforce(s, 1) = 1, and repeated reinforcement
// approaches 1 without passing it.
func Reinforce(score, amount float64) float64 {
	score, amount = clampUnit(score), clampUnit(amount)
	return score + amount*(1-score)
}

// clampUnit clamps x to [0, 1], mapping NaN to 0.
func clampUnit(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, 1)
}
