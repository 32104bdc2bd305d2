package wave

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// ivfFuzzSeed is a small valid trained snapshot with removed items.
func ivfFuzzSeed(tb testing.TB) []byte {
	vecs := clustered(71, 200, 4, 3)
	x := NewIVF(4, IVFOptions{TrainAt: 64, NProbe: 2, Seed: 1})
	for i, v := range vecs {
		if err := x.Add(uint64(i), v, Meta{Kind: KindEdge, Namespace: uint32(i % 3), Type: uint8(i), Time: int64(i), End: int64(i + 3)}); err != nil {
			tb.Fatal(err)
		}
	}
	x.WaitRebuild()
	for i := 0; i < 200; i += 5 {
		x.Remove(uint64(i))
	}
	return snapshotOf(tb, x)
}

func FuzzReadIVF(f *testing.F) {
	seed := ivfFuzzSeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:8])
	f.Add([]byte{})
	var empty bytes.Buffer
	if _, err := NewIVF(2, IVFOptions{}).WriteTo(&empty); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ReadIVF(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever loads must search, take writes and round-trip.
		q := make([]float32, x.Dim())
		q[0] = 1
		x.Search(q, 5, nil)
		x.Search(q, 5, &Filter{Types: []uint8{3}, From: 2})
		if err := x.Add(1<<50, q, Meta{}); err != nil {
			t.Fatal(err)
		}
		x.Remove(1 << 50)
		x.Cleanup()
		var out bytes.Buffer
		if _, err := x.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadIVF(&out); err != nil {
			t.Fatalf("rewritten snapshot does not load: %v", err)
		}
	})
}

// splitsFuzzSeed is a small valid splits snapshot of an IVF split both
// ways, its catch-alls' index trained.
func splitsFuzzSeed(tb testing.TB) (*IVF, []byte) {
	vecs := clustered(73, 400, 4, 3)
	x := NewIVF(4, IVFOptions{TrainAt: 32, NProbe: 2, Seed: 1})
	x.SplitByAgent()
	x.SplitByTime()
	for i, v := range vecs {
		m := Meta{Kind: KindEdge, Namespace: 1, Type: uint8(i % 5), Time: int64(i) * 1e11, End: int64(i)*1e11 + 1e9, Agent: uint32(i%4) * 7}
		if err := x.Add(uint64(i), v, m); err != nil {
			tb.Fatal(err)
		}
	}
	x.WaitRebuild()
	for i := 0; i < 400; i += 9 {
		x.Remove(uint64(i))
	}
	var b bytes.Buffer
	if _, err := x.WriteSplitsTo(&b); err != nil {
		tb.Fatal(err)
	}
	return x, b.Bytes()
}

// FuzzReadSplits: a damaged splits snapshot gives ErrCorrupt (or, of
// another dimension, a plain error), never a panic; what loads is
// checked against the index and serves searches once filled.
func FuzzReadSplits(f *testing.F) {
	x, seed := splitsFuzzSeed(f)
	snap := snapshotOf(f, x)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:12])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := readSplits(bytes.NewReader(b), 4); err != nil {
			if !errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), "dimensions") {
				t.Fatalf("error not marked ErrCorrupt: %v", err)
			}
			return
		}
		y, err := ReadIVF(bytes.NewReader(snap))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = y.ExpectSplits().Load(context.Background(), bytes.NewReader(b), true, true)
		q := []float32{1, 0, 0, 0}
		y.Search(q, 5, &Filter{Agent: 7})
		y.Search(q, 5, &Filter{From: 1e12, To: 2e12})
	})
}
