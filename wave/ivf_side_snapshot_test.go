package wave

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// splitsFixture is an IVF split by agent and by time, filled as ingest
// fills one, with its snapshot and its splits' snapshot, and the flat
// index of the same items.
func splitsFixture(t *testing.T, n int) (x *IVF, flat *Flat, vecs, qs [][]float32, snap, splits []byte) {
	t.Helper()
	all := clustered(31, n+600, 32, 40)
	vecs, qs = all[:n+500], all[n+500:]
	x, flat = buildIVFWith(t, vecs[:n], IVFOptions{Seed: 1, TrainAt: 1000}, splitMeta, func(x *IVF) {
		x.SplitByAgent()
		x.SplitByTime()
	})
	var sb bytes.Buffer
	if _, err := x.WriteSplitsTo(&sb); err != nil {
		t.Fatal(err)
	}
	return x, flat, vecs, qs, snapshotOf(t, x), sb.Bytes()
}

// restarted reads the snapshot as a start does: the index, then its
// float vectors and Metas attached.
func restarted(t *testing.T, snap []byte, vecs [][]float32, n int) *IVF {
	t.Helper()
	y, err := ReadIVF(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]Attachment, n)
	for i := range items {
		items[i] = Attachment{ID: uint64(i), Vec: vecs[i], Meta: splitMeta(i)}
	}
	y.AttachMetaAll(items, 2, make([]bool, n))
	return y
}

// TestSplitsLoadFromTheirSnapshot: a restarted IVF takes its splits
// from their snapshot, the catch-alls' index as trained before (no
// training again) and no saved entry the index changed since: an item
// given another vector, removed, moved to another agent or added, before
// the load or while it runs, is held once, as the index holds it. Every
// entry of the loaded splits is coded from the vector it references,
// holds the index's Meta, and searches through the splits find what
// exact search finds.
func TestSplitsLoadFromTheirSnapshot(t *testing.T) {
	const n = 12000
	x, flat, vecs, qs, snap, splits := splitsFixture(t, n)
	y := restarted(t, snap, vecs, n)
	load := y.ExpectSplits()
	change := func(round int) { changeSome(t, y, flat, vecs, n, round) }
	change(0) // before the load: recorded
	var wg sync.WaitGroup
	wg.Go(func() { change(5) }) // beside it: the splits take them
	got, err := load.Load(context.Background(), bytes.NewReader(splits), true, true)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// 2 splits of n items; of the 40 changed before the load, 10 with
	// another vector and 10 removed are dropped from both, 10 moved to
	// another agent from the split by agent; of the 40 changed beside
	// it, up to as many.
	if got.Splits != 2 || got.Entries != 2*n || got.Kept > 2*n-50 || got.Kept < 2*n-100 {
		t.Errorf("loaded %+v, want 2 splits of %d saved entries, %d-%d of them kept", got, 2*n, 2*n-100, 2*n-50)
	}
	waitReady(t, y.SplitsReady, "the loaded splits")
	for by := range splitKinds {
		was, sd := x.sides[by].Load(), y.sides[by].Load()
		sd.shared.WaitRebuild()
		if sd.shared.trained != was.shared.trained || sd.shared.Lists() != was.shared.Lists() {
			t.Errorf("split %d: catch-alls trained at %d into %d lists, want the snapshot's %d into %d", by,
				sd.shared.trained, sd.shared.Lists(), was.shared.trained, was.shared.Lists())
		}
		checkSplit(t, y, sd)
	}
	for _, f := range splitFilters(n) {
		wantRecall(t, y, flat, qs, f)
	}
	wantRecall(t, y, flat, qs, &Filter{From: int64(n / 2), To: int64(n/2 + 300)})
}

// changeSome changes 40 items of x and flat, the exact index of the
// same items (n of vecs, ids their positions), as ingest does: 10 given
// another vector, 10 removed, 10 moved to another agent (and hour), 10
// new ones added from vecs[n:]. Rounds change different items. It
// returns their ids.
func changeSome(t *testing.T, x *IVF, flat *Flat, vecs [][]float32, n, round int) []uint64 {
	other := clustered(99, 50, 32, 5)
	var ids []uint64
	for k := range 40 {
		i := uint64(round*1000 + k*13)
		switch k % 4 {
		case 0: // another vector
			mustAdd(t, x, flat, i, other[k], splitMeta(int(i)))
		case 1:
			x.Remove(i)
			flat.Remove(i)
		case 2: // another agent (and hour)
			m := splitMeta(int(i) + 1)
			m.Namespace, m.Kind, m.Type = splitMeta(int(i)).Namespace, splitMeta(int(i)).Kind, splitMeta(int(i)).Type
			x.SetMeta(i, m)
			flat.SetMeta(i, m)
		case 3: // a new item
			i = uint64(n + round*40 + k)
			mustAdd(t, x, flat, i, vecs[i], splitMeta(int(i)))
		}
		ids = append(ids, i)
	}
	return ids
}

// mustAdd adds id to both indexes.
func mustAdd(t *testing.T, x *IVF, flat *Flat, id uint64, v []float32, m Meta) {
	if err := x.Add(id, v, m); err != nil {
		t.Error(err)
	}
	if err := flat.Add(id, v, m); err != nil {
		t.Error(err)
	}
}

// checkSplit fails t unless sd holds each of x's live items once, each
// entry with x's vector and Meta, under its key, coded from that vector.
func checkSplit(t *testing.T, x *IVF, sd *ivfSide) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	held := map[uint64]int{}
	var c coder
	check := func(d *listData, i int, centre []float32, wantKey func(Meta) bool) {
		id := d.ids[i]
		held[id]++
		m, vec, ok := x.confirmed(id, nil)
		got := d.metas[i].meta()
		if !ok || d.vecs[i].Load() != vec || got != m || !wantKey(m) {
			t.Errorf("split %d: item %d held with meta %+v (index: %+v, held %v), its own vector %v", sd.by, id, got, m, ok, d.vecs[i].Load() == vec)
			return
		}
		code, lo, step := c.residual(unsafe.Slice(vec, x.dim), centre)
		cb := nibbleBytes(x.dim)
		if !slices.Equal(d.codes[i*cb:(i+1)*cb], code) || d.lows[i] != lo || d.steps[i] != step {
			t.Errorf("split %d: item %d coded from another vector", sd.by, id)
		}
	}
	al := sd.lists.Load()
	for _, ks := range al.sorted {
		for _, d := range al.lists[ks.slot].segs.Load().d {
			for i := range d.len() {
				if !d.isDead(i) {
					check(d, i, nil, func(m Meta) bool { k, ok := sd.key(m); return ok && k == ks.key })
				}
			}
		}
	}
	st := sd.shared.st.Load()
	for li := range st.lists {
		d := st.lists[li].d.Load()
		for i := range d.len() {
			if !d.isDead(i) {
				check(d, i, d.centre, func(m Meta) bool { _, ok := sd.key(m); return !ok })
			}
		}
	}
	if len(held) != x.ids.len() {
		t.Errorf("split %d holds %d items, the index %d", sd.by, len(held), x.ids.len())
	}
	for id, k := range held {
		if k != 1 || !x.ids.has(id) {
			t.Errorf("split %d holds item %d %d times (in the index: %v)", sd.by, id, k, x.ids.has(id))
		}
	}
}

// TestSplitsLoadFallsBackToTheFill: a damaged or missing splits
// snapshot, or one of another dimension, gives an error (ErrCorrupt for
// damage) and the splits are filled from the lists as if there were
// none; a split the snapshot lacks is filled too.
func TestSplitsLoadFallsBackToTheFill(t *testing.T) {
	const n = 3000
	_, flat, vecs, qs, snap, splits := splitsFixture(t, n)
	bad := slices.Clone(splits)
	bad[len(bad)/2] ^= 0x40
	for name, c := range map[string]struct {
		r       []byte
		corrupt bool
	}{
		"damaged":   {bad, true},
		"truncated": {splits[:len(splits)*2/3], true},
		"none":      {nil, false},
	} {
		y := restarted(t, snap, vecs, n)
		var r io.Reader
		if c.r != nil {
			r = bytes.NewReader(c.r)
		}
		_, err := y.ExpectSplits().Load(context.Background(), r, true, true)
		if got := errors.Is(err, ErrCorrupt); got != c.corrupt {
			t.Errorf("%s: Load gave %v, want ErrCorrupt %v", name, err, c.corrupt)
		}
		waitReady(t, y.SplitsReady, name+": the filled splits")
		for by := range splitKinds {
			checkSplit(t, y, y.sides[by].Load())
		}
		wantRecall(t, y, flat, qs, splitFilters(n)[0])
	}
	// A snapshot of the split by agent alone: the split by time is filled.
	x1, _ := buildIVFWith(t, vecs[:n], IVFOptions{Seed: 1, TrainAt: 1000}, splitMeta, (*IVF).SplitByAgent)
	var sb bytes.Buffer
	if _, err := x1.WriteSplitsTo(&sb); err != nil {
		t.Fatal(err)
	}
	y := restarted(t, snap, vecs, n)
	if _, err := y.ExpectSplits().Load(context.Background(), &sb, true, true); err != nil {
		t.Fatal(err)
	}
	waitReady(t, y.SplitsReady, "the splits, one loaded")
	for by := range splitKinds {
		checkSplit(t, y, y.sides[by].Load())
	}
	z := NewIVF(64, IVFOptions{})
	if _, err := z.ExpectSplits().Load(context.Background(), bytes.NewReader(splits), true, false); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("splits of 32 dimensions into an index of 64: %v, want a plain error", err)
	}
}

// TestSplitsWrittenOnlyWhenReady: a split that does not hold every live
// item (its fill under way) is left out of the snapshot, and a restart
// that reads it fills that split itself.
func TestSplitsWrittenOnlyWhenReady(t *testing.T) {
	const n = 3000
	x, flat, vecs, qs, snap, _ := splitsFixture(t, n)
	x.mu.Lock()
	x.sides[byTime].Load().ready.Store(false) // as while its fill runs
	x.mu.Unlock()
	var sb bytes.Buffer
	if _, err := x.WriteSplitsTo(&sb); err != nil {
		t.Fatal(err)
	}
	y := restarted(t, snap, vecs, n)
	got, err := y.ExpectSplits().Load(context.Background(), &sb, true, true)
	if err != nil || got.Splits != 1 {
		t.Fatalf("loaded %+v (%v), want the split by agent alone", got, err)
	}
	waitReady(t, y.SplitsReady, "the splits, the one not saved filled")
	for by := range splitKinds {
		checkSplit(t, y, y.sides[by].Load())
	}
	wantRecall(t, y, flat, qs, splitFilters(n)[0])
}

// TestSplitsLoadExcludesWhatChangedBefore: a start that catches an index
// up removes the items written since its snapshot and adds them again
// (some with another vector) before it expects the splits; the load,
// told which (Exclude), keeps none of their saved entries, and each
// split holds every item once, coded from the vector the index holds.
// Without Exclude the stale entries of the items given another vector
// are kept.
func TestSplitsLoadExcludesWhatChangedBefore(t *testing.T) {
	const n = 6000
	_, flat, vecs, qs, snap, splits := splitsFixture(t, n)
	other := clustered(77, 30, 32, 5)
	caughtUp := func() (*IVF, []uint64) {
		y := restarted(t, snap, vecs, n)
		var ids []uint64
		for k := range 30 {
			id := uint64(k * 97)
			y.Remove(id) // the catch-up
			ids = append(ids, id)
			if err := y.Add(id, other[k], splitMeta(int(id))); err != nil { // the fill
				t.Fatal(err)
			}
		}
		return y, ids
	}

	y, ids := caughtUp()
	load := y.ExpectSplits()
	load.Exclude(ids)
	got, err := load.Load(context.Background(), bytes.NewReader(splits), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Splits != 2 || got.Kept != 2*(n-len(ids)) {
		t.Errorf("loaded %+v, want 2 splits with %d entries kept", got, 2*(n-len(ids)))
	}
	waitReady(t, y.SplitsReady, "the loaded splits")
	for by := range splitKinds {
		checkSplit(t, y, y.sides[by].Load())
	}
	for k, id := range ids {
		flat.Remove(id)
		if err := flat.Add(id, other[k], splitMeta(int(id))); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range splitFilters(n) {
		wantRecall(t, y, flat, qs, f)
	}

	// Not told: the entries coded from the old vectors are kept.
	z, _ := caughtUp()
	got, err = z.ExpectSplits().Load(context.Background(), bytes.NewReader(splits), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kept != 2*n {
		t.Errorf("without Exclude: kept %d of %d entries, want all (the stale ones too)", got.Kept, 2*n)
	}
}

// TestSplitsSavedReadsTheHeader: SplitsSaved names the splits a
// snapshot holds (both, one, none) from its header alone, and refuses
// another dimension and a damaged header.
func TestSplitsSavedReadsTheHeader(t *testing.T) {
	x, _, _, _, _, splits := splitsFixture(t, 2000)
	if a, b, err := SplitsSaved(bytes.NewReader(splits), x.dim); err != nil || !a || !b {
		t.Fatalf("both splits: agent %v, time %v, %v", a, b, err)
	}
	one, _ := buildIVFWith(t, clustered(5, 200, 32, 4), IVFOptions{Seed: 1}, splitMeta, func(x *IVF) { x.SplitByTime() })
	var sb bytes.Buffer
	if _, err := one.WriteSplitsTo(&sb); err != nil {
		t.Fatal(err)
	}
	if a, b, err := SplitsSaved(bytes.NewReader(sb.Bytes()), one.dim); err != nil || a || !b {
		t.Fatalf("the split by time alone: agent %v, time %v, %v", a, b, err)
	}
	sb.Reset()
	if _, err := NewIVF(32, IVFOptions{}).WriteSplitsTo(&sb); err != nil {
		t.Fatal(err)
	}
	if a, b, err := SplitsSaved(bytes.NewReader(sb.Bytes()), 32); err != nil || a || b {
		t.Fatalf("no split: agent %v, time %v, %v", a, b, err)
	}
	if _, _, err := SplitsSaved(bytes.NewReader(splits), x.dim+1); err == nil {
		t.Fatal("a snapshot of another dimension accepted")
	}
	bad := slices.Clone(splits)
	bad[len(splitsMagic)+3] ^= 0xff // the dimension, under the header's checksum
	if _, _, err := SplitsSaved(bytes.NewReader(bad), x.dim); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged header: %v, want ErrCorrupt", err)
	}
}
