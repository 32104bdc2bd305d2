package wave

import (
	"math/rand/v2"
	"testing"
)

// A filter that admits items scattered over the lists, asked about a
// query near none of the clusters: every list scores about the same, so
// the k best admitted items lie in lists far down the probe order. The
// search must probe as far as the scores say they can be (the bench's
// selective queries: roles and a time window at low similarity).
func TestIVFFilteredRecallFarFromEveryList(t *testing.T) {
	const n, dim, k = 40_000, 64, 10
	vecs := clustered(7, n, dim, 200)
	x, flat := buildIVF(t, vecs, IVFOptions{Seed: 3})
	r := rand.New(rand.NewPCG(5, 6))
	var qs [][]float32
	for range 60 {
		q := make([]float32, dim)
		for j := range q {
			q[j] = float32(r.NormFloat64())
		}
		Normalize(q)
		qs = append(qs, q)
	}
	for _, tc := range []struct {
		name string
		f    *Filter
	}{
		{"allow 2%", &Filter{Allow: func(id uint64) bool { return id%50 == 7 }}},
		{"allow 10%", &Filter{Allow: func(id uint64) bool { return id%10 == 3 }}},
		{"type 1%", &Filter{Types: []uint8{2}}},
		{"another type 1%", &Filter{Types: []uint8{57}}},
		{"types 2%", &Filter{Types: []uint8{11, 12}}},
		{"types 5%", &Filter{Types: []uint8{20, 21, 22, 23, 24}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recall(t, x, flat, qs, k, tc.f)
			t.Logf("recall@%d = %.4f (%d lists, nprobe %d)", k, got, x.Lists(), x.NProbe())
			if got < 0.95 {
				t.Errorf("recall@%d = %.4f, want >= 0.95", k, got)
			}
		})
	}
}

// Under a Meta filter that admits few items, the bound's reach is
// sampled from the lists' first blocks too (admitted or not), so it
// grows with the lists scanned as it does unfiltered: the search stops
// on the bound long before it has scored 8 admitted items per heap slot
// (which a 1% type filter reaches only after every list), and keeps its
// recall.
func TestIVFBoundUnderASelectiveMetaFilter(t *testing.T) {
	x, flat := ivfFixture(t)
	for _, f := range []*Filter{{Types: []uint8{7}}, {Types: []uint8{1, 2, 3}}} {
		var st SearchStats
		g := *f
		g.Stats = &st
		r := recall(t, x, flat, fix.queries, 10, &g)
		lists := float64(st.Lists) / float64(len(fix.queries))
		t.Logf("types %v: recall@10 %.4f, %.1f of %d lists per search", f.Types, r, lists, x.Lists())
		if r < 0.95 {
			t.Errorf("types %v: recall@10 = %.4f, want >= 0.95", f.Types, r)
		}
		if lists > float64(x.Lists())/2 {
			t.Errorf("types %v: %.1f of %d lists per search, want at most half", f.Types, lists, x.Lists())
		}
	}
}
