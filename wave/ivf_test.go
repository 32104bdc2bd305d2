package wave

import (
	"sync"
	"testing"
)

var ivfFix struct {
	once sync.Once
	x    *IVF
}

// ivfFixture is an IVF over the shared fixture's vectors (trained: the
// fixture is 5x TrainAt).
func ivfFixture(t testing.TB) (*IVF, *Flat) {
	t.Helper()
	_, flat := fixture(t)
	ivfFix.once.Do(func() {
		x := NewIVF(fixDim, IVFOptions{Seed: 1})
		for i, v := range fix.vecs {
			if err := x.Add(uint64(i), v, fixMeta(i)); err != nil {
				panic(err)
			}
		}
		x.WaitRebuild()
		ivfFix.x = x
	})
	return ivfFix.x, flat
}

func TestIVFRecall(t *testing.T) {
	x, flat := ivfFixture(t)
	if x.Len() != fixN || x.Dim() != fixDim {
		t.Fatalf("Len, Dim = %d, %d", x.Len(), x.Dim())
	}
	if x.Lists() < ivfMinLists {
		t.Fatalf("%d lists after %d inserts: not trained", x.Lists(), fixN)
	}
	for _, k := range []int{1, 10, 50} {
		r := recall(t, x, flat, fix.queries, k, nil)
		t.Logf("recall@%d = %.4f (%d lists, nprobe %d)", k, r, x.Lists(), x.NProbe())
		if r < 0.95 {
			t.Errorf("recall@%d = %.4f, want >= 0.95", k, r)
		}
	}
	for _, q := range fix.queries[:20] {
		checkHits(t, x.Search(q, 10, nil), 10, nil, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < fixN })
	}
}

func TestIVFFilteredRecall(t *testing.T) {
	x, flat := ivfFixture(t)
	testFilteredRecall(t, x, flat)
}
