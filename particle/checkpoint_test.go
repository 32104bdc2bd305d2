package particle

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCheckpointBoundsTheCatchUp: a run loads the clean snapshot, writes,
// checkpoints, writes again (a new edge, an edge deleted) and dies. The
// next start loads the checkpoint, not the snapshot the run set aside
// (which the checkpoint removed), and catches up only what was written
// after it; its view is the one a load from Badger gives.
func TestCheckpointBoundsTheCatchUp(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 31, testEntities, benchEdgesPerTxn)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openLogged(t, dir)
	if n, ok := s.RecordsSinceSnapshot(); !ok || n != 0 {
		t.Fatalf("after a clean start: %d records since a snapshot (on disk %v)", n, ok)
	}
	w := newBenchWorkload(32, testEntities)
	for range 3 {
		if err := w.batch(s); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.RecordsSinceSnapshot()
	if before < 3*benchEdgesPerTxn {
		t.Fatalf("%d records since the snapshot after three batches of %d edges", before, benchEdgesPerTxn)
	}
	cp, err := s.Checkpoint(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Records != before || cp.Bytes == 0 || cp.Version == 0 {
		t.Fatalf("checkpoint %+v, with %d records since the snapshot", cp, before)
	}
	if n, ok := s.RecordsSinceSnapshot(); !ok || n != 0 {
		t.Fatalf("after the checkpoint: %d records since (on disk %v)", n, ok)
	}
	if got := ViewSnapshotToLoad(dir); got != ViewSnapshotPath(dir) {
		t.Fatalf("a crash start would load %q", got)
	}
	if _, err := os.Stat(ViewSnapshotPath(dir) + loadedSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the snapshot set aside is still there: %v", err)
	}

	var someEdge string
	s.Read(func(r Reader) { r.Edges(func(e *Edge) bool { someEdge = e.ID; return false }) })
	observeOn(t, s, "a cup after the checkpoint", "a table after the checkpoint")
	if _, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteEdge(someEdge) }); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	want, _ := loadFromBadger(t, dir)

	s, logs := openLogged(t, dir)
	defer s.Close()
	cu, behind := s.CaughtUp()
	if !s.LoadedFromSnapshot() || !behind || cu.Since != cp.Version {
		t.Fatalf("from the snapshot %v, behind %v, since %d (checkpoint at %d); logs:\n%s", s.LoadedFromSnapshot(), behind, cu.Since, cp.Version, logs)
	}
	// Two nodes and an edge written, an edge removed: not the three
	// batches before the checkpoint.
	if cu.Nodes != 2 || cu.Edges != 1 || cu.Removed != 1 {
		t.Fatalf("caught up with %+v", cu)
	}
	if n, _ := s.RecordsSinceSnapshot(); n != 4 {
		t.Fatalf("%d records since the snapshot after a catch-up of 4", n)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)
}

// TestCheckpointWhileCommitsGoOn checkpoints while another goroutine
// commits batches, dies, and starts again: the checkpoint holds exactly
// what Badger held at its read timestamp, the catch-up what came after,
// and together they are the view Badger gives.
func TestCheckpointWhileCommitsGoOn(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 41, testEntities, 2*benchEdgesPerTxn)
	w := newBenchWorkload(42, testEntities)
	var wg sync.WaitGroup
	var batches atomic.Int64
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.batch(s); err != nil {
				t.Error(err)
				return
			}
			batches.Add(1)
		}
	})
	// Checkpoints until the writer has committed twice beside them.
	for batches.Load() == 0 {
		runtime.Gosched()
	}
	var cps []Checkpoint
	for from := batches.Load(); len(cps) < 3 || batches.Load() < from+2; {
		cp, err := s.Checkpoint(context.Background(), 2)
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	close(stop)
	wg.Wait()
	last := cps[len(cps)-1]
	if last.Version <= cps[0].Version {
		t.Fatalf("no commits beside the checkpoints (versions %d … %d)", cps[0].Version, last.Version)
	}
	observeOn(t, s, "a cup after the checkpoints", "a shelf after the checkpoints")
	crash(t, s)
	want, _ := loadFromBadger(t, dir)
	s, logs := openLogged(t, dir)
	defer s.Close()
	if cu, behind := s.CaughtUp(); !s.LoadedFromSnapshot() || !behind || cu.Since != last.Version {
		t.Fatalf("from the snapshot %v, behind %v, %+v (last checkpoint at %d); logs:\n%s", s.LoadedFromSnapshot(), behind, cu, last.Version, logs)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)
}

// TestCheckpointRefusals: a store without snapshots has none to write, a
// cancelled checkpoint leaves the snapshot on disk as it was, and a
// closed store refuses; a store loaded from Badger has no snapshot on
// disk until its first checkpoint.
func TestCheckpointRefusals(t *testing.T) {
	mem, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.Checkpoint(context.Background(), 1); !errors.Is(err, ErrNoSnapshots) {
		t.Fatalf("in memory: %v", err)
	}

	dir := t.TempDir()
	s := writeFleet(t, dir, 51, testEntities, benchEdgesPerTxn)
	if _, ok := s.RecordsSinceSnapshot(); ok {
		t.Fatal("a store loaded from Badger reports a snapshot on disk")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Checkpoint(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if got := ViewSnapshotToLoad(dir); got != "" {
		t.Fatalf("a cancelled checkpoint left %q", got)
	}
	if _, err := s.Checkpoint(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n, ok := s.RecordsSinceSnapshot(); !ok || n != 0 {
		t.Fatalf("after the first checkpoint: %d since (on disk %v)", n, ok)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestCloseStopsACheckpoint closes the store while checkpoints run: Close
// neither waits for a whole one nor lets one write after it, and the
// snapshot Close writes is the one the next start loads, current.
func TestCloseStopsACheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 61, testEntities, 4*benchEdgesPerTxn)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			_, err := s.Checkpoint(context.Background(), 1)
			if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	observeOn(t, s, "a cup before the close", "a table before the close")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want, _ := loadFromBadger(t, dir)
	s, _ = openLogged(t, dir)
	defer s.Close()
	if _, behind := s.CaughtUp(); !s.LoadedFromSnapshot() || behind {
		t.Fatalf("after Close: from the snapshot %v, behind %v", s.LoadedFromSnapshot(), behind)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)
}
