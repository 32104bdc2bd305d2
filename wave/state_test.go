package wave

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func stateNorm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func stateCos(a, b []float32) float64 {
	var ab float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
	}
	return ab / (stateNorm(a) * stateNorm(b))
}

func stateRandUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	Normalize(v)
	return v
}

func TestNewStateVector(t *testing.T) {
	s := NewStateVector(4)
	if s.Dim() != 4 || stateNorm(s.Vec) != 0 || s.Updates != 0 || !s.UpdatedAt.IsZero() {
		t.Fatalf("NewStateVector(4) = %+v", s)
	}
	if sum := s.Summary(3); sum.Norm != 0 || len(sum.Top) != 0 {
		t.Fatalf("zero summary = %+v", sum)
	}
	defer func() {
		if recover() == nil {
			t.Error("negative dimension did not panic")
		}
	}()
	NewStateVector(-1)
}

func TestBlendFirstUpdateAndWeights(t *testing.T) {
	at := time.Date(2025, 5, 5, 5, 5, 5, 0, time.UTC)
	tests := []struct {
		name    string
		vecs    [][]float32
		weights []float64
		alpha   float64
		want    []float32
	}{
		{"one vector, alpha 1", [][]float32{{3, 0, 4}}, nil, 1, []float32{0.6, 0, 0.8}},
		{"one vector, small alpha (from zero)", [][]float32{{3, 0, 4}}, []float64{2}, 0.1, []float32{0.6, 0, 0.8}},
		{"weighted mean", [][]float32{{1, 0, 0}, {0, 1, 0}}, []float64{3, 1}, 1, []float32{3 / float32(math.Sqrt(10)), 1 / float32(math.Sqrt(10)), 0}},
		{"nil weights are equal", [][]float32{{1, 0, 0}, {0, 1, 0}}, nil, 1, []float32{float32(math.Sqrt2 / 2), float32(math.Sqrt2 / 2), 0}},
		{"zero weight ignored", [][]float32{{1, 0, 0}, {0, 0, 1}}, []float64{0, 5}, 1, []float32{0, 0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStateVector(3)
			if err := s.Blend(tc.vecs, tc.weights, tc.alpha, at); err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if math.Abs(float64(s.Vec[i]-tc.want[i])) > 1e-6 {
					t.Fatalf("state = %v, want %v", s.Vec, tc.want)
				}
			}
			if s.Updates != 1 || !s.UpdatedAt.Equal(at) {
				t.Fatalf("Updates %d, UpdatedAt %v", s.Updates, s.UpdatedAt)
			}
		})
	}
}

func TestBlendEMA(t *testing.T) {
	s := NewStateVector(2)
	at := time.Unix(0, 0)
	if err := s.Blend([][]float32{{1, 0}}, nil, 1, at); err != nil {
		t.Fatal(err)
	}
	// (1-0.5)·(1,0) + 0.5·(0,1) = (0.5, 0.5), normalised.
	if err := s.Blend([][]float32{{0, 1}}, nil, 0.5, at); err != nil {
		t.Fatal(err)
	}
	if h := float32(math.Sqrt2 / 2); math.Abs(float64(s.Vec[0]-h)) > 1e-6 || math.Abs(float64(s.Vec[1]-h)) > 1e-6 {
		t.Fatalf("state = %v, want [%v %v]", s.Vec, h, h)
	}
}

// TestBlendProperties: unit norm after every update, and repeated
// blending toward one direction converges to it.
func TestBlendProperties(t *testing.T) {
	const dim = 384
	r := rand.New(rand.NewPCG(5, 6))
	s := NewStateVector(dim)
	at := time.Unix(1000, 0)
	for i := range 200 {
		k := 1 + r.IntN(8)
		vecs := make([][]float32, k)
		weights := make([]float64, k)
		for j := range k {
			vecs[j] = stateRandUnit(r, dim)
			weights[j] = r.Float64() * 3
		}
		if err := s.Blend(vecs, weights, 0.05+0.9*r.Float64(), at); err != nil {
			t.Fatal(err)
		}
		if n := stateNorm(s.Vec); math.Abs(n-1) > 1e-5 {
			t.Fatalf("update %d: norm %v", i, n)
		}
	}
	if s.Updates != 200 {
		t.Fatalf("Updates = %d", s.Updates)
	}
	target := stateRandUnit(r, dim)
	for range 100 {
		if err := s.Blend([][]float32{target}, nil, 0.2, at); err != nil {
			t.Fatal(err)
		}
	}
	if c := stateCos(s.Vec, target); c < 0.9999 {
		t.Fatalf("cos to the repeated target = %v", c)
	}
}

func TestBlendErrorsLeaveStateUnchanged(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name    string
		vecs    [][]float32
		weights []float64
		alpha   float64
		is      error  // nil: just an error
		msg     string // substring
	}{
		{"short vector", [][]float32{{1, 0, 0}, {1, 0}}, nil, 0.5, ErrDimension, "vector 1 has 2 dimensions, want 3"},
		{"long vector", [][]float32{{1, 0, 0, 0}}, nil, 0.5, ErrDimension, "want 3"},
		{"NaN component", [][]float32{{1, nan, 0}}, nil, 0.5, ErrNonFinite, "vector 0 component 1"},
		{"Inf component", [][]float32{{0, 0, 1}, {inf, 0, 0}}, nil, 0.5, ErrNonFinite, "vector 1 component 0"},
		{"NaN weight", [][]float32{{1, 0, 0}}, []float64{math.NaN()}, 0.5, ErrNonFinite, "weight 0"},
		{"Inf weight", [][]float32{{1, 0, 0}}, []float64{math.Inf(1)}, 0.5, ErrNonFinite, "weight 0"},
		{"weights overflow", [][]float32{{1, 0, 0}, {0, 1, 0}}, []float64{math.MaxFloat64, math.MaxFloat64}, 0.5, ErrNonFinite, "sum"},
		{"negative weight", [][]float32{{1, 0, 0}}, []float64{-1}, 0.5, nil, "negative"},
		{"weights length", [][]float32{{1, 0, 0}}, []float64{1, 2}, 0.5, nil, "1 vectors but 2 weights"},
		{"alpha 0", [][]float32{{1, 0, 0}}, nil, 0, nil, "alpha"},
		{"alpha above 1", [][]float32{{1, 0, 0}}, nil, 1.5, nil, "alpha"},
		{"alpha NaN", [][]float32{{1, 0, 0}}, nil, math.NaN(), nil, "alpha"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStateVector(3)
			if err := s.Blend([][]float32{{0, 0, 1}}, nil, 1, time.Unix(1, 0)); err != nil {
				t.Fatal(err)
			}
			before := *s
			before.Vec = slices.Clone(s.Vec)
			err := s.Blend(tc.vecs, tc.weights, tc.alpha, time.Unix(2, 0))
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error = %v, want %v containing %q", err, tc.is, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "wave: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if !slices.Equal(s.Vec, before.Vec) || s.Updates != before.Updates || !s.UpdatedAt.Equal(before.UpdatedAt) {
				t.Fatalf("state changed on error: %+v -> %+v", before, *s)
			}
		})
	}
}

func TestBlendNoOps(t *testing.T) {
	at := time.Unix(5, 0)
	tests := []struct {
		name    string
		vecs    [][]float32
		weights []float64
	}{
		{"no vectors", nil, nil},
		{"zero weights", [][]float32{{1, 0}}, []float64{0}},
		{"cancelling vectors", [][]float32{{1, 0}, {-1, 0}}, nil},
	}
	for _, tc := range tests {
		s := NewStateVector(2)
		if err := s.Blend(tc.vecs, tc.weights, 1, at); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Updates != 0 || stateNorm(s.Vec) != 0 || !s.UpdatedAt.IsZero() {
			t.Fatalf("%s: state changed: %+v", tc.name, s)
		}
	}
}

func TestBlendResetsCorruptState(t *testing.T) {
	s := &StateVector{Vec: []float32{float32(math.NaN()), 1, 0}, Updates: 4}
	if err := s.Blend([][]float32{{0, 0, 2}}, nil, 0.3, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Vec, []float32{0, 0, 1}) || s.Updates != 5 {
		t.Fatalf("state = %+v, want [0 0 1] after 5 updates", s)
	}
}

func TestStateSummary(t *testing.T) {
	s := &StateVector{Vec: []float32{0.1, -0.5, 0, 0.5, -0.7, 0}, Updates: 3}
	tests := []struct {
		k    int
		want []DimValue
	}{
		{0, nil},
		{-1, nil},
		{1, []DimValue{{4, -0.7}}},
		{3, []DimValue{{4, -0.7}, {1, -0.5}, {3, 0.5}}}, // ties by dimension
		{10, []DimValue{{4, -0.7}, {1, -0.5}, {3, 0.5}, {0, 0.1}}},
	}
	for _, tc := range tests {
		sum := s.Summary(tc.k)
		if !slices.Equal(sum.Top, tc.want) {
			t.Errorf("Summary(%d).Top = %v, want %v", tc.k, sum.Top, tc.want)
		}
		if sum.Updates != 3 || math.Abs(sum.Norm-stateNorm(s.Vec)) > 1e-6 {
			t.Errorf("Summary(%d) = %+v", tc.k, sum)
		}
	}
	if got, want := s.Summary(2).String(), "norm=1.000 updates=3 top=[4:-0.700 1:-0.500]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func BenchmarkStateBlend(b *testing.B) {
	const dim = 384
	r := rand.New(rand.NewPCG(1, 1))
	vecs := make([][]float32, 9) // the query plus the top 8 nodes, as the planner blends
	weights := make([]float64, len(vecs))
	for i := range vecs {
		vecs[i], weights[i] = stateRandUnit(r, dim), 1+r.Float64()
	}
	s := NewStateVector(dim)
	at := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Blend(vecs, weights, 0.3, at); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(vecs)*dim)/(float64(b.Elapsed().Nanoseconds())/float64(s.Updates)), "components/ns")
}

// UnitMean is what Blend with alpha 1 makes of a fresh state, errors
// and no-ops included, and allocates nothing.
func TestUnitMeanIsAFreshBlend(t *testing.T) {
	a, b := []float32{3, 0, 4}, []float32{0, 2, 0}
	for _, tc := range []struct {
		vecs    [][]float32
		weights []float64
	}{
		{[][]float32{a, b}, []float64{1, 0.5}},
		{[][]float32{a, b}, nil},
		{[][]float32{a}, []float64{0}},                                        // nothing to blend
		{[][]float32{a, {-3, 0, -4}}, nil},                                    // a zero mean
		{[][]float32{a, {1, 2}}, nil},                                         // a wrong length
		{[][]float32{a, {float32(math.NaN()), 0, 0}}, nil},                    // non-finite
		{[][]float32{a, b}, []float64{1, -1}},                                 // a negative weight
		{[][]float32{a, b}, []float64{1}},                                     // weights short
		{[][]float32{{math.MaxFloat32, math.MaxFloat32, 0}}, []float64{1e30}}, // overflow
	} {
		sv := NewStateVector(3)
		blendErr := sv.Blend(tc.vecs, tc.weights, 1, time.Now())
		dst := []float32{9, 9, 9}
		ok, err := UnitMean(dst, tc.vecs, tc.weights)
		if (err == nil) != (blendErr == nil) {
			t.Errorf("%v %v: UnitMean error %v, Blend error %v", tc.vecs, tc.weights, err, blendErr)
			continue
		}
		if err != nil {
			continue
		}
		if ok != (sv.Updates == 1) {
			t.Errorf("%v %v: UnitMean ok %v, Blend updated %d times", tc.vecs, tc.weights, ok, sv.Updates)
		}
		for i := range dst {
			if math.Abs(float64(dst[i]-sv.Vec[i])) > 1e-6 {
				t.Errorf("%v %v: UnitMean %v, Blend %v", tc.vecs, tc.weights, dst, sv.Vec)
				break
			}
		}
	}
	dst := make([]float32, 3)
	if n := testing.AllocsPerRun(100, func() { _, _ = UnitMean(dst, [][]float32{a, b}, []float64{1, 2}) }); n != 0 {
		t.Errorf("UnitMean allocates %v times a call", n)
	}
}
