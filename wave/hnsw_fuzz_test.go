package wave

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeed is a small valid snapshot with live, deleted and free slots
// and a few upper layers.
func fuzzSeed(tb testing.TB) []byte {
	vecs := clustered(71, 60, 4, 3)
	h := NewHNSW(4, HNSWOptions{M: 4, EfConstruction: 16, EfSearch: 8, Seed: 1})
	for i, v := range vecs {
		if err := h.Add(uint64(i), v, Meta{Kind: KindEdge, Namespace: uint32(i % 3), Type: uint8(i), Time: int64(i), End: int64(i + 3)}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < 60; i += 5 {
		h.Remove(uint64(i))
	}
	h.Cleanup()
	h.Remove(1)
	h.Remove(2)
	var b bytes.Buffer
	if _, err := h.WriteTo(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func FuzzReadHNSW(f *testing.F) {
	seed := fuzzSeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:8])
	f.Add([]byte{})
	var empty bytes.Buffer
	if _, err := NewHNSW(2, HNSWOptions{}).WriteTo(&empty); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHNSW(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever loads must search, take writes and round-trip.
		q := make([]float32, h.Dim())
		q[0] = 1
		h.Search(q, 5, nil)
		h.Search(q, 5, &Filter{Types: []uint8{3}})
		if err := h.Add(1<<50, q, Meta{}); err != nil {
			t.Fatal(err)
		}
		h.Cleanup()
		var out bytes.Buffer
		if _, err := h.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadHNSW(&out); err != nil {
			t.Fatalf("rewritten snapshot does not load: %v", err)
		}
	})
}
