package wave

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"
)

// gatedWriter runs gate before its first write: a snapshot's bytes,
// written after its freeze, wait for it.
type gatedWriter struct {
	w    io.Writer
	once sync.Once
	gate func()
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.once.Do(g.gate)
	return g.w.Write(p)
}

// TestSnapshotsWrittenBesideTheWriter: the index's snapshot and its
// splits' are written while the writer changes the index (items given
// another vector, removed, moved to another agent, added): before either
// writes a byte, a round of changes must complete, which it could not if
// the write held the writer's lock. The snapshots hold the index as it
// stood when each began, none of those changes. Read back and caught up
// as a daemon's start after a crash does it (each changed item removed,
// the splits' load told to leave it out, then added as the index holds
// it), the index holds what the live one holds, with the same Metas, and
// its splits are whole and find what exact search finds.
func TestSnapshotsWrittenBesideTheWriter(t *testing.T) {
	const n = 12000
	x, flat, vecs, qs, _, _ := splitsFixture(t, n)
	var touched []uint64
	gated := func(w io.Writer, round int) io.Writer {
		return &gatedWriter{w: w, gate: func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				touched = append(touched, changeSome(t, x, flat, vecs, n, round)...)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("a change to the index waited a minute for a snapshot being written")
			}
		}}
	}
	var snap, splits bytes.Buffer
	if _, err := x.WriteTo(gated(&snap, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.WriteSplitsTo(gated(&splits, 2)); err != nil {
		t.Fatal(err)
	}

	y := restarted(t, snap.Bytes(), vecs, n)
	for _, id := range touched[:40] { // round 1, while the index was written
		if id >= n && y.Has(id) {
			t.Errorf("item %d, added while the snapshot was written, is in it", id)
		}
	}
	// The catch-up from the stamp taken before the snapshots.
	for _, id := range touched {
		y.Remove(id)
	}
	load := y.ExpectSplits()
	load.Exclude(touched)
	for _, id := range touched {
		if s, ok := flat.slot[id]; ok {
			if err := y.Add(id, flat.vecs[s*flat.dim:(s+1)*flat.dim], flat.metas[s]); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := load.Load(context.Background(), bytes.NewReader(splits.Bytes()), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Splits != 2 || got.Kept < 2*n-2*80 {
		t.Errorf("splits loaded %+v: want 2, with all but the 80 items changed of %d each kept", got, n)
	}
	if y.Len() != flat.Len() {
		t.Fatalf("caught up, the index holds %d items, the live one %d", y.Len(), flat.Len())
	}
	for id, s := range flat.slot {
		loc, ok := y.ids.get(id)
		if !ok {
			t.Fatalf("item %d is live but not in the caught-up index", id)
		}
		if m := y.st.Load().lists[loc.list].d.Load().metas[loc.pos].meta(); m != flat.metas[s] {
			t.Fatalf("item %d: Meta %+v, the live one %+v", id, m, flat.metas[s])
		}
	}
	waitReady(t, y.SplitsReady, "the loaded splits")
	for by := range splitKinds {
		checkSplit(t, y, y.sides[by].Load())
	}
	for _, f := range splitFilters(n) {
		wantRecall(t, y, flat, qs, f)
	}
}
