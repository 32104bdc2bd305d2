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
// then asks Allow far less often than a search asking as it goes, never
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
			if tc.defers && deferredAsks*10 > eagerAsks*7 {
				t.Errorf("deferring, %d asks against %d: not 30%% fewer", deferredAsks, eagerAsks)
			}
			if !tc.defers && (deferredAsks != eagerAsks || found[true] != found[false]) {
				t.Errorf("an Allow that admits half: %d asks and %d found, against %d and %d asking as it goes", deferredAsks, found[true], eagerAsks, found[false])
			}
		})
	}
}

// TestIVFDeferredAsksComeUpShort: an Allow that admits the first items
// a search scans and few after them sets a search deferring its asks,
// whose heap then holds fewer than k items it admits; the search is made
// again asking as it goes, and returns what such a search returns.
func TestIVFDeferredAsksComeUpShort(t *testing.T) {
	// Untrained, one list scanned in insertion order: the first 40
	// items fill the heap, each asked about, and Allow admits them.
	x, _ := buildIVF(t, fix.vecs[:600], IVFOptions{Seed: 1})
	if x.Lists() != 1 {
		t.Fatalf("%d lists, want 1 (untrained)", x.Lists())
	}
	allow := func(id uint64) bool { return id < 60 }
	shortSeen := 0
	for qi, q := range fix.queries[:40] {
		var asked, allowed int
		f := &Filter{Allow: countingAllow(allow, &asked, &allowed)}
		if _, short := x.searchAsking(q, 10, f, nil, x.NProbe(), 0, nil, true); short {
			shortSeen++
		}
		want, _ := x.searchAsking(q, 10, &Filter{Allow: allow}, nil, x.NProbe(), 0, nil, false)
		var st SearchStats
		got := x.Search(q, 10, &Filter{Allow: allow, Stats: &st})
		if !slices.Equal(got, want) {
			t.Fatalf("query %d: hits %v, asking as it goes %v", qi, got, want)
		}
		if len(got) != 10 {
			t.Fatalf("query %d: %d hits, want 10 of the 60 admitted", qi, len(got))
		}
		for _, h := range got {
			if h.ID >= 60 {
				t.Fatalf("query %d: hit %d, which Allow refuses", qi, h.ID)
			}
		}
	}
	if shortSeen == 0 {
		t.Fatal("no search came up short: the case is not tested")
	}
	t.Logf("%d of 40 searches deferring their asks came up short", shortSeen)
}
