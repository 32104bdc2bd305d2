package wave

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var allDecayFns = []DecayFn{DecayExp, DecayPower, DecayLinear}

func TestDecayFactorAtHalfLife(t *testing.T) {
	for _, fn := range allDecayFns {
		for _, hl := range []time.Duration{time.Millisecond, time.Second, 10 * time.Minute, 90 * 24 * time.Hour} {
			d := Decay{Fn: fn, HalfLife: hl}
			if got := d.Factor(hl); math.Abs(got-0.5) > 1e-12 {
				t.Errorf("%s half-life %v: Factor(half-life) = %v, want 0.5", fn, hl, got)
			}
			if got := d.Factor(0); got != 1 {
				t.Errorf("%s: Factor(0) = %v, want 1", fn, got)
			}
			if got := d.Factor(-hl); got != 1 {
				t.Errorf("%s: Factor(-half-life) = %v, want 1 (negative age is 0)", fn, got)
			}
		}
	}
}

func TestDecayFactorValues(t *testing.T) {
	const hl = time.Hour
	tests := []struct {
		fn   DecayFn
		age  time.Duration
		want float64
	}{
		{DecayExp, 30 * time.Minute, 1 / math.Sqrt2},
		{DecayExp, 2 * hl, 0.25},
		{DecayExp, 10 * hl, 1.0 / 1024},
		{"", 2 * hl, 0.25}, // empty Fn is exp
		{DecayPower, 2 * hl, 1.0 / 3},
		{DecayPower, 9 * hl, 0.1},
		{DecayPower, 30 * time.Minute, 2.0 / 3},
		{DecayLinear, 30 * time.Minute, 0.75},
		{DecayLinear, 3 * hl / 2, 0.25},
		{DecayLinear, 2 * hl, 0},
		{DecayLinear, 50 * hl, 0},
	}
	for _, tc := range tests {
		if got := (Decay{Fn: tc.fn, HalfLife: hl}).Factor(tc.age); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%q Factor(%v) = %v, want %v", tc.fn, tc.age, got, tc.want)
		}
	}
}

func TestDecayMonotone(t *testing.T) {
	for _, fn := range allDecayFns {
		d := Decay{Fn: fn, HalfLife: time.Minute}
		prev := 1.0
		for age := time.Duration(0); age <= 30*time.Minute; age += 7 * time.Second {
			f := d.Factor(age)
			if f > prev || f < 0 || f > 1 {
				t.Fatalf("%s: Factor(%v) = %v after %v: not non-increasing in [0, 1]", fn, age, f, prev)
			}
			prev = f
		}
	}
}

func TestDecayValidate(t *testing.T) {
	tests := []struct {
		d    Decay
		want []string // substrings; none = valid
	}{
		{Decay{DecayExp, time.Hour}, nil},
		{Decay{DecayPower, time.Nanosecond}, nil},
		{Decay{DecayLinear, time.Hour}, nil},
		{Decay{"", time.Hour}, nil},
		{Decay{"gaussian", time.Hour}, []string{`unknown decay function "gaussian"`}},
		{Decay{DecayExp, 0}, []string{"half-life must be positive, got 0s"}},
		{Decay{DecayExp, -time.Second}, []string{"half-life must be positive"}},
		{Decay{"EXP", 0}, []string{"unknown decay function", "half-life"}},
	}
	for _, tc := range tests {
		err := tc.d.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tc.d, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v: no error", tc.d)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "wave: ") {
				t.Errorf("%+v: error %q does not mention %q", tc.d, err, w)
			}
		}
		// An invalid decay never decays.
		if f := tc.d.Factor(100 * time.Hour); f != 1 {
			t.Errorf("%+v: invalid decay has Factor %v, want 1", tc.d, f)
		}
	}
}

func TestDecayApply(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	d := Decay{Fn: DecayExp, HalfLife: time.Hour}
	if got := d.Apply(0.8, now.Add(-time.Hour), now); math.Abs(got-0.4) > 1e-12 {
		t.Errorf("Apply over one half-life = %v, want 0.4", got)
	}
	if got := d.Apply(0.8, now.Add(time.Minute), now); got != 0.8 {
		t.Errorf("Apply with last after now = %v, want 0.8 (skew is age 0)", got)
	}
	if got := d.Apply(0.8, time.Time{}, now); got != 0 {
		t.Errorf("Apply from the zero time = %v, want 0", got)
	}
}

func TestDecayApplyBatchMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const n = 3*batchChunk + 17 // several chunks and a tail
	scores := make([]float64, n)
	ages := make([]float64, n)
	for i := range n {
		scores[i] = r.Float64()
		// Whole milliseconds, so the Duration of the scalar form is exact;
		// a few negative (clock skew), a few zero, some far past 2 half-lives.
		ages[i] = float64(r.IntN(8*3600*1000)-600*1000) / 1000
	}
	ages[0], ages[1] = 0, -5
	for _, fn := range allDecayFns {
		for _, hl := range []time.Duration{time.Second, 37 * time.Minute, 2 * time.Hour} {
			d := Decay{Fn: fn, HalfLife: hl}
			dst := make([]float64, n)
			d.ApplyBatch(dst, scores, ages)
			now := time.Unix(1_700_000_000, 0)
			for i := range n {
				last := now.Add(-time.Duration(math.Round(ages[i]*1000)) * time.Millisecond)
				want := d.Apply(scores[i], last, now)
				if math.Abs(dst[i]-want) > 1e-9 {
					t.Fatalf("%s hl %v: item %d (age %vs): batch %v, scalar %v", fn, hl, i, ages[i], dst[i], want)
				}
			}
			// In place over the scores, and over the ages.
			s2 := append([]float64(nil), scores...)
			d.ApplyBatch(s2, s2, ages)
			a2 := append([]float64(nil), ages...)
			d.ApplyBatch(a2, scores, a2)
			for i := range n {
				if s2[i] != dst[i] || a2[i] != dst[i] {
					t.Fatalf("%s: in-place results differ at %d: %v %v %v", fn, i, s2[i], a2[i], dst[i])
				}
			}
		}
	}
}

func TestDecayApplyBatchEdges(t *testing.T) {
	scores := []float64{0.5, 0.5, 0.5}
	ages := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, fn := range allDecayFns {
		dst := make([]float64, 3)
		Decay{Fn: fn, HalfLife: time.Second}.ApplyBatch(dst, scores, ages)
		if dst[0] != 0.5 || dst[1] != 0 || dst[2] != 0.5 {
			t.Errorf("%s: NaN, +Inf, -Inf ages gave %v, want [0.5 0 0.5]", fn, dst)
		}
	}
	dst := make([]float64, 3)
	Decay{Fn: "bogus", HalfLife: time.Second}.ApplyBatch(dst, scores, []float64{1, 2, 3})
	if dst[0] != 0.5 || dst[2] != 0.5 {
		t.Errorf("invalid decay changed scores: %v", dst)
	}
	Decay{}.ApplyBatch(nil, nil, nil) // empty is fine
	defer func() {
		if recover() == nil {
			t.Error("length mismatch did not panic")
		}
	}()
	Decay{Fn: DecayExp, HalfLife: time.Second}.ApplyBatch(make([]float64, 2), scores, ages)
}

func TestReinforce(t *testing.T) {
	tests := []struct {
		score, amount, want float64
	}{
		{0, 0, 0},
		{0, 0.3, 0.3},
		{0.5, 0.5, 0.75},
		{0.9, 1, 1},
		{0.4, 0, 0.4},
		{0.4, -2, 0.4}, // amount clamped to 0
		{0.4, 7, 1},    // amount clamped to 1
		{1.5, 0.5, 1},  // score clamped to 1
		{-1, 0.5, 0.5}, // score clamped to 0
		{math.NaN(), 0.2, 0.2},
		{0.2, math.NaN(), 0.2},
	}
	for _, tc := range tests {
		if got := Reinforce(tc.score, tc.amount); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Reinforce(%v, %v) = %v, want %v", tc.score, tc.amount, got, tc.want)
		}
	}
	// Properties: in [0, 1], never below the (clamped) score, monotone in amount.
	for s := -0.5; s <= 1.5; s += 0.05 {
		prev := -1.0
		for a := -0.5; a <= 1.5; a += 0.05 {
			got := Reinforce(s, a)
			if got < 0 || got > 1 || got < clampUnit(s) || got < prev {
				t.Fatalf("Reinforce(%v, %v) = %v violates [0,1]/monotonicity (prev %v)", s, a, got, prev)
			}
			prev = got
		}
	}
	// Repeated reinforcement saturates without passing 1.
	s := 0.0
	for range 1000 {
		s = Reinforce(s, 0.1)
	}
	if s > 1 || s < 0.999 {
		t.Errorf("after 1000 reinforcements score = %v", s)
	}
}

func BenchmarkDecayApplyBatch(b *testing.B) {
	for _, fn := range allDecayFns {
		b.Run(string(fn), func(b *testing.B) {
			const n = 4096 // a large candidate set
			r := rand.New(rand.NewPCG(1, 2))
			scores, ages, dst := make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range n {
				scores[i], ages[i] = r.Float64(), r.Float64()*86400
			}
			d := Decay{Fn: fn, HalfLife: 6 * time.Hour}
			b.ReportAllocs()
			items := 0
			for b.Loop() {
				d.ApplyBatch(dst, scores, ages)
				items += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(items), "ns/item")
		})
	}
}
