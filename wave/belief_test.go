package wave

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewBelief(t *testing.T) {
	tests := []struct {
		prior                   float64
		score, alpha, beta, unc float64
	}{
		{0.5, 0.5, 1, 1, 1.0 / 12},
		{0.9, 0.9, 1.8, 0.2, 0.9 * 0.1 / 3},
		{0, 0, 0, 2, 0},
		{1, 1, 2, 0, 0},
		{-3, 0, 0, 2, 0},
		{7, 1, 2, 0, 0},
		{math.NaN(), 0.5, 1, 1, 1.0 / 12},
	}
	for _, tc := range tests {
		b := NewBelief(tc.prior)
		if !beliefNear(b.Score, tc.score) || !beliefNear(b.Alpha, tc.alpha) || !beliefNear(b.Beta, tc.beta) {
			t.Errorf("NewBelief(%v) = %+v, want score %v alpha %v beta %v", tc.prior, b, tc.score, tc.alpha, tc.beta)
		}
		if u := b.Uncertainty(); !beliefNear(u, tc.unc) {
			t.Errorf("NewBelief(%v).Uncertainty() = %v, want %v", tc.prior, u, tc.unc)
		}
		if !beliefNear(b.Evidence(), PriorStrength) {
			t.Errorf("NewBelief(%v).Evidence() = %v", tc.prior, b.Evidence())
		}
	}
}

func beliefNear(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

func TestBeliefConverges(t *testing.T) {
	for _, c := range []float64{0, 0.2, 0.5, 0.9, 1} {
		for _, prior := range []float64{0.1, 0.5, 0.95} {
			b := NewBelief(prior)
			prevDist := math.Abs(b.Score - c)
			for i := range 400 {
				b.Observe(c, time.Unix(int64(i), 0))
				dist := math.Abs(b.Score - c)
				if dist > prevDist+1e-15 {
					t.Fatalf("c=%v prior=%v step %d: moved away from c (%v -> %v)", c, prior, i, prevDist, dist)
				}
				prevDist = dist
			}
			if prevDist > 0.01 {
				t.Errorf("c=%v prior=%v: score %v after 400 observations", c, prior, b.Score)
			}
			// Contradicting a confident prior first raises the variance;
			// with evidence it falls below 1/(4(n+1)) whatever the data.
			if u := b.Uncertainty(); u > 0.25/(b.Evidence()+1) {
				t.Errorf("c=%v prior=%v: uncertainty %v after 400 observations", c, prior, u)
			}
			if !beliefNear(b.Score, b.Alpha/(b.Alpha+b.Beta)) {
				t.Errorf("score %v is not the posterior mean", b.Score)
			}
		}
	}
}

func TestBeliefObserve(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBelief(0.5)
	b.Observe(1, t0)
	if !beliefNear(b.Alpha, 2) || !beliefNear(b.Beta, 1) || !beliefNear(b.Score, 2.0/3) || !b.UpdatedAt.Equal(t0) {
		t.Fatalf("after Observe(1): %+v", b)
	}
	b.Observe(2, t0.Add(-time.Hour)) // clamped to 1; late evidence keeps the newer time
	if !beliefNear(b.Alpha, 3) || !beliefNear(b.Beta, 1) || !b.UpdatedAt.Equal(t0) {
		t.Fatalf("after clamped, late Observe: %+v", b)
	}
	b.Observe(-1, t0.Add(time.Hour)) // clamped to 0
	if !beliefNear(b.Alpha, 3) || !beliefNear(b.Beta, 2) || !b.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after Observe(-1): %+v", b)
	}
	before := b
	b.Observe(math.NaN(), t0.Add(2*time.Hour))
	if b != before {
		t.Fatalf("NaN observation changed the belief: %+v -> %+v", before, b)
	}
	var z Belief // no evidence at all
	if u := z.Uncertainty(); u != 0.25 {
		t.Errorf("zero Belief uncertainty = %v, want 0.25", u)
	}
	z.Observe(0.7, t0)
	if !beliefNear(z.Score, 0.7) {
		t.Errorf("zero Belief after Observe(0.7): %+v", z)
	}
}

func TestBeliefUncertaintyMatchesClosedForm(t *testing.T) {
	for _, ab := range [][2]float64{{1, 1}, {2, 5}, {0.3, 0.4}, {100, 3}, {1e6, 1e6}} {
		a, c := ab[0], ab[1]
		want := a * c / ((a + c) * (a + c) * (a + c + 1))
		got := Belief{Alpha: a, Beta: c}.Uncertainty()
		if math.Abs(got-want) > 1e-12*max(1, want) {
			t.Errorf("Uncertainty(Beta(%v, %v)) = %v, want %v", a, c, got, want)
		}
		if got < 0 || got > 0.25 {
			t.Errorf("Uncertainty(Beta(%v, %v)) = %v outside [0, 0.25]", a, c, got)
		}
	}
}

func TestBeliefIsHypothesis(t *testing.T) {
	at := time.Unix(0, 0)
	observed := func(prior float64, cs ...float64) Belief {
		b := NewBelief(prior)
		for _, c := range cs {
			b.Observe(c, at)
		}
		return b
	}
	tests := []struct {
		name      string
		b         Belief
		threshold float64
		want      bool
	}{
		{"fresh uniform prior", NewBelief(0.5), 0.5, true},
		{"one confirmation", observed(0.5, 1), 0.5, true},
		{"two confirmations", observed(0.5, 1, 1), 0.5, false},
		{"two confirmations, strict threshold", observed(0.5, 1, 1), 0.8, true},
		{"confident prior", NewBelief(0.9), 0.5, false},
		{"low score", observed(0.5, 0, 0, 0, 0), 0.5, true},
		{"many middling observations", observed(0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6), 0.5, false},
		{"no evidence", Belief{}, 0, true},
	}
	for _, tc := range tests {
		if got := tc.b.IsHypothesis(tc.threshold); got != tc.want {
			t.Errorf("%s: IsHypothesis(%v) = %v, want %v (%+v, uncertainty %v)",
				tc.name, tc.threshold, got, tc.want, tc.b, tc.b.Uncertainty())
		}
	}
}

func TestBeliefJSON(t *testing.T) {
	b := NewBelief(0.5)
	b.Observe(0.8, time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC))
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"score":`, `"alpha":`, `"beta":`, `"updated_at":"2025-03-04T05:06:07Z"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("JSON %s lacks %s", data, key)
		}
	}
	var back Belief
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Score != b.Score || back.Alpha != b.Alpha || back.Beta != b.Beta || !back.UpdatedAt.Equal(b.UpdatedAt) {
		t.Errorf("round trip: %+v != %+v", back, b)
	}
}
