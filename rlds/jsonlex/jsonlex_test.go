package jsonlex

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkFloat fails unless Float reads s as strconv.ParseFloat does, bit
// for bit, or both refuse it.
func checkFloat(t *testing.T, s string) {
	t.Helper()
	for _, bits := range []int{32, 64} {
		want, err := strconv.ParseFloat(s, bits)
		l := New([]byte(s))
		got, ok := l.Float(bits)
		ok = ok && l.AtEnd()
		if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("Float(%d) of %q: %v (%v), strconv %v (%v)", bits, s, got, ok, want, err)
		}
	}
}

func TestFloatMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		f := float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-8)))
		checkFloat(t, strconv.FormatFloat(float64(f), 'g', -1, 32))
		checkFloat(t, strconv.FormatFloat(float64(f), 'f', r.IntN(12), 64))
		checkFloat(t, strconv.FormatFloat(float64(f), 'e', r.IntN(16), 64))
		// Random digits: many land near a float32 midpoint.
		checkFloat(t, fmt.Sprintf("%d.%0*de%d", r.IntN(1e6), 1+r.IntN(9), r.IntN(1e9), r.IntN(40)-20))
	}
	for _, s := range []string{
		"0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "0.5", "1e22", "1e23", "1e-22", "1e-23",
		"16777217", "16777217.0", "33554435", "0.000000059604644775390625", // float32 midpoints
		"3.4028235e38", "3.4028236e38", "1e39", "1.17549435e-38", "1e-46",
		"123456789012345", "1234567890123456", "0.1234567890123456789",
		"1E5", "1e+5", "2.5e-3", "9007199254740993", "1e0022", "1e-0400", "0e5", "-0e-5",
		"100000000000000000000000", "0.00000000000000000000000000000001",
	} {
		checkFloat(t, s)
	}
	// Not JSON, though strconv takes some: refused, and nothing read.
	for _, s := range []string{"01", "-01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "1_000", "Inf", "NaN", "00.5"} {
		l := New([]byte(s))
		if f, ok := l.Float(32); ok && l.AtEnd() {
			t.Errorf("Float(32) took %q as %v", s, f)
		}
	}
}

func BenchmarkFloat32(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	lits := make([][]byte, 1024)
	for i := range lits {
		lits[i] = []byte(strconv.FormatFloat(float64(float32(r.NormFloat64()/20)), 'g', -1, 32))
	}
	b.Run("Float", func(b *testing.B) {
		i := 0
		for b.Loop() {
			l := New(lits[i&1023])
			l.Float(32)
			i++
		}
	})
	b.Run("strconv", func(b *testing.B) {
		i := 0
		for b.Loop() {
			strconv.ParseFloat(string(lits[i&1023]), 32)
			i++
		}
	})
}

// TestFloatListsMatchEncodingJSON reads arrays of numbers, written
// compactly and with white space around the elements and commas, with
// Float32s and Float64s: the values encoding/json gives, bit for bit,
// and a malformed array refused.
func TestFloatListsMatchEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		n := r.IntN(40)
		lits := make([]string, n)
		for i := range lits {
			switch r.IntN(4) {
			case 0:
				lits[i] = strconv.Itoa(r.IntN(2000) - 1000)
			case 1:
				lits[i] = strconv.FormatFloat(float64(float32(r.NormFloat64())), 'g', -1, 32)
			case 2:
				lits[i] = strconv.FormatFloat(r.NormFloat64()*1e6, 'e', r.IntN(18), 64)
			default:
				lits[i] = fmt.Sprintf("%d.%0*d", r.IntN(1e6), 1+r.IntN(12), r.IntN(1e9))
			}
		}
		sep, pad := ",", ""
		if r.IntN(2) == 0 {
			sep, pad = " ,\n", " "
		}
		src := "[" + pad + strings.Join(lits, sep+pad) + pad + "]"
		var want32 []float32
		var want64 []float64
		if err := json.Unmarshal([]byte(src), &want32); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(src), &want64); err != nil {
			t.Fatal(err)
		}
		l := New([]byte(src))
		got32, ok := l.Float32s()
		if !ok || !l.AtEnd() || len(got32) != len(want32) {
			t.Fatalf("Float32s of %s: %v (%v)", src, got32, ok)
		}
		for i := range got32 {
			if math.Float32bits(got32[i]) != math.Float32bits(want32[i]) {
				t.Fatalf("Float32s of %s: element %d is %v, encoding/json %v", src, i, got32[i], want32[i])
			}
		}
		l = New([]byte(src))
		got64, ok := l.Float64s()
		if !ok || !l.AtEnd() || !slices.Equal(got64, want64) {
			t.Fatalf("Float64s of %s: %v (%v), encoding/json %v", src, got64, ok, want64)
		}
	}
	for _, s := range []string{"[1,]", "[1 2]", "[,1]", "[1,2", "[01]", "[1,-]", "[1;2]", "[1e]"} {
		l := New([]byte(s))
		if v, ok := l.Float32s(); ok {
			t.Errorf("Float32s took %s as %v", s, v)
		}
	}
}
