package wave

import (
	"math/rand/v2"
	"testing"
)

// TestIDTableMatchesAMap runs the same puts and removes on an idTable
// and a map: ids dense from 1 (the store's seqs), ids far past them
// (kept in the map part until the slice grows over them) and removals.
func TestIDTableMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var tab idTable
	want := map[uint64]ivfLoc{}
	next := uint64(1)
	for i := range 200_000 {
		var id uint64
		switch r := rng.IntN(10); {
		case r < 6: // the next seq
			id = next
			next++
		case r < 8: // an id ahead of the seqs: the map until the slice reaches it
			id = next + uint64(rng.IntN(50_000))
		case r < 9: // far away: always the map
			id = 1<<40 + uint64(rng.IntN(1000))
		default: // one seen before
			id = uint64(rng.IntN(int(next)))
		}
		if rng.IntN(4) == 0 {
			_, had := want[id]
			delete(want, id)
			if got := tab.remove(id); got != had {
				t.Fatalf("op %d: remove(%d) = %v, want %v", i, id, got, had)
			}
		} else {
			loc := ivfLoc{uint32(rng.IntN(64)), uint32(i)}
			_, had := want[id]
			want[id] = loc
			if added := tab.put(id, loc); added == had {
				t.Fatalf("op %d: put(%d) added = %v, want %v", i, id, added, !had)
			}
		}
		if tab.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", i, tab.len(), len(want))
		}
	}
	for id, loc := range want {
		if got, ok := tab.get(id); !ok || got != loc {
			t.Fatalf("get(%d) = %v %v, want %v", id, got, ok, loc)
		}
	}
	for id := range uint64(next + 60_000) {
		if _, ok := want[id]; !ok && tab.has(id) {
			t.Fatalf("has(%d) for an id not put or removed", id)
		}
	}
	if len(tab.dense) == 0 || len(tab.sparse) == 0 {
		t.Fatalf("the test exercised only one part: %d dense, %d sparse", len(tab.dense), len(tab.sparse))
	}
}
