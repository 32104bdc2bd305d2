package wave

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dotU4Ref is the dot product dotU4 must equal, from the codes' values
// by dimension (nibble) rather than their layout.
func dotU4Ref(q []int8, c []byte, dim int) int64 {
	var s int64
	for i := range dim {
		s += int64(nibble(c, i)) * int64(q[i])
	}
	return s
}

// setNibble sets u[i] of the 4-bit code c.
func setNibble(c []byte, i int, u byte) {
	ch, j := i>>6, i&63
	if j < 32 {
		c[ch*32+j] = c[ch*32+j]&0xf0 | u
	} else {
		c[ch*32+j-32] = c[ch*32+j-32]&0x0f | u<<4
	}
}

func TestDotU4MatchesIntegerDot(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, dim := range []int{1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 192, 384, 385, 1000, 1536} {
		q, c := make([]int8, 2*nibbleBytes(dim)), make([]byte, nibbleBytes(dim))
		for trial := range 20 {
			v := make([]float32, dim)
			for i := range v {
				v[i] = r.Float32()*2 - 1
			}
			quantize4(v, c)
			clear(q)
			for i := range dim {
				q[i] = int8(r.IntN(255) - 127)
			}
			if trial == 0 { // the extremes, all one sign: the largest sums
				clear(c)
				for i := range dim {
					setNibble(c, i, 15)
					q[i] = -127
				}
			}
			want := dotU4Ref(q, c, dim)
			for name, fn := range map[string]func([]int8, []byte) int32{"dotU4": dotU4, "generic": dotU4Generic} {
				if got := fn(q, c); int64(got) != want {
					t.Fatalf("%s dim=%d trial %d: got %d, want %d", name, dim, trial, got, want)
				}
			}
		}
	}
}

func TestQuantize4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, dim := range []int{1, 2, 50, 64, 100, 384} {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		c := make([]byte, nibbleBytes(dim))
		lo, step := quantize4(v, c)
		got := make([]float32, dim)
		decode4(c, lo, step, got)
		for i := range v {
			if d := math.Abs(float64(got[i] - v[i])); d > float64(step)/2*1.0001+1e-6 {
				t.Fatalf("dim=%d: v[%d]=%v decodes to %v (step %v)", dim, i, v[i], got[i], step)
			}
		}
		// The padding past dim stays zero (the kernel reads it).
		for i := dim; i < 2*len(c); i++ {
			if nibble(c, i) != 0 {
				t.Fatalf("dim=%d: padding code %d is %d", dim, i, nibble(c, i))
			}
		}
	}
	// A constant vector: step 0, every code decodes to the value.
	c := make([]byte, nibbleBytes(3))
	lo, step := quantize4([]float32{0.5, 0.5, 0.5}, c)
	if lo != 0.5 || step != 0 {
		t.Fatalf("constant vector: lo %v step %v", lo, step)
	}
}

// The estimate a search scores with: close to the float32 dot product
// of unit vectors (its error is what the rescoring pool absorbs).
func TestCode4EstimatesDotProducts(t *testing.T) {
	const dim = 384
	vs := clustered(3, 2000, dim, 20)
	q := vs[0]
	q8 := make([]int8, 2*nibbleBytes(dim))
	qs, qsum := quantizeQuery8(q, q8)
	c := make([]byte, nibbleBytes(dim))
	var sq float64
	for _, v := range vs[1:] {
		lo, step := quantize4(v, c)
		est := step*qs*float32(dotU4(q8, c)) + lo*qsum
		d := float64(est - Dot(q, v))
		sq += d * d
		if math.Abs(d) > 0.05 {
			t.Fatalf("estimate %v, dot %v", est, Dot(q, v))
		}
	}
	if rms := math.Sqrt(sq / float64(len(vs)-1)); rms > 0.012 {
		t.Fatalf("rms error of the 4-bit estimate %v, want ≤ 0.012", rms)
	}
}

func BenchmarkDotU4(b *testing.B) {
	for _, d := range []int{64, 384} {
		v := clustered(1, 2, d, 2)
		c, q := make([]byte, nibbleBytes(d)), make([]int8, 2*nibbleBytes(d))
		quantize4(v[1], c)
		quantizeQuery8(v[0], q)
		for _, k := range []struct {
			name string
			fn   func([]int8, []byte) int32
		}{{"dotU4", dotU4}, {"generic", dotU4Generic}} {
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

// quantize4Ref is quantize4 as first written, nibble by nibble: the
// codes quantize4 must equal bit for bit.
func quantize4Ref(v []float32, c []byte) (lo, step float32) {
	c = c[:nibbleBytes(len(v))]
	clear(c)
	if len(v) == 0 {
		return 0, 0
	}
	lo, hi := v[0], v[0]
	for _, x := range v[1:] {
		lo = min(lo, x)
		hi = max(hi, x)
	}
	if hi <= lo {
		return lo, 0
	}
	step = (hi - lo) / 15
	inv := 1 / step
	for i, x := range v {
		u := min(15, int32((x-lo)*inv+0.5))
		ch, j := i>>6, i&63
		if j < 32 {
			c[ch*32+j] |= byte(u)
		} else {
			c[ch*32+j-32] |= byte(u) << 4
		}
	}
	return lo, step
}

func TestQuantize4MatchesItsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, dim := range []int{0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 384, 385, 1536} {
		for trial := range 20 {
			v := make([]float32, dim)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			if trial == 1 && dim > 0 {
				for i := range v {
					v[i] = 0.25 // constant: step 0
				}
			}
			if trial == 2 {
				// On a grid of half steps: codes at the rounding's
				// boundaries, ±0 among the values.
				for i := range v {
					v[i] = float32(i%31-15) * 0.05
				}
				if dim > 20 {
					v[20] = float32(math.Copysign(0, -1))
				}
			}
			centre := make([]float32, dim)
			for i := range centre {
				centre[i] = float32(r.NormFloat64()) / 4
			}
			want, got := make([]byte, nibbleBytes(dim)), make([]byte, nibbleBytes(dim))
			for i := range got {
				got[i] = 0xa5 // stale bytes must be overwritten
			}
			wlo, wstep := quantize4Ref(v, want)
			glo, gstep := quantize4(v, got)
			if glo != wlo || gstep != wstep || string(got) != string(want) {
				t.Fatalf("dim=%d trial %d: quantize4 gives lo %v step %v code %x, want %v %v %x", dim, trial, glo, gstep, got, wlo, wstep, want)
			}
			// The residual from a centre codes what quantize4 codes of
			// the difference.
			diff := make([]float32, dim)
			for i := range diff {
				diff[i] = v[i] - centre[i]
			}
			wlo, wstep = quantize4Ref(diff, want)
			var sc coder
			code, rlo, rstep := sc.residual(v, centre)
			if rlo != wlo || rstep != wstep || string(code) != string(want) {
				t.Fatalf("dim=%d trial %d: residual gives lo %v step %v code %x, want %v %v %x", dim, trial, rlo, rstep, code, wlo, wstep, want)
			}
		}
	}
}

// BenchmarkQuantize4 codes a 384-d residual as an IVF insert does.
func BenchmarkQuantize4(b *testing.B) {
	const dim = 384
	vs := clustered(5, 2, dim, 2)
	var sc coder
	b.Run("residual", func(b *testing.B) {
		for b.Loop() {
			sc.residual(vs[0], vs[1])
		}
	})
	b.Run("whole", func(b *testing.B) {
		c := make([]byte, nibbleBytes(dim))
		for b.Loop() {
			quantize4(vs[0], c)
		}
	})
}
