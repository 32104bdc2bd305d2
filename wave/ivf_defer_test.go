package wave

import (
	"slices"
	"testing"
)

// countingAllow wraps allow, counting its calls and true answers.
func countingAllow(allow func(uint64) bool, asked, allowed *int) func(uint64) bool {
	return func(id uint64) bool {
		*asked++
		ok := allow(id)
		if ok {
			*allowed++
		}
		return ok
	}
}

// TestIVFDefersAsksWhenAllowAdmitsMost: under an Allow that admits 95%
// of the items, a search defers its asks once the first 32 say so. It
// then asks Allow less than half as often as a search asking as it goes
// (only about candidates that rank once rescored), never
// returns an item Allow refuses, and finds as many of the exact top 10.
// Under an Allow that admits half, it keeps asking as it goes: the same
// questions and hits as a search that may not defer.
func TestIVFDefersAsksWhenAllowAdmitsMost(t *testing.T) {
	x, flat := ivfFixture(t)
	for _, tc := range []struct {
		name   string
		allow  func(uint64) bool
		defers bool
	}{
		{"admits 95%", func(id uint64) bool { return id%20 != 3 }, true},
		{"admits half", func(id uint64) bool { return id%2 == 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deferredAsks, eagerAsks, allowed int
			var deferredStats, eagerStats SearchStats
			found := map[bool]int{}
			total := 0
			for _, q := range fix.queries {
				want := flat.Search(q, 10, &Filter{Allow: tc.allow})
				total += len(want)
				for _, deferAsks := range []bool{true, false} {
					asks, st := &eagerAsks, &eagerStats
					if deferAsks {
						asks, st = &deferredAsks, &deferredStats
					}
					f := &Filter{Allow: countingAllow(tc.allow, asks, &allowed), Stats: st}
					hits, short := x.searchAsking(q, 10, f, nil, x.NProbe(), 0, st, deferAsks)
					if short {
						t.Fatalf("a search deferring its asks came up short under an Allow that admits %s", tc.name)
					}
					checkHits(t, hits, 10, &Filter{Allow: tc.allow}, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < fixN })
					for _, h := range hits {
						if slices.ContainsFunc(want, func(w Hit) bool { return w.ID == h.ID }) {
							found[deferAsks]++
						}
					}
				}
			}
			if deferredStats.Asked != deferredAsks || eagerStats.Asked != eagerAsks {
				t.Fatalf("stats say %d and %d asks, Allow was asked %d and %d times", deferredStats.Asked, eagerStats.Asked, deferredAsks, eagerAsks)
			}
			rDeferred, rEager := float64(found[true])/float64(total), float64(found[false])/float64(total)
			t.Logf("asks %d deferring, %d asking as it goes; recall@10 %.4f and %.4f", deferredAsks, eagerAsks, rDeferred, rEager)
			if rDeferred < 0.95 || rDeferred < rEager-0.005 {
				t.Errorf("recall@10 %.4f deferring asks, %.4f asking as it goes", rDeferred, rEager)
			}
			if tc.defers && deferredAsks*2 > eagerAsks {
				t.Errorf("deferring, %d asks against %d: not half as many", deferredAsks, eagerAsks)
			}
			if !tc.defers && (deferredAsks != eagerAsks || found[true] != found[false]) {
				t.Errorf("an Allow that admits half: %d asks and %d found, against %d and %d asking as it goes", deferredAsks, found[true], eagerAsks, found[false])
			}
		})
	}
}

// TestIVFDeferredAsksComeUpShort: an Allow that admits exactly the
// first 32 candidates a search asks about sets it deferring its asks;
// its samples, refused, stop that, but the candidates it deferred
// meanwhile are refused too, and a search for more than 32 comes up
// short. It is made again asking as it goes, and returns what such a
// search returns, each hit admitted.
func TestIVFDeferredAsksComeUpShort(t *testing.T) {
	x, _ := ivfFixture(t)
	const k = 40
	shortSeen := 0
	for qi, q := range fix.queries[:40] {
		// The first ids a search asks about, under an Allow that admits
		// all: its calibration.
		var first []uint64
		f := &Filter{Allow: func(id uint64) bool { first = append(first, id); return true }}
		x.searchAsking(q, k, f, nil, x.NProbe(), 0, nil, true)
		admitted := map[uint64]bool{}
		for _, id := range first[:deferAfter] {
			admitted[id] = true
		}
		allow := func(id uint64) bool { return admitted[id] }
		if _, short := x.searchAsking(q, k, &Filter{Allow: allow}, nil, x.NProbe(), 0, nil, true); short {
			shortSeen++
		}
		want, _ := x.searchAsking(q, k, &Filter{Allow: allow}, nil, x.NProbe(), 0, nil, false)
		got := x.Search(q, k, &Filter{Allow: allow})
		if !slices.Equal(got, want) {
			t.Fatalf("query %d: hits %v, asking as it goes %v", qi, got, want)
		}
		for _, h := range got {
			if !admitted[h.ID] {
				t.Fatalf("query %d: hit %d, which Allow refuses", qi, h.ID)
			}
		}
	}
	if shortSeen == 0 {
		t.Fatal("no search came up short: the case is not tested")
	}
	t.Logf("%d of 40 searches deferring their asks came up short", shortSeen)
}
