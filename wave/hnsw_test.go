package wave

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"testing"
)

// The shared fixture: 20k clustered 64-d vectors built sequentially with
// a fixed seed, so it is the same graph on every run. Item i has
// Type i%100, Namespace i%2+1, Kind i%3+1 and Time and End i.
//
// With 20 isotropic clusters (1000 points each) the neighbourhoods are
// hard enough that recall@10 is 0.84 at ef 16 and 0.96 at ef 32, the
// same as hnswlib with the same M and efConstruction.
const (
	fixN       = 20_000
	fixDim     = 64
	fixQueries = 200
	fixCluster = 20
)

var fix struct {
	once    sync.Once
	vecs    [][]float32
	queries [][]float32
	h       *HNSW
	flat    *Flat
}

func fixMeta(i int) Meta {
	return Meta{Kind: Kind(i%3 + 1), Namespace: uint32(i%2 + 1), Type: uint8(i % 100), Time: int64(i), End: int64(i)}
}

func fixture(t testing.TB) (*HNSW, *Flat) {
	t.Helper()
	fix.once.Do(func() {
		all := clustered(42, fixN+fixQueries, fixDim, fixCluster)
		fix.vecs, fix.queries = all[:fixN], all[fixN:]
		fix.h = NewHNSW(fixDim, HNSWOptions{Seed: 1})
		fix.flat = NewFlat(fixDim)
		for i, v := range fix.vecs {
			if err := fix.h.Add(uint64(i), v, fixMeta(i)); err != nil {
				panic(err)
			}
			if err := fix.flat.Add(uint64(i), v, fixMeta(i)); err != nil {
				panic(err)
			}
		}
	})
	return fix.h, fix.flat
}

// recall returns the mean overlap of got with want over the queries,
// as a fraction of the true result size.
func recall(t testing.TB, ix, truth Index, qs [][]float32, k int, f *Filter) float64 {
	t.Helper()
	hit, total := 0, 0
	for _, q := range qs {
		got := ix.Search(q, k, f)
		want := truth.Search(q, k, f)
		for _, g := range got {
			if slices.ContainsFunc(want, func(w Hit) bool { return w.ID == g.ID }) {
				hit++
			}
		}
		total += len(want)
	}
	if total == 0 {
		return 1
	}
	return float64(hit) / float64(total)
}

// checkHits fails if hits are not sorted, repeat an id, or break f.
func checkHits(t testing.TB, hits []Hit, k int, f *Filter, meta func(uint64) (Meta, bool)) {
	t.Helper()
	if len(hits) > k {
		t.Fatalf("%d hits for k=%d", len(hits), k)
	}
	seen := map[uint64]bool{}
	for i, h := range hits {
		if seen[h.ID] {
			t.Fatalf("id %d returned twice", h.ID)
		}
		seen[h.ID] = true
		if i > 0 && h.Score > hits[i-1].Score {
			t.Fatalf("hits not sorted: %+v", hits)
		}
		m, ok := meta(h.ID)
		if !ok {
			t.Fatalf("id %d is not live", h.ID)
		}
		if !f.Admits(h.ID, m) {
			t.Fatalf("id %d (%+v) does not pass the filter", h.ID, m)
		}
	}
}

func TestHNSWRecall(t *testing.T) {
	h, flat := fixture(t)
	if h.Len() != fixN || h.Dim() != fixDim {
		t.Fatalf("Len, Dim = %d, %d", h.Len(), h.Dim())
	}
	for _, tc := range []struct {
		k    int
		want float64
	}{{1, 0.95}, {10, 0.95}, {50, 0.9}} { // k near ef costs recall, as in hnswlib
		r := recall(t, h, flat, fix.queries, tc.k, nil)
		t.Logf("recall@%d = %.4f (ef %d)", tc.k, r, h.EfSearch())
		if r < tc.want {
			t.Errorf("recall@%d = %.4f, want >= %.2f", tc.k, r, tc.want)
		}
	}
	for _, q := range fix.queries[:20] {
		checkHits(t, h.Search(q, 10, nil), 10, nil, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < fixN })
	}
}

// filteredCases are the filters the recall tests search under, on the
// fixture's metadata (fixMeta).
var filteredCases = []struct {
	name string
	f    *Filter
}{
	{"types 1%", &Filter{Types: []uint8{7}}},
	{"allow 1%", &Filter{Allow: func(id uint64) bool { return id%100 == 7 }}},
	{"allow 0.5% clustered ids", &Filter{Allow: func(id uint64) bool { return id < fixN/200 }}},
	{"types 3%", &Filter{Types: []uint8{1, 2, 3}}},
	{"allow 10%", &Filter{Allow: func(id uint64) bool { return id%10 == 3 }}},
	{"namespace 50%", &Filter{Namespace: 2}},
	{"kinds 67%", &Filter{Kinds: []Kind{KindNode, KindEpisode}}},
	{"time 0.5%", &Filter{From: 12000, To: 12099}},
	{"time 5%", &Filter{From: 5000, To: 5999}},
	{"time 30%", &Filter{From: 1000, To: 6999}},
	{"types and allow", &Filter{Types: []uint8{10, 20, 30, 40, 50}, Allow: func(id uint64) bool { return id%3 != 0 }}},
	{"namespace and kinds 17%", &Filter{Namespace: 1, Kinds: []Kind{KindEdge}}},
	{"none", &Filter{Namespace: 3}},
}

// testFilteredRecall checks recall@10 >= 0.95 of ix against flat under
// each of filteredCases, and that its hits pass the filter.
func testFilteredRecall(t *testing.T, ix Index, flat *Flat) {
	for _, tc := range filteredCases {
		t.Run(tc.name, func(t *testing.T) {
			r := recall(t, ix, flat, fix.queries, 10, tc.f)
			t.Logf("recall@10 = %.4f", r)
			if r < 0.95 {
				t.Errorf("recall@10 = %.4f, want >= 0.95", r)
			}
			for _, q := range fix.queries[:20] {
				checkHits(t, ix.Search(q, 10, tc.f), 10, tc.f, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < fixN })
			}
		})
	}
}

func TestHNSWFilteredRecall(t *testing.T) {
	h, flat := fixture(t)
	testFilteredRecall(t, h, flat)
}

// build returns an HNSW and a Flat holding vecs[i] under id i.
func build(t testing.TB, vecs [][]float32, o HNSWOptions) (*HNSW, *Flat) {
	t.Helper()
	h := NewHNSW(len(vecs[0]), o)
	flat := NewFlat(len(vecs[0]))
	for i, v := range vecs {
		if err := h.Add(uint64(i), v, fixMeta(i)); err != nil {
			t.Fatal(err)
		}
		if err := flat.Add(uint64(i), v, fixMeta(i)); err != nil {
			t.Fatal(err)
		}
	}
	return h, flat
}

func TestHNSWDelete(t *testing.T) {
	const n, dim = 8000, 64
	all := clustered(11, n+100+n/10, dim, fixCluster)
	vecs, qs, fresh := all[:n], all[n:n+100], all[n+100:]
	h, flat := build(t, vecs, HNSWOptions{Seed: 2})
	live := map[uint64]bool{}
	for i := range n {
		live[uint64(i)] = true
	}
	meta := func(id uint64) (Meta, bool) { return fixMeta(int(id)), live[id] }
	check := func(stage string) {
		t.Helper()
		if h.Len() != len(live) || flat.Len() != len(live) {
			t.Fatalf("%s: Len = %d/%d, want %d", stage, h.Len(), flat.Len(), len(live))
		}
		for _, f := range []*Filter{nil, {Types: []uint8{5}}, {Allow: func(id uint64) bool { return id%5 == 0 }}} {
			for _, q := range qs {
				checkHits(t, h.Search(q, 10, f), 10, f, meta)
			}
			r := recall(t, h, flat, qs, 10, f)
			t.Logf("%s: recall@10 = %.4f", stage, r)
			if r < 0.95 {
				t.Errorf("%s: recall@10 = %.4f, want >= 0.95", stage, r)
			}
		}
	}

	// Delete 10%, including whatever the top nodes are, and the nearest
	// neighbours of the first queries.
	del := []uint64{uint64(topSlot(h.top.Load()))}
	for _, q := range qs[:10] {
		for _, hit := range h.Search(q, 3, nil) {
			del = append(del, hit.ID)
		}
	}
	for i := 0; len(del) < n/10; i += 7 {
		del = append(del, uint64(i))
	}
	removed := 0
	for _, id := range del {
		if live[id] {
			removed++
			if !h.Remove(id) || !flat.Remove(id) {
				t.Fatalf("Remove(%d) = false", id)
			}
			delete(live, id)
		} else if h.Remove(id) {
			t.Fatalf("Remove(%d) of a removed id = true", id)
		}
	}
	if h.Tombstones() != removed {
		t.Fatalf("Tombstones = %d, want %d", h.Tombstones(), removed)
	}
	check("tombstoned")

	if got := h.Cleanup(); got != removed {
		t.Fatalf("Cleanup = %d, want %d", got, removed)
	}
	if h.Tombstones() != 0 || h.Cleanup() != 0 {
		t.Fatal("tombstones left after Cleanup")
	}
	check("cleaned")

	// Re-adding reuses the freed slots.
	slots := h.nslots.Load()
	for j, id := range del {
		if !live[id] {
			v := fresh[j]
			if err := h.Add(id, v, fixMeta(int(id))); err != nil {
				t.Fatal(err)
			}
			if err := flat.Add(id, v, fixMeta(int(id))); err != nil {
				t.Fatal(err)
			}
			live[id] = true
		}
	}
	if h.nslots.Load() != slots {
		t.Fatalf("slots grew from %d to %d: freed slots not reused", slots, h.nslots.Load())
	}
	check("refilled")
}

func TestHNSWRemoveAll(t *testing.T) {
	vecs := clustered(5, 300, 8, 4)
	h, _ := build(t, vecs, HNSWOptions{Seed: 3})
	for i := range vecs {
		if !h.Remove(uint64(i)) {
			t.Fatalf("Remove(%d) = false", i)
		}
	}
	if got := h.Search(vecs[0], 5, nil); got != nil {
		t.Fatalf("search of emptied index: %+v", got)
	}
	if got := h.Search(vecs[0], 5, &Filter{Namespace: 1}); got != nil {
		t.Fatalf("filtered search of emptied index: %+v", got)
	}
	if got := h.Cleanup(); got != len(vecs) {
		t.Fatalf("Cleanup = %d, want %d", got, len(vecs))
	}
	if h.top.Load() != 0 || h.Len() != 0 {
		t.Fatalf("top %x, Len %d after cleaning everything", h.top.Load(), h.Len())
	}
	for i, v := range vecs[:50] {
		if err := h.Add(uint64(1000+i), v, Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Search(vecs[3], 1, nil); len(got) != 1 || got[0].ID != 1003 {
		t.Fatalf("after refill: %+v", got)
	}
}

func TestHNSWReplace(t *testing.T) {
	vecs := clustered(21, 2000, 32, 20)
	h, _ := build(t, vecs, HNSWOptions{Seed: 4})
	const id = 17
	old, repl := vecs[id], vecs[1500]
	if err := h.Add(id, repl, Meta{Type: 200, Namespace: 9}); err != nil {
		t.Fatal(err)
	}
	if h.Len() != 2000 || h.Tombstones() != 1 {
		t.Fatalf("Len %d Tombstones %d after replace, want 2000 and 1", h.Len(), h.Tombstones())
	}
	// The new vector is found under id (tied with item 1500).
	got := h.Search(repl, 2, nil)
	if !slices.ContainsFunc(got, func(x Hit) bool { return x.ID == id && math.Abs(float64(x.Score)-1) < 1e-5 }) {
		t.Fatalf("replacement not found: %+v", got)
	}
	// The old vector no longer scores 1 under id.
	for _, x := range h.Search(old, 10, nil) {
		if x.ID == id && x.Score > 0.9999 {
			t.Fatalf("old vector still returned: %+v", x)
		}
	}
	// The meta moved too.
	if got := h.Search(repl, 5, &Filter{Types: []uint8{200}}); len(got) != 1 || got[0].ID != id {
		t.Fatalf("new meta: %+v", got)
	}
	if got := h.Search(old, 5, &Filter{Types: []uint8{id % 100}, Namespace: 2}); slices.ContainsFunc(got, func(x Hit) bool { return x.ID == id }) {
		t.Fatalf("old meta still matches: %+v", got)
	}
	if h.Cleanup() != 1 || h.Len() != 2000 {
		t.Fatal("Cleanup after replace")
	}
	if got := h.Search(repl, 5, &Filter{Namespace: 9}); len(got) != 1 || got[0].ID != id {
		t.Fatalf("after cleanup: %+v", got)
	}
}

func TestHNSWAddErrors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	tests := []struct {
		name string
		vec  []float32
		want error
	}{
		{"ok", []float32{1, 2, 3}, nil},
		{"zero", []float32{0, 0, 0}, nil},
		{"short", []float32{1, 2}, ErrDimension},
		{"nil", nil, ErrDimension},
		{"nan", []float32{1, nan, 3}, ErrNonFinite},
		{"inf", []float32{inf, 2, 3}, ErrNonFinite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHNSW(3, DefaultHNSWOptions())
			if err := h.Add(1, tc.vec, Meta{}); !errors.Is(err, tc.want) {
				t.Fatalf("Add = %v, want %v", err, tc.want)
			}
			want := 0
			if tc.want == nil {
				want = 1
			}
			if h.Len() != want {
				t.Fatalf("Len = %d, want %d", h.Len(), want)
			}
		})
	}
	h := NewHNSW(3, HNSWOptions{})
	if h.Search([]float32{1, 0, 0}, 3, nil) != nil {
		t.Fatal("empty index returned hits")
	}
	if o := h.Options(); o != DefaultHNSWOptions() {
		t.Fatalf("zero options became %+v, want %+v", o, DefaultHNSWOptions())
	}
	if err := h.Add(1, []float32{1, 0, 0}, Meta{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{0, -1} {
		if h.Search([]float32{1, 0, 0}, k, nil) != nil {
			t.Fatalf("k=%d returned hits", k)
		}
	}
	if h.Search([]float32{1, 0}, 1, nil) != nil {
		t.Fatal("wrong-dimension query returned hits")
	}
}

func snapshot(t testing.TB, h *HNSW) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := h.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo = %d, wrote %d", n, b.Len())
	}
	return b.Bytes()
}

func TestHNSWSnapshotRoundTrip(t *testing.T) {
	h, _ := fixture(t)
	// A second index with tombstones and free slots too.
	vecs := clustered(31, 3000, 16, 10)
	h2, _ := build(t, vecs, HNSWOptions{M: 8, EfConstruction: 100, EfSearch: 40, Seed: 5})
	for i := 0; i < 3000; i += 9 {
		h2.Remove(uint64(i))
	}
	h2.Cleanup()
	for i := 1; i < 3000; i += 13 {
		h2.Remove(uint64(i))
	}
	for i := 0; i < 100; i++ {
		if err := h2.Add(uint64(10_000+i), vecs[i], Meta{Type: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		h    *HNSW
		qs   [][]float32
	}{
		{"fixture", h, fix.queries},
		{"tombstones and free slots", h2, vecs[:100]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := snapshot(t, tc.h)
			trailer := []byte("next record")
			r := bytes.NewReader(append(slices.Clip(b), trailer...))
			got, err := ReadHNSW(r)
			if err != nil {
				t.Fatal(err)
			}
			if rest, _ := io.ReadAll(r); !bytes.Equal(rest, trailer) {
				t.Fatalf("ReadHNSW consumed past the snapshot: left %q", rest)
			}
			if got.Len() != tc.h.Len() || got.Tombstones() != tc.h.Tombstones() || got.Options() != tc.h.Options() || got.Dim() != tc.h.Dim() {
				t.Fatalf("reloaded Len %d Tombstones %d Options %+v, want %d %d %+v",
					got.Len(), got.Tombstones(), got.Options(), tc.h.Len(), tc.h.Tombstones(), tc.h.Options())
			}
			if b2 := snapshot(t, got); !bytes.Equal(b, b2) {
				t.Fatal("rewritten snapshot differs")
			}
			filters := []*Filter{nil, {Types: []uint8{1}}, {Namespace: 2}, {Allow: func(id uint64) bool { return id%4 == 1 }}}
			for _, f := range filters {
				for _, q := range tc.qs {
					a, b := tc.h.Search(q, 10, f), got.Search(q, 10, f)
					if !slices.Equal(a, b) {
						t.Fatalf("results differ after reload:\n%+v\n%+v", a, b)
					}
				}
			}
			// The reloaded index keeps working.
			if err := got.Add(1<<40, tc.qs[0], Meta{}); err != nil {
				t.Fatal(err)
			}
			if hits := got.Search(tc.qs[0], 1, nil); len(hits) != 1 || hits[0].Score < 0.9999 {
				t.Fatalf("search after add to reloaded index: %+v", hits)
			}
		})
	}
}

func TestHNSWSnapshotCorrupt(t *testing.T) {
	vecs := clustered(41, 500, 8, 5)
	h, _ := build(t, vecs, HNSWOptions{Seed: 6})
	h.Remove(3)
	good := snapshot(t, h)
	if _, err := ReadHNSW(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	mutate := func(pos int, v byte) []byte {
		b := slices.Clone(good)
		b[pos] ^= v
		return b
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"magic", mutate(0, 1)},
		{"version", mutate(6, 3)},
		{"flags", mutate(7, 1)},
		{"dimension", mutate(8, 0x80)},
		{"slot count", mutate(32, 1)},
		{"state", mutate(44, 7)},
		{"vector", mutate(len(good)/2, 0x10)},
		{"link", mutate(len(good)-20, 0x01)},
		{"crc", mutate(len(good)-1, 0x01)},
		{"huge dimension", func() []byte { b := slices.Clone(good); b[11] = 0x7f; return b }()},
	}
	for _, cut := range []int{1, 7, 8, 20, 40, 44, 300, len(good) / 3, len(good) - 5, len(good) - 1} {
		tests = append(tests, struct {
			name string
			b    []byte
		}{fmt.Sprintf("truncated at %d", cut), good[:cut]})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadHNSW(bytes.NewReader(tc.b))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadHNSW = %v, %v; want ErrCorrupt", got, err)
			}
		})
	}
}

func TestHNSWDeterministic(t *testing.T) {
	vecs := clustered(51, 1500, 16, 10)
	a, _ := build(t, vecs, HNSWOptions{Seed: 9})
	b, _ := build(t, vecs, HNSWOptions{Seed: 9})
	if !bytes.Equal(snapshot(t, a), snapshot(t, b)) {
		t.Fatal("same data and seed built different graphs")
	}
}

func TestHNSWConcurrent(t *testing.T) {
	const dim, n = 16, 1200
	vecs := clustered(61, n, dim, 10)
	h := NewHNSW(dim, HNSWOptions{M: 8, EfConstruction: 64, Seed: 7})
	for i := range 200 {
		if err := h.Add(uint64(i), vecs[i], fixMeta(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Writer w owns the ids with parity w, so each id sees its
	// operations in a fixed order and the final state is known.
	ops := func(i int, add func(id uint64, v int), remove func(id uint64)) {
		add(uint64(i), i)
		switch i % 7 {
		case 0:
			add(uint64(i-100), i) // replace
		case 3:
			remove(uint64(i - 50))
		}
	}
	var workers, cleaner sync.WaitGroup
	for w := range 2 {
		workers.Go(func() {
			for i := 200 + w; i < n; i += 2 {
				ops(i, func(id uint64, v int) {
					if err := h.Add(id, vecs[v], fixMeta(int(id))); err != nil {
						t.Error(err)
					}
				}, func(id uint64) { h.Remove(id) })
			}
		})
	}
	for r := range 2 {
		workers.Go(func() {
			f := &Filter{Types: []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
			for i := range 300 {
				q := vecs[(i*13+r)%n]
				checkHits(t, h.Search(q, 10, nil), 10, nil, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < n })
				checkHits(t, h.Search(q, 5, f), 5, f, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < n })
			}
		})
	}
	stop := make(chan struct{})
	cleaner.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.Cleanup()
			if _, err := h.WriteTo(io.Discard); err != nil {
				t.Error(err)
			}
		}
	})
	workers.Wait()
	close(stop)
	cleaner.Wait()

	final := map[uint64]int{}
	for i := range 200 {
		final[uint64(i)] = i
	}
	for i := 200; i < n; i++ {
		ops(i, func(id uint64, v int) { final[id] = v }, func(id uint64) { delete(final, id) })
	}
	flat := NewFlat(dim)
	for id, v := range final {
		if err := flat.Add(id, vecs[v], fixMeta(int(id))); err != nil {
			t.Fatal(err)
		}
	}
	if h.Len() != len(final) {
		t.Fatalf("Len = %d, want %d", h.Len(), len(final))
	}
	h.Cleanup()
	if h.Tombstones() != 0 {
		t.Fatalf("Tombstones = %d after Cleanup", h.Tombstones())
	}
	for _, q := range vecs[:50] {
		checkHits(t, h.Search(q, 10, nil), 10, nil, func(id uint64) (Meta, bool) {
			_, ok := final[id]
			return fixMeta(int(id)), ok
		})
	}
	if r := recall(t, h, flat, vecs[:100], 10, nil); r < 0.9 {
		t.Errorf("recall@10 after concurrent build = %.4f, want >= 0.9", r)
	}
}
