package wave

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DecayFn names a salience decay function.
type DecayFn string

// Decay functions. Each halves salience at one half-life.
const (
	DecayExp    DecayFn = "exp"
	DecayPower  DecayFn = "power"
	DecayLinear DecayFn = "linear"
)

// Decay is how salience fades with age.
type Decay struct {
	Fn       DecayFn
	HalfLife time.Duration
}

// Validate reports an unknown function or a non-positive half-life.
func (d Decay) Validate() error {
	switch d.Fn {
	case DecayExp, DecayPower, DecayLinear:
	default:
		return fmt.Errorf("wave: unknown decay function %q", d.Fn)
	}
	if d.HalfLife <= 0 {
		return errors.New("wave: half-life must be positive")
	}
	return nil
}

// Factor is the multiplier of salience after age.
func (d Decay) Factor(age time.Duration) float64 {
	if age <= 0 || d.HalfLife <= 0 {
		return 1
	}
	x := age.Seconds() / d.HalfLife.Seconds()
	switch d.Fn {
	case DecayPower:
		return 1 / (1 + x)
	case DecayLinear:
		return math.Max(0, 1-x/2)
	default:
		return math.Exp2(-x)
	}
}

// Apply decays score from last to now.
func (d Decay) Apply(score float64, last, now time.Time) float64 {
	return score * d.Factor(now.Sub(last))
}

// Reinforce adds amount (clamped to [0,1]) to score, saturating at 1.
func Reinforce(score, amount float64) float64 {
	amount = math.Min(1, math.Max(0, amount))
	return score + amount*(1-score)
}
