package mplex

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// Object writes a fixmap under 16 fields and a map32 from 16 on, and
// both read back with every field.
func TestObjectHeadersAndReadBack(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 300} {
		w := Writer{}
		w.Object(func() {
			for i := range n {
				w.Key(fmt.Sprintf("k%d", i))
				w.Number(float64(i) + 0.5)
			}
		})
		if sz, _, err := msgp.ReadMapHeaderBytes(w.B); err != nil || int(sz) != n {
			t.Fatalf("%d fields: header says %d (%v)", n, sz, err)
		}
		if n < 16 && w.B[0] != 0x80|byte(n) || n >= 16 && w.B[0] != 0xdf {
			t.Fatalf("%d fields: header byte %#x", n, w.B[0])
		}
		r := Reader{B: w.B}
		got := 0
		err := r.Object(func(key string) error {
			v, err := r.Number()
			if key != fmt.Sprintf("k%d", got) || v != float64(got)+0.5 {
				return fmt.Errorf("field %d is %s=%v", got, key, v)
			}
			got++
			return err
		})
		if err != nil || got != n || r.Done() != nil {
			t.Fatalf("%d fields: read %d, %v, rest %d bytes", n, got, err, len(r.B))
		}
	}
}

// Number writes the shortest exact form, and every form reads back.
func TestNumbersRoundTrip(t *testing.T) {
	for _, v := range []float64{0, 1, -1, 127, 128, -32, -33, -129, 255, 65536, -1 << 40, 1 << 52, 0.5, -0.25, 1e-3, math.Pi, 1e300, math.MaxFloat32} {
		w := Writer{}
		w.Number(v)
		r := Reader{B: w.B}
		got, err := r.Number()
		if err != nil || got != v || len(r.B) != 0 {
			t.Fatalf("%v reads back as %v (%v)", v, got, err)
		}
	}
	// A vector of mixed forms, and a short one.
	b := msgp.AppendArrayHeader(nil, 5)
	b = msgp.AppendInt(b, 3)
	b = msgp.AppendInt(b, -3)
	b = msgp.AppendFloat32(b, 0.25)
	b = msgp.AppendFloat64(b, 0.5)
	b = msgp.AppendUint64(b, 1<<20)
	r := Reader{B: b}
	vec, err := r.Vector()
	if err != nil || fmt.Sprint(vec) != "[3 -3 0.25 0.5 1.048576e+06]" {
		t.Fatalf("vector %v, %v", vec, err)
	}
	r = Reader{B: b[:len(b)-4]}
	if _, err := r.Vector(); err == nil {
		t.Fatal("a cut vector read")
	}
}

func TestStringsAndTimes(t *testing.T) {
	b := msgp.AppendString(nil, "a\xffb")
	r := Reader{B: b}
	if s, err := r.Str(); err != nil || s != "a\uFFFDb" {
		t.Fatalf("invalid UTF-8 reads as %q (%v)", s, err)
	}
	at := time.Date(2026, 11, 29, 1, 2, 3, 4, time.UTC)
	w := Writer{}
	w.Time(at)
	w.B = msgp.AppendString(w.B, "2026-11-29T02:02:03.000000004+01:00")
	w.B = msgp.AppendNil(w.B)
	r = Reader{B: w.B}
	for i, want := range []time.Time{at, at, {}} {
		got, err := r.Time()
		if err != nil || !got.Equal(want) {
			t.Fatalf("time %d: %v (%v), want %v", i, got, err, want)
		}
	}
	w = Writer{}
	w.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	r = Reader{B: w.B}
	if _, err := r.Time(); err == nil {
		t.Fatal("the year 10000 read")
	}
}

// A key given twice is refused wherever it repeats, past the first 16
// keys too.
func TestObjectRefusesARepeatedKey(t *testing.T) {
	for _, n := range []int{2, 16, 17, 18, 40} {
		for _, at := range []int{1, n - 1} {
			b := msgp.AppendMapHeader(nil, uint32(n))
			for i := range n {
				k := fmt.Sprintf("k%d", i)
				if i == at {
					k = "k0"
				}
				b = msgp.AppendInt(msgp.AppendString(b, k), i)
			}
			r := Reader{B: b}
			err := r.Object(func(string) error { _, err := r.Int(); return err })
			if err == nil || err.Error() != "k0: given twice" {
				t.Errorf("%d keys, k0 again at %d: %v", n, at, err)
			}
		}
		// And a repeat between two keys past the 16th.
		if n > 17 {
			b := msgp.AppendMapHeader(nil, uint32(n))
			for i := range n {
				k := fmt.Sprintf("k%d", i)
				if i == n-1 {
					k = "k16"
				}
				b = msgp.AppendInt(msgp.AppendString(b, k), i)
			}
			r := Reader{B: b}
			if err := r.Object(func(string) error { _, err := r.Int(); return err }); err == nil || err.Error() != "k16: given twice" {
				t.Errorf("%d keys, k16 again last: %v", n, err)
			}
		}
	}
}

// Opt and OptInto leave the pointer nil for a nil and read anything
// else into a new value; a read's error comes back.
func TestOptionalValues(t *testing.T) {
	b := msgp.AppendNil(nil)
	b = msgp.AppendInt(b, 7)
	b = msgp.AppendNil(b)
	b = msgp.AppendMapHeader(b, 1)
	b = msgp.AppendString(b, "x")
	b = msgp.AppendInt(b, 3)
	b = msgp.AppendString(b, "not a number")
	r := Reader{B: b}
	var none, seven, bad *int
	type obj struct{ X int }
	var nothing, one *obj
	readObj := func(o *obj) error {
		return r.Object(func(key string) (err error) {
			o.X, err = r.Int()
			return err
		})
	}
	if err := Opt(&r, &none, r.Int); err != nil || none != nil {
		t.Fatalf("nil: %v, %v", none, err)
	}
	if err := Opt(&r, &seven, r.Int); err != nil || seven == nil || *seven != 7 {
		t.Fatalf("7: %v, %v", seven, err)
	}
	if err := OptInto(&r, &nothing, readObj); err != nil || nothing != nil {
		t.Fatalf("nil object: %v, %v", nothing, err)
	}
	if err := OptInto(&r, &one, readObj); err != nil || one == nil || one.X != 3 {
		t.Fatalf("object: %v, %v", one, err)
	}
	if err := Opt(&r, &bad, r.Int); err == nil {
		t.Fatal("a string read as an int: no error")
	}
}
