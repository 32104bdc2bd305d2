package wave

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dotQ16Ref is the int64 dot product dotQ16 must equal.
func dotQ16Ref(q []int16, c []int8) int64 {
	var s int64
	for i := range q {
		s += int64(q[i]) * int64(c[i])
	}
	return s
}

func TestDotQ16MatchesIntegerDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 384, 385, 1000, 1536} {
		q, c := make([]int16, n), make([]int8, n)
		for trial := range 20 {
			top := int(math.MaxInt32 / (n * 128))
			for i := range q {
				q[i] = int16(r.IntN(2*min(top, math.MaxInt16)+1) - min(top, math.MaxInt16))
				c[i] = int8(r.IntN(256) - 128)
			}
			if trial == 0 { // the extremes, all one sign: the largest sums
				for i := range q {
					q[i], c[i] = int16(-min(top, math.MaxInt16)), -128
				}
			}
			want := dotQ16Ref(q, c)
			for name, fn := range map[string]func([]int16, []int8) int32{"dotQ16": dotQ16, "generic": dotQ16Generic} {
				if got := fn(q, c); int64(got) != want {
					t.Fatalf("%s n=%d trial %d: got %d, want %d", name, n, trial, got, want)
				}
			}
		}
	}
}

func TestQuantizeQueryBoundsTheIntegerDot(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 7, 384, 512, 513, 4096, maxQ16Dim} {
		q := make([]float32, n)
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		q[r.IntN(n)] = -40 // the largest magnitude, negative
		dst := make([]int16, n)
		scale, ok := quantizeQuery(q, dst)
		if !ok {
			t.Fatalf("n=%d: not served", n)
		}
		var peak int64
		for i, v := range dst {
			peak = max(peak, int64(v), -int64(v))
			if d := math.Abs(float64(scale)*float64(v) - float64(q[i])); d > float64(scale)/2*1.0001 {
				t.Fatalf("n=%d: q[%d] = %v quantised to %d×%v, off by %v", n, i, q[i], v, scale, d)
			}
		}
		// Every dotQ16 over n codes in [-128, 127] fits an int32.
		if peak*128*int64(n) > math.MaxInt32 {
			t.Fatalf("n=%d: peak %d lets the dot product overflow", n, peak)
		}
		if n <= 512 && peak != math.MaxInt16 {
			t.Fatalf("n=%d: peak %d, want the int16 range", n, peak)
		}
	}
	if _, ok := quantizeQuery(make([]float32, maxQ16Dim+1), make([]int16, maxQ16Dim+1)); ok {
		t.Fatal("a query longer than maxQ16Dim was served")
	}
	dst := []int16{5, 5}
	if s, ok := quantizeQuery([]float32{0, 0}, dst); !ok || s != 0 || dst[0] != 0 || dst[1] != 0 {
		t.Fatalf("zero query: scale %v, %v, ok %v", s, dst, ok)
	}
}

// The int16 query loses next to nothing against the float32 query on
// the same int8 codes.
func TestDotQ16AgreesWithFloatQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n = 384
	q, v := make([]float32, n), make([]float32, n)
	c, q16 := make([]int8, n), make([]int16, n)
	for trial := range 200 {
		for i := range q {
			q[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		Normalize(q)
		Normalize(v)
		cs := quantize(v, c)
		qs, _ := quantizeQuery(q, q16)
		f := cs * dotI8Generic(q, c)
		g := cs * qs * float32(dotQ16(q16, c))
		if d := math.Abs(float64(f - g)); d > 1e-4 {
			t.Fatalf("trial %d: float query %v, int16 query %v (off by %v)", trial, f, g, d)
		}
	}
}

func BenchmarkDotQ16(b *testing.B) {
	for _, d := range []int{64, 384} {
		v := clustered(1, 2, d, 2)
		c, q := make([]int8, d), make([]int16, d)
		quantize(v[1], c)
		quantizeQuery(v[0], q)
		for _, k := range []struct {
			name string
			fn   func([]int16, []int8) int32
		}{{"dotQ16", dotQ16}, {"generic", dotQ16Generic}} {
			b.Run(fmt.Sprintf("%s/dim=%d", k.name, d), func(b *testing.B) {
				var s int32
				for b.Loop() {
					s += k.fn(q, c)
				}
				_ = s
			})
		}
	}
}
