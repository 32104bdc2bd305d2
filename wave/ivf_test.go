package wave

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
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

// buildIVF returns an IVF and a Flat holding vecs[i] under id i with
// fixMeta(i), the IVF trained (if big enough).
func buildIVF(t testing.TB, vecs [][]float32, o IVFOptions) (*IVF, *Flat) {
	return buildIVFMeta(t, vecs, o, fixMeta)
}

// buildIVFMeta is buildIVF with item i's Meta meta(i).
func buildIVFMeta(t testing.TB, vecs [][]float32, o IVFOptions, meta func(int) Meta) (*IVF, *Flat) {
	return buildIVFWith(t, vecs, o, meta, nil)
}

// buildIVFWith is buildIVFMeta with setup (if not nil) called on the
// empty IVF (to split it before its first item) and, once it is built,
// every split's catch-alls' index trained too.
func buildIVFWith(t testing.TB, vecs [][]float32, o IVFOptions, meta func(int) Meta, setup func(*IVF)) (*IVF, *Flat) {
	t.Helper()
	x := NewIVF(len(vecs[0]), o)
	if setup != nil {
		setup(x)
	}
	flat := NewFlat(len(vecs[0]))
	for i, v := range vecs {
		if err := x.Add(uint64(i), v, meta(i)); err != nil {
			t.Fatal(err)
		}
		if err := flat.Add(uint64(i), v, meta(i)); err != nil {
			t.Fatal(err)
		}
	}
	x.WaitRebuild()
	for by := range splitKinds {
		if sd := x.sides[by].Load(); sd != nil {
			sd.shared.WaitRebuild()
		}
	}
	return x, flat
}

func TestIVFExactBeforeTraining(t *testing.T) {
	vecs := clustered(11, 600, 16, 5)
	x, flat := buildIVF(t, vecs, IVFOptions{TrainAt: 1000})
	if x.Lists() != 1 {
		t.Fatalf("%d lists below TrainAt", x.Lists())
	}
	for _, f := range []*Filter{nil, {Types: []uint8{3}}, {From: 100, To: 130}} {
		if r := recall(t, x, flat, vecs[:50], 10, f); r != 1 {
			t.Errorf("filter %+v: recall@10 = %.4f before training, want exact", f, r)
		}
	}
}

func TestIVFDelete(t *testing.T) {
	const n, dim = 8000, 32
	vecs := clustered(21, n, dim, 16)
	x, flat := buildIVF(t, vecs, IVFOptions{TrainAt: 2000, Seed: 3})
	for i := 0; i < n; i += 3 {
		if !x.Remove(uint64(i)) || !flat.Remove(uint64(i)) {
			t.Fatalf("Remove(%d) = false", i)
		}
	}
	if x.Remove(0) {
		t.Fatal("second Remove(0) = true")
	}
	if x.Len() != flat.Len() || x.Has(0) || !x.Has(1) {
		t.Fatalf("Len %d (want %d), Has(0) %v, Has(1) %v", x.Len(), flat.Len(), x.Has(0), x.Has(1))
	}
	check := func(stage string) {
		t.Helper()
		for _, q := range vecs[:30] {
			for _, h := range x.Search(q, 10, nil) {
				if h.ID%3 == 0 {
					t.Fatalf("%s: removed id %d returned", stage, h.ID)
				}
			}
		}
		for _, f := range []*Filter{nil, {Allow: func(id uint64) bool { return id%100 == 1 }}, {From: 4000, To: 4099}} {
			if r := recall(t, x, flat, vecs[:100], 10, f); r < 0.95 {
				t.Errorf("%s: filter %+v: recall@10 = %.4f, want >= 0.95", stage, f, r)
			}
		}
	}
	check("with tombstones")
	// Tombstones: the removed ids, and entries a retraining replayed.
	tomb := x.Tombstones()
	if got := x.Cleanup(); got != tomb || got < (n+2)/3 || x.Tombstones() != 0 {
		t.Fatalf("Cleanup removed %d of %d tombstones (at least %d removed), %d left", got, tomb, (n+2)/3, x.Tombstones())
	}
	check("after Cleanup")
	// Replacing moves an id to its new vector.
	if err := x.Add(1, vecs[2], fixMeta(1)); err != nil {
		t.Fatal(err)
	}
	if h := x.Search(vecs[2], 2, &Filter{Types: []uint8{1}}); len(h) == 0 || h[0].ID != 1 || h[0].Score < 0.999 {
		t.Fatalf("replaced id 1: %v", h)
	}
}

func TestIVFSnapshotRoundTrip(t *testing.T) {
	vecs := clustered(31, 6000, 32, 12)
	x, flat := buildIVF(t, vecs, IVFOptions{TrainAt: 1500, Seed: 5})
	for i := 0; i < 6000; i += 7 {
		x.Remove(uint64(i))
		flat.Remove(uint64(i))
	}
	x.SetMeta(1, Meta{Kind: KindEdge, Type: 77, Time: 5, End: 9})
	flat.SetMeta(1, Meta{Kind: KindEdge, Type: 77, Time: 5, End: 9})
	snap := snapshotOf(t, x)
	y, err := ReadIVF(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != x.Len() || y.Lists() != x.Lists() || y.Tombstones() != 0 || y.NProbe() != x.NProbe() {
		t.Fatalf("loaded Len %d Lists %d Tombstones %d NProbe %d, want %d %d 0 %d",
			y.Len(), y.Lists(), y.Tombstones(), y.NProbe(), x.Len(), x.Lists(), x.NProbe())
	}
	// Without float vectors it scores by 4-bit codes alone, which rank
	// this set's near-ties roughly (the daemon's indexer attaches every
	// vector before the planner serves).
	for _, f := range []*Filter{nil, {Types: []uint8{77}}, {From: 3000, To: 3050}} {
		if r := recall(t, y, flat, vecs[:100], 10, f); r < 0.8 {
			t.Errorf("loaded, filter %+v: recall@10 = %.4f", f, r)
		}
	}
	for i, v := range vecs {
		if y.Attach(uint64(i), v) != (i%7 != 0) {
			t.Fatalf("Attach(%d) presence wrong", i)
		}
	}
	for _, q := range vecs[:50] {
		a, c := x.Search(q, 10, nil), y.Search(q, 10, nil)
		if !slices.Equal(a, c) {
			t.Fatalf("attached copy answers %v, original %v", c, a)
		}
	}
	// The copy writes the same bytes, and keeps working.
	if !bytes.Equal(snap, snapshotOf(t, y)) {
		t.Fatal("re-written snapshot differs")
	}
	// Every list has room beyond what it read: adds into it (as a
	// start's catch-up and ingest's first inserts make) do not copy it.
	st := y.st.Load()
	before := make([]*listData, len(st.lists))
	for i := range st.lists {
		before[i] = st.lists[i].d.Load()
		if d := before[i]; len(d.ids) < listRoom(d.len()) || len(d.vecs) != len(d.ids) || len(d.codes) != len(d.ids)*nibbleBytes(32) {
			t.Fatalf("list %d read with %d entries: room for %d (%d vectors, %d code bytes)", i, d.len(), len(d.ids), len(d.vecs), len(d.codes))
		}
	}
	for i := range 8 {
		if err := y.Add(1<<40+uint64(i), vecs[3+i], Meta{}); err != nil || !y.Has(1<<40+uint64(i)) {
			t.Fatalf("Add after load: %v", err)
		}
	}
	for i := range st.lists {
		if st.lists[i].d.Load() != before[i] {
			t.Fatalf("list %d copied by one of 8 adds after the load", i)
		}
	}
	for i := range 8 { // each added vector is found, as itself or as the item it copies
		if h := y.Search(vecs[3+i], 1, nil); len(h) != 1 || h[0].ID != 1<<40+uint64(i) && h[0].ID != uint64(3+i) {
			t.Fatalf("vector %d after the adds: %v", 3+i, h)
		}
	}
}

// A version-2 snapshot (int8 codes) loads: its codes become 4-bit ones,
// it answers as the index it was written from, and it is written back
// as version 3.
func TestIVFSnapshotVersion2Loads(t *testing.T) {
	vecs := clustered(32, 6000, 96, 12)
	x, flat := buildIVF(t, vecs, IVFOptions{TrainAt: 1500, Seed: 5})
	var v2, v3 bytes.Buffer
	if _, err := x.writeVersion(&v2, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := x.WriteTo(&v3); err != nil {
		t.Fatal(err)
	}
	if v2.Bytes()[len(ivfMagic)] != 2 || v2.Len() <= v3.Len() {
		t.Fatalf("version 2 snapshot: version byte %d, %d bytes against %d", v2.Bytes()[len(ivfMagic)], v2.Len(), v3.Len())
	}
	y, err := ReadIVF(bytes.NewReader(v2.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != x.Len() || y.Lists() != x.Lists() {
		t.Fatalf("loaded Len %d Lists %d, want %d %d", y.Len(), y.Lists(), x.Len(), x.Lists())
	}
	if r := recall(t, y, flat, vecs[:100], 10, nil); r < 0.8 {
		t.Errorf("version 2 loaded, codes alone: recall@10 = %.4f", r)
	}
	for i, v := range vecs {
		y.Attach(uint64(i), v)
	}
	for _, q := range vecs[:50] {
		if a, c := x.Search(q, 10, nil), y.Search(q, 10, nil); !slices.Equal(a, c) {
			t.Fatalf("version 2 loaded and attached answers %v, original %v", c, a)
		}
	}
	var out bytes.Buffer
	if _, err := y.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if out.Bytes()[len(ivfMagic)] != ivfVersion {
		t.Fatalf("re-written as version %d", out.Bytes()[len(ivfMagic)])
	}
}

// An entry loaded without its float vector decodes from its code (the
// residual) and its list's centre to about the vector: what a
// retraining places it by.
func TestIVFEntryDecodesWithoutItsVector(t *testing.T) {
	vecs := clustered(33, 4000, 64, 8)
	x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 1000, Seed: 3})
	y := reloaded(t, x)
	if y.Lists() < 2 {
		t.Fatalf("%d lists: not trained", y.Lists())
	}
	buf := make([]float32, 64)
	for id := 0; id < len(vecs); id += 97 {
		loc, _ := y.ids.get(uint64(id))
		e := y.st.Load().lists[loc.list].d.Load().entry(int(loc.pos), 64)
		if e.vec != nil || e.centre == nil {
			t.Fatalf("entry %d: vector %v, centre %v", id, e.vec != nil, e.centre != nil)
		}
		if c := Dot(entryVec(e, buf), vecs[id]); c < 0.98 {
			t.Fatalf("entry %d decodes to a vector at cosine %v from its own", id, c)
		}
	}
}

func TestIVFSnapshotCorrupt(t *testing.T) {
	vecs := clustered(41, 3000, 8, 6)
	x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 1000})
	good := snapshotOf(t, x)
	for _, cut := range []int{0, 5, 8, 40, len(good) / 2, len(good) - 1} {
		if _, err := ReadIVF(bytes.NewReader(good[:cut])); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated at %d: err %v, want ErrCorrupt", cut, err)
		}
	}
	for _, at := range []int{3, 6, 20, 60, len(good) / 3, len(good) - 2} {
		bad := bytes.Clone(good)
		bad[at] ^= 0x5a
		if _, err := ReadIVF(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d flipped: err %v, want ErrCorrupt", at, err)
		}
	}
}

func TestIVFDeterministic(t *testing.T) {
	vecs := clustered(51, 5000, 16, 10)
	snap := func() []byte {
		x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 600, Seed: 9})
		return snapshotOf(t, x)
	}
	if !bytes.Equal(snap(), snap()) {
		t.Fatal("same data and seed built different indexes")
	}
}

// TestIVFConcurrent runs searches, a writer that adds, replaces, removes
// and changes Meta, and snapshots/compactions at once, through two
// background retrainings; the end state must match the operations.
func TestIVFConcurrent(t *testing.T) {
	const dim, n = 16, 6000
	vecs := clustered(61, n, dim, 10)
	x := NewIVF(dim, IVFOptions{TrainAt: 300, RetrainFactor: 4, Seed: 7})
	final := map[uint64]int{}
	ops := func(i int, add func(id uint64, v int), remove func(id uint64), setMeta func(id uint64)) {
		add(uint64(i), i)
		switch i % 7 {
		case 0:
			if i >= 100 {
				add(uint64(i-100), i) // replace
			}
		case 3:
			if i >= 50 {
				remove(uint64(i - 50))
			}
		case 5:
			setMeta(uint64(i - 1))
		}
	}
	var workers, bg sync.WaitGroup
	workers.Go(func() {
		for i := range n {
			ops(i, func(id uint64, v int) {
				if err := x.Add(id, vecs[v], fixMeta(int(id))); err != nil {
					t.Error(err)
				}
			}, func(id uint64) { x.Remove(id) }, func(id uint64) {
				m := fixMeta(int(id))
				m.End += 1000
				x.SetMeta(id, m)
			})
		}
	})
	for r := range 2 {
		workers.Go(func() {
			f := &Filter{Types: []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
			for i := range 400 {
				q := vecs[(i*13+r)%n]
				checkHits(t, x.Search(q, 10, nil), 10, nil, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < n })
				checkHits(t, x.Search(q, 5, f), 5, f, func(id uint64) (Meta, bool) { return fixMeta(int(id)), id < n })
			}
		})
	}
	stop := make(chan struct{})
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			x.Cleanup()
			if _, err := x.WriteTo(io.Discard); err != nil {
				t.Error(err)
			}
		}
	})
	workers.Wait()
	close(stop)
	bg.Wait()
	x.WaitRebuild()

	for i := range n {
		ops(i, func(id uint64, v int) { final[id] = v }, func(id uint64) { delete(final, id) }, func(uint64) {})
	}
	flat := NewFlat(dim)
	for id, v := range final {
		if err := flat.Add(id, vecs[v], fixMeta(int(id))); err != nil {
			t.Fatal(err)
		}
	}
	if x.Len() != len(final) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(final))
	}
	if x.Lists() < ivfMinLists {
		t.Fatalf("%d lists: never trained", x.Lists())
	}
	for id := range final {
		if !x.Has(id) {
			t.Fatalf("id %d missing", id)
		}
	}
	x.Cleanup()
	if x.Tombstones() != 0 {
		t.Fatalf("Tombstones = %d after Cleanup", x.Tombstones())
	}
	if r := recall(t, x, flat, vecs[:100], 10, nil); r < 0.95 {
		t.Errorf("recall@10 after concurrent build = %.4f, want >= 0.95", r)
	}
	// Every live item is found by its own vector, with its last Meta.
	for id, v := range final {
		if id%50 != 0 {
			continue
		}
		hits := x.Search(vecs[v], 1, &Filter{Allow: func(h uint64) bool { return h == id }})
		if len(hits) != 1 || hits[0].Score < 0.999 {
			t.Fatalf("id %d (vector %d) not found by its vector: %v", id, v, hits)
		}
	}
}

// TestIVFTimeWindows mixes timeless nodes with edges scoped in ingest
// order and searches narrow windows (where the block summaries skip most
// of every list) with and without a kind filter, also after an edge's
// scope has grown into the window.
func TestIVFTimeWindows(t *testing.T) {
	const n, dim = 6000, 32
	vecs := clustered(81, n, dim, 12)
	changed := map[int]Meta{}
	meta := func(i int) Meta {
		if m, ok := changed[i]; ok {
			return m
		}
		if i%3 == 0 {
			return Meta{Kind: KindNode}
		}
		return Meta{Kind: KindEdge, Time: int64(1000 + i), End: int64(1005 + i)}
	}
	x, flat := buildIVFMeta(t, vecs, IVFOptions{TrainAt: 1000, Seed: 2}, meta)
	edges := []Kind{KindEdge}
	windows := []*Filter{
		{From: 4000, To: 4040}, {From: 4000, To: 4040, Kinds: edges}, {To: 1100, Kinds: edges},
		{From: 6990, Kinds: edges}, {From: 1, To: 2}, {From: 1, To: 2, Kinds: edges},
	}
	check := func(stage string) {
		t.Helper()
		for _, f := range windows {
			if r := recall(t, x, flat, vecs[:100], 10, f); r < 0.95 {
				t.Errorf("%s: window %+v: recall@10 = %.4f, want >= 0.95", stage, f, r)
			}
			for _, q := range vecs[:20] {
				checkHits(t, x.Search(q, 10, f), 10, f, func(id uint64) (Meta, bool) { return meta(int(id)), id < n })
			}
		}
	}
	check("built")
	// Edge 10 is re-observed inside the window: found there by its vector.
	grown := Meta{Kind: KindEdge, Time: 1010, End: 4010}
	changed[10] = grown
	x.SetMeta(10, grown)
	flat.SetMeta(10, grown)
	f := &Filter{From: 4000, To: 4040, Kinds: edges}
	if h := x.Search(vecs[10], 1, f); len(h) != 1 || h[0].ID != 10 {
		t.Fatalf("edge 10 grown into the window: %v", h)
	}
	y := reloaded(t, x)
	if h := y.Search(vecs[10], 1, f); len(h) != 1 || h[0].ID != 10 {
		t.Fatalf("edge 10 after a snapshot round trip: %v", h)
	}
	x.Remove(11)
	flat.Remove(11)
	x.Cleanup()
	check("after Cleanup")
}

// TestNextListsOrdersAsTopK checks the probe order, made in steps,
// against topK.sorted over every list: the same order, ties by list
// number, negative, zero and equal scores included.
func TestNextListsOrdersAsTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for round := range 200 {
		n := 1 + r.IntN(900)
		s := &ivfSearcher{}
		for range n {
			var sc float32
			switch r.IntN(5) {
			case 0:
				sc = 0
			case 1:
				sc = float32(math.Copysign(0, -1))
			case 2:
				sc = float32(r.IntN(3)) / 2 // ties
			default:
				sc = float32(r.NormFloat64())
			}
			s.scores = append(s.scores, sc)
		}
		want := topK{k: n}
		for i, sc := range s.scores {
			want.push(uint64(i), sc)
		}
		w := want.sorted()
		for i, sc := range s.scores {
			s.keys = append(s.keys, listKey(sc, i))
		}
		// Ordered in steps of random sizes, the first maybe 0 or all.
		var got []Hit
		for len(got) < n {
			got = s.nextLists(got, len(got)+r.IntN(n+1))
		}
		if len(got) != len(w) {
			t.Fatalf("round %d: %d lists, want %d", round, len(got), len(w))
		}
		for i := range w {
			if got[i].ID != w[i].ID {
				t.Fatalf("round %d: position %d is list %d (%v), want %d (%v)", round, i, got[i].ID, got[i].Score, w[i].ID, w[i].Score)
			}
		}
	}
}

// TestIVFSnapshotHugeCountIsBounded: a snapshot whose entry counts were
// damaged to claim two billion entries is refused as corrupt, and reading
// it allocates a bounded amount: the id map is sized for at most 4M
// entries (about 150 MB), lists for at most maxListPresize before they
// are read.
func TestIVFSnapshotHugeCountIsBounded(t *testing.T) {
	const n = 777 // untrained: one list, its count equal to the total
	vecs := clustered(43, n, 8, 3)
	x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 4096})
	bad := snapshotOf(t, x)
	count := []byte{n & 0xff, n >> 8, 0, 0}
	found := 0
	for i := 0; i+4 <= len(bad); i++ {
		if bytes.Equal(bad[i:i+4], count) {
			copy(bad[i:], []byte{0xff, 0xff, 0xff, 0x7f})
			found++
		}
	}
	if found < 2 {
		t.Fatalf("found the count %d %d times in the snapshot, want the total and the list's", n, found)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadIVF(bytes.NewReader(bad))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Fatalf("reading the damaged snapshot allocated %d MB", got>>20)
	}
}

// TestIVFSnapshotDuplicateIDIsCorrupt: a snapshot whose lists hold one
// id twice (its checksum made right again) is refused, not loaded with
// one of the two entries unreachable.
func TestIVFSnapshotDuplicateIDIsCorrupt(t *testing.T) {
	const n = 300 // untrained: one list, ids 0..n-1 in order
	x, _ := buildIVF(t, clustered(44, n, 8, 3), IVFOptions{TrainAt: 4096})
	bad := snapshotOf(t, x)
	run := make([]byte, 0, 8*n)
	for id := range uint64(n) {
		run = binary.LittleEndian.AppendUint64(run, id)
	}
	at := bytes.Index(bad, run)
	if at < 0 {
		t.Fatal("the list's ids not found in the snapshot")
	}
	binary.LittleEndian.PutUint64(bad[at+8*7:], 3) // id 7 becomes a second 3
	body := bad[8 : len(bad)-4]
	binary.LittleEndian.PutUint32(bad[len(bad)-4:], crc32.Checksum(body, castagnoli))
	_, err := ReadIVF(bytes.NewReader(bad))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "id 3 held twice") {
		t.Fatalf("err %v, want ErrCorrupt naming id 3", err)
	}
}

// snapshotOf is x's snapshot.
func snapshotOf(tb testing.TB, x *IVF) []byte {
	tb.Helper()
	var b bytes.Buffer
	if _, err := x.WriteTo(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// reloaded is x after a snapshot round trip.
func reloaded(tb testing.TB, x *IVF) *IVF {
	tb.Helper()
	y, err := ReadIVF(bytes.NewReader(snapshotOf(tb, x)))
	if err != nil {
		tb.Fatal(err)
	}
	return y
}

// TestIVFHintAsksTheSameQuestions: with a Filter.Hint, a search asks
// Allow about the same ids in the same order, and returns the same hits,
// as without one; and every id it asks about was hinted before. On the
// fixture's IVF under the filtered cases, with the default nprobe and
// with one that makes the stops past it decide more; and on an untrained
// IVF, one list searched to its end.
func TestIVFHintAsksTheSameQuestions(t *testing.T) {
	x, _ := ivfFixture(t)
	small, _ := buildIVF(t, fix.vecs[:600], IVFOptions{Seed: 1})
	if small.Lists() != 1 {
		t.Fatalf("the small IVF has %d lists, want 1 (untrained)", small.Lists())
	}
	cases := append([]struct {
		name string
		f    *Filter
	}{
		{"allow all", &Filter{Allow: func(uint64) bool { return true }}},
		{"allow half", &Filter{Allow: func(id uint64) bool { return id%2 == 0 }}},
	}, filteredCases...)
	for _, tc := range cases {
		if tc.f.Allow == nil {
			continue
		}
		for _, ix := range []struct {
			name   string
			x      *IVF
			nprobe int
		}{{"default nprobe", x, x.NProbe()}, {"nprobe 2", x, 2}, {"untrained", small, 1}} {
			t.Run(tc.name+"/"+ix.name, func(t *testing.T) {
				def := ix.x.NProbe()
				ix.x.SetNProbe(ix.nprobe)
				defer ix.x.SetNProbe(def)
				for qi, q := range fix.queries[:40] {
					var plain, hinted []uint64
					hints := map[uint64]bool{}
					f := *tc.f
					f.Allow = func(id uint64) bool { plain = append(plain, id); return tc.f.Allow(id) }
					want := ix.x.Search(q, 10, &f)
					f.Allow = func(id uint64) bool {
						if !hints[id] {
							t.Fatalf("query %d: Allow asked about %d before it was hinted", qi, id)
						}
						hinted = append(hinted, id)
						return tc.f.Allow(id)
					}
					f.Hint = func(id uint64) { hints[id] = true }
					got := ix.x.Search(q, 10, &f)
					if !slices.Equal(plain, hinted) {
						t.Fatalf("query %d: Allow asked about %d ids with Hint, %d without (or in another order)", qi, len(hinted), len(plain))
					}
					if !slices.Equal(got, want) {
						t.Fatalf("query %d: hits %v with Hint, %v without", qi, got, want)
					}
				}
			})
		}
	}
}

// TestIVFSearchStats checks what a search adds to Filter.Stats: the
// lists it scanned, the items it scored and how often it asked Allow,
// without changing its hits.
func TestIVFSearchStats(t *testing.T) {
	x, _ := ivfFixture(t)
	small, _ := buildIVF(t, fix.vecs[:600], IVFOptions{Seed: 1})
	t.Run("untrained: one list, every admitted item scored", func(t *testing.T) {
		asked := 0
		var st SearchStats
		f := &Filter{Types: []uint8{1, 2, 3}, Allow: func(uint64) bool { asked++; return true }, Stats: &st}
		small.Search(fix.queries[0], 10, f)
		admitted := 0
		for i := range 600 {
			if f.admitsMeta(fixMeta(i)) {
				admitted++
			}
		}
		if st.Lists != 1 || st.Scored != admitted || st.Asked != asked || asked == 0 {
			t.Fatalf("stats %+v, want 1 list, %d scored, %d asked", st, admitted, asked)
		}
	})
	for _, tc := range append([]struct {
		name string
		f    *Filter
	}{{"no filter", nil}, {"stats alone", &Filter{}}}, filteredCases...) {
		t.Run(tc.name, func(t *testing.T) {
			var st SearchStats
			asked, allowed := 0, 0
			var f Filter
			if tc.f != nil {
				f = *tc.f
			}
			if f.Allow != nil {
				f.Allow = countingAllow(f.Allow, &asked, &allowed)
			}
			f.Stats = &st
			for _, q := range fix.queries[:10] {
				want := x.Search(q, 10, tc.f)
				before := st
				if got := x.Search(q, 10, &f); !slices.Equal(got, want) {
					t.Fatalf("hits %v with Stats, %v without", got, want)
				}
				if lists := st.Lists - before.Lists; lists < min(max(1, x.NProbe()/boundFrom), x.Lists()) || lists > x.Lists() {
					t.Fatalf("one search scanned %d lists; nprobe %d of %d", lists, x.NProbe(), x.Lists())
				}
				if st.Scored <= before.Scored && tc.name != "none" {
					t.Fatalf("one search scored %d items", st.Scored-before.Scored)
				}
			}
			if st.Asked != asked || st.Allowed != allowed || st.Scored > 10*x.Len() {
				t.Fatalf("stats %+v over 10 searches; Allow asked %d times, true %d", st, asked, allowed)
			}
		})
	}
}

// An unfiltered search near the clusters fills its top k from the first
// lists, and the bound rules out the rest before NProbe: it probes
// between an eighth of NProbe and NProbe lists, most of them fewer than
// half, and the searches that stop early keep their recall.
func TestIVFStopsOnTheBoundBeforeNProbe(t *testing.T) {
	x, flat := ivfFixture(t)
	const k = 10
	var early [][]float32
	beforeHalf := 0
	for _, q := range fix.queries {
		var st SearchStats
		x.Search(q, k, &Filter{Stats: &st})
		if st.Lists < x.NProbe()/boundFrom || st.Lists > x.NProbe() {
			t.Fatalf("an unfiltered search probed %d lists; nprobe %d", st.Lists, x.NProbe())
		}
		if st.Lists < x.NProbe() {
			early = append(early, q)
		}
		if st.Lists < x.NProbe()/2 {
			beforeHalf++
		}
	}
	if beforeHalf < len(fix.queries)/2 {
		t.Fatalf("%d of %d searches stopped before half of nprobe %d", beforeHalf, len(fix.queries), x.NProbe())
	}
	if len(early) < len(fix.queries)/4 {
		t.Fatalf("%d of %d searches stopped before nprobe %d", len(early), len(fix.queries), x.NProbe())
	}
	r := recall(t, x, flat, early, k, nil)
	t.Logf("%d of %d searches stopped early, recall@%d %.4f", len(early), len(fix.queries), k, r)
	if r < 0.95 {
		t.Errorf("recall@%d of the searches that stopped early = %.4f, want >= 0.95", k, r)
	}
}

// TestIVFListStats reads the lists' lengths before and after training,
// with tombstones counted until a cleanup drops them.
func TestIVFListStats(t *testing.T) {
	const dim = 16
	vecs := clustered(11, 2000, dim, 8)
	x := NewIVF(dim, IVFOptions{TrainAt: 500, Seed: 3})
	for i, v := range vecs[:10] {
		if err := x.Add(uint64(i), v, Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := x.ListStats(), (ListStats{Lists: 1, Entries: 10, Seen: 10, Longest: 10}); got != want {
		t.Fatalf("untrained: %+v, want %+v", got, want)
	}
	for i, v := range vecs[10:] {
		if err := x.Add(uint64(10+i), v, Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	x.WaitRebuild()
	s := x.ListStats()
	if s.Lists != x.Lists() || s.Lists < 2 || s.Entries != len(vecs) {
		t.Fatalf("trained: %+v, want %d lists and %d entries", s, x.Lists(), len(vecs))
	}
	mean := float64(s.Entries) / float64(s.Lists)
	if s.Seen < mean || s.Seen > float64(s.Longest) {
		t.Fatalf("trained: seen %.1f outside [mean %.1f, longest %d]", s.Seen, mean, s.Longest)
	}
	for id := range uint64(200) {
		x.Remove(id)
	}
	if got := x.ListStats().Entries; got != len(vecs) {
		t.Fatalf("after 200 removals: %d entries, want %d with their tombstones", got, len(vecs))
	}
	x.Cleanup()
	if got := x.ListStats().Entries; got != len(vecs)-200 {
		t.Fatalf("after the cleanup: %d entries, want %d", got, len(vecs)-200)
	}
}

// TestRetrainReplaysEveryChange changes an index while a retraining runs
// (items added, Meta changed in place and in fields written once, the
// same items changed again, vectors replaced, items removed) and checks
// that the retrained index holds each live item once, at its last
// vector and with its last Meta, and none removed.
func TestRetrainReplaysEveryChange(t *testing.T) {
	const dim, n = 16, 2000
	vecs := clustered(71, 2*n, dim, 10)
	x := NewIVF(dim, IVFOptions{TrainAt: 300, RetrainFactor: 4, Seed: 3})
	want := map[uint64]Meta{}
	vecOf := map[uint64]int{}
	add := func(id uint64, v int, m Meta) {
		t.Helper()
		if err := x.Add(id, vecs[v], m); err != nil {
			t.Fatal(err)
		}
		want[id], vecOf[id] = m, v
	}
	for i := range n {
		add(uint64(i), i, fixMeta(i))
	}
	x.WaitRebuild()
	x.mu.Lock()
	snap, wg := x.startRebuild(n)
	x.mu.Unlock()
	for i := range n {
		add(uint64(n+i), n+i, fixMeta(n+i)) // added meanwhile
		id := uint64(i % 500)               // changed, some several times
		m := want[id]
		m.End += int64(1 + i)
		if i%7 == 0 {
			m.Type++ // written once: the entry is appended again
		}
		if !x.SetMeta(id, m) {
			t.Fatalf("SetMeta(%d): not present", id)
		}
		want[id] = m
		switch i % 11 {
		case 1: // a new vector for an item of the snapshot
			add(uint64(500+i%700), 2*n-1-i, want[uint64(500+i%700)])
		case 2:
			rm := uint64(1500 + i%400)
			if x.Remove(rm) {
				delete(want, rm)
			}
		}
	}
	x.retrain(snap, n, x.opt.Seed, wg)
	if x.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(want))
	}
	st := x.st.Load()
	for id, m := range want {
		loc, ok := x.ids.get(id)
		if !ok {
			t.Fatalf("id %d missing", id)
		}
		d := st.lists[loc.list].d.Load()
		if d.isDead(int(loc.pos)) || d.ids[loc.pos] != id {
			t.Fatalf("id %d: its entry is dead or another's", id)
		}
		if got := d.metas[loc.pos].meta(); got != m {
			t.Fatalf("id %d: Meta %+v, want %+v", id, got, m)
		}
		if v := d.vecs[loc.pos].Load(); v != &vecs[vecOf[id]][0] {
			t.Fatalf("id %d: not its last vector", id)
		}
	}
	live := 0
	for i := range st.lists {
		d := st.lists[i].d.Load()
		for j := range d.len() {
			if !d.isDead(j) {
				live++
			}
		}
	}
	if live != len(want) {
		t.Fatalf("%d live entries, want %d", live, len(want))
	}
}
