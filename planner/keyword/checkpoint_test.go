package keyword

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// openGraph opens (or reopens) the store on disk in dir/graph. Its
// Close keeps the deletion markers, as a store's crash does (a clean
// Close drops them): a Close stands for a crash of the store, whose
// files hold every commit once Badger's logs are replayed.
func openGraph(t *testing.T, dir string) *particle.Store {
	t.Helper()
	o := particle.DefaultOptions(dir + "/graph")
	o.KeepDeletionMarkers = true
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openLogged opens the index in dir/keyword over s, returning what its
// build logged.
func openLogged(t *testing.T, s *particle.Store, dir string) (*Index, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	ix, err := Open(s, Options{Dir: dir + "/keyword", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return ix, &logs
}

var readyLog = regexp.MustCompile(`msg="keyword index ready" .*\bindexed=(\d+) (\w+)=(\w+)(?: after_a_crash=(\w+))?`)

// ready is what the build logged when the index was ready: how many
// documents it indexed or deleted, whether it caught up (from the
// saved documents' generation) and whether after a crash.
type ready struct {
	indexed                     int
	caughtUp, reconciled, crash bool
}

func readyOf(t *testing.T, logs *bytes.Buffer) ready {
	t.Helper()
	m := readyLog.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no ready line in the logs:\n%s", logs)
	}
	n, _ := strconv.Atoi(m[1])
	r := ready{indexed: n, crash: m[4] == "true"}
	switch m[2] {
	case "caught_up":
		r.caughtUp = m[3] == "true"
	case "reconciled":
		r.reconciled = m[3] == "true"
	}
	return r
}

// deltaDocs is how many documents d names: the records written or
// deleted and the spans written since a generation, each document once
// (a record written twice is one document).
func deltaDocs(d particle.Delta) int {
	keys := map[docKey]bool{}
	for _, refs := range [][]particle.RecordRef{d.Records, d.Removed} {
		for _, r := range refs {
			switch r.Kind {
			case particle.KindNode:
				keys[nodeKey(r.ID)] = true
			case particle.KindEdge:
				keys[edgeKey(r.ID)] = true
			case particle.KindEpisode:
				keys[episodeKey(r.NS, r.ID)] = true
			}
		}
	}
	for _, sp := range d.Spans {
		keys[spanKey(sp.NS, sp.ID)] = true
	}
	return len(keys)
}

func changedDocsSince(t *testing.T, s *particle.Store, g particle.Generation) int {
	t.Helper()
	d, err := s.ChangedSince(g.Version)
	if err != nil {
		t.Fatal(err)
	}
	return deltaDocs(d)
}

func generation(t *testing.T, s *particle.Store) particle.Generation {
	t.Helper()
	g, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func checkpoint(t *testing.T, ix *Index) CheckpointInfo {
	t.Helper()
	info, err := ix.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// scorchEpochs are the epoch of bleve's current root snapshot and the
// last one persisted.
func scorchEpochs(t *testing.T, ix *Index) (root, persisted uint64) {
	t.Helper()
	adv, err := ix.bl.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	sm, ok := adv.(interface{ StatsMap() map[string]any })
	if !ok {
		t.Fatalf("bleve index %T has no stats", adv)
	}
	m := sm.StatsMap()
	root, _ = m["CurRootEpoch"].(uint64)
	persisted, _ = m["LastPersistedEpoch"].(uint64)
	return root, persisted
}

// sameAnswers checks that ix answers every query as a full build over
// the store does (an index in memory built from it), and holds the
// documents the store calls for.
func sameAnswers(t *testing.T, ix *Index, s *particle.Store, queries []string) {
	t.Helper()
	full, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	want, _, err := documents(s)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ix.bl.DocCount()
	if err != nil || int(n) != len(want) || ix.Len() != len(want) || full.Len() != len(want) {
		t.Errorf("bleve holds %d documents (%v), the index %d, a full build %d; the store calls for %d",
			n, err, ix.Len(), full.Len(), len(want))
	}
	for _, q := range queries {
		got, exp := hitIDs(search(t, ix, ns, q)), hitIDs(search(t, full, ns, q))
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("%q: %v, a full build finds %v", q, got, exp)
		}
	}
}

// TestCheckpointBoundsTheCatchUpAfterACrash: an index written for a
// while (many facts), then checkpointed, then written again (a new
// value, an alias renamed, an edge indexed before the checkpoint
// deleted), dies with its store. Reopened on the same boot, it catches
// up with what was written since the checkpoint alone, not with the
// whole run, and answers as a full build does. Both for an index built
// new on this run (the checkpoint must record the mapping version and
// the running state, which a new index has not yet written) and for
// one that opened clean.
func TestCheckpointBoundsTheCatchUpAfterACrash(t *testing.T) {
	for _, fromClean := range []bool{false, true} {
		t.Run(fmt.Sprintf("from_clean=%v", fromClean), func(t *testing.T) {
			dir := t.TempDir()
			s := openGraph(t, dir)
			fixture(t, s)
			if fromClean {
				ix, _ := openLogged(t, s, dir)
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
			}
			ix, _ := openLogged(t, s, dir)
			atOpen := generation(t, s)
			const before = 40
			for i := range before {
				fact(t, s, ns, fmt.Sprintf("crate %d", i), "holds", fmt.Sprintf("part %d", i), fmt.Sprintf("LOT-%04d", i))
			}
			fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")

			root, _ := scorchEpochs(t, ix)
			cp := checkpoint(t, ix)
			if _, persisted := scorchEpochs(t, ix); persisted <= root {
				t.Errorf("checkpoint returned with bleve persisted to epoch %d, its root before was %d", persisted, root)
			}
			if g := generation(t, s); !cp.Written || cp.Generation != g || cp.Docs != ix.Len() || cp.Bytes == 0 {
				t.Errorf("checkpoint %+v, want written at %+v with %d documents", cp, g, ix.Len())
			}
			// Nothing committed since: nothing to write.
			if again := checkpoint(t, ix); again.Written || again.Generation != cp.Generation || again.Docs != cp.Docs {
				t.Errorf("a second checkpoint with nothing committed: %+v", again)
			}

			// After the checkpoint: a new value, an alias renamed, and
			// an edge indexed before the checkpoint deleted.
			fact(t, s, ns, "arm", "serial_number", "base", "HX-7781")
			setAliases(t, s, "red block", "scarlet brick")
			id := edgeWithValue(s, "GR-0042")
			update(t, s, func(b *particle.Batch) error { return b.DeleteEdge(id) })
			since := changedDocsSince(t, s, cp.Generation)
			whole := changedDocsSince(t, s, atOpen)
			if since == 0 || whole < before+since {
				t.Fatalf("%d documents changed since the checkpoint, %d in the run: the test writes too little", since, whole)
			}

			// Both die (openGraph: the store's Close stands for its
			// crash).
			crashIndex(t, ix)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openGraph(t, dir)
			ix, logs := openLogged(t, s, dir)
			defer ix.Close()
			r := readyOf(t, logs)
			if !r.caughtUp || !r.crash || r.indexed != since {
				t.Errorf("reopen after the crash: %+v, want caught up after a crash with the %d documents changed since the checkpoint (the run changed %d); logs:\n%s",
					r, since, whole, logs)
			}
			sameAnswers(t, ix, s, []string{"scarlet brick", "crimson cube", "red block", "GR-0042", "HX-7781",
				"LOT-0007", "LOT-0039", "SN-4471-XQ", "torque wrench", "wooden cylinder"})
			for q, want := range map[string]int{"scarlet brick": 1, "crimson cube": 0, "GR-0042": 0, "HX-7781": 1, "LOT-0007": 1} {
				if hits := search(t, ix, ns, q); len(hits) != want {
					t.Errorf("%s: %v, want %d hits", q, hitIDs(hits), want)
				}
			}
		})
	}
}

// TestCloseAfterACheckpointMarksTheIndexClean: a checkpoint leaves the
// index running; a clean close after it, with or without commits in
// between, still saves and marks the index clean, so the next open
// takes the saved documents as they are.
func TestCloseAfterACheckpointMarksTheIndexClean(t *testing.T) {
	for _, writeAfter := range []bool{false, true} {
		t.Run(fmt.Sprintf("write_after=%v", writeAfter), func(t *testing.T) {
			dir := t.TempDir()
			s := openGraph(t, dir)
			fixture(t, s)
			ix, _ := openLogged(t, s, dir)
			fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
			checkpoint(t, ix)
			if writeAfter {
				fact(t, s, ns, "arm", "serial_number", "base", "HX-7781")
			}
			want := ix.Len()
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			ix, logs := openLogged(t, s, dir)
			defer ix.Close()
			if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash || ix.dirty || ix.Len() != want {
				t.Errorf("reopen after a clean close: %+v, dirty %v, %d documents (want %d); logs:\n%s", r, ix.dirty, ix.Len(), want, logs)
			}
			if hits := search(t, ix, ns, "GR-0042"); len(hits) != 1 {
				t.Errorf("GR-0042: %v", hitIDs(hits))
			}
			if hits := search(t, ix, ns, "HX-7781"); len(hits) != map[bool]int{false: 0, true: 1}[writeAfter] {
				t.Errorf("HX-7781: %v", hitIDs(hits))
			}
		})
	}
}

// TestCheckpointOfAnIndexNotWrittenKeepsItClean: an index opened clean
// that bleve was not written to since (the store moved on by commits
// that change no text) keeps its clean marker at a checkpoint, with the
// documents saved at the new generation: after a crash the next open
// takes them as they are, with nothing to catch up. A clean close after
// it has nothing left to save and the index stays clean.
func TestCheckpointOfAnIndexNotWrittenKeepsItClean(t *testing.T) {
	dir := t.TempDir()
	s := fixtureWithCleanIndex(t, dir)
	defer s.Close()
	ix, _ := openLogged(t, s, dir)
	// A reinforcement: a commit, no text changed.
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "SN-4471-XQ")
	if cp := checkpoint(t, ix); !cp.Written || cp.Generation != generation(t, s) {
		t.Errorf("checkpoint %+v", cp)
	}
	if ix.dirty {
		t.Fatal("the checkpoint marked the index running")
	}
	crashIndex(t, ix)
	ix, logs := openLogged(t, s, dir)
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash {
		t.Errorf("reopen after a crash: %+v, want the saved documents taken as they are; logs:\n%s", r, logs)
	}
	sameAnswers(t, ix, s, []string{"SN-4471-XQ", "red block", "torque wrench"})

	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "SN-4471-XQ")
	checkpoint(t, ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, logs = openLogged(t, s, dir)
	defer ix.Close()
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash || ix.dirty {
		t.Errorf("reopen after checkpoint and close: %+v, dirty %v; logs:\n%s", r, ix.dirty, logs)
	}
}

// TestCheckpointRefusesWhatItCannotSave: an index in memory, one never
// attached, one closed, and an ended context give errors, not panics
// or writes.
func TestCheckpointRefusesWhatItCannotSave(t *testing.T) {
	ctx := context.Background()
	_, mem := openIndexed(t)
	if _, err := mem.Checkpoint(ctx); err == nil {
		t.Error("checkpoint of an index in memory: no error")
	}

	dir := t.TempDir()
	never, err := OpenDisk(Options{Dir: dir + "/keyword"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := never.Checkpoint(ctx); err == nil {
		t.Error("checkpoint of an index not attached: no error")
	}
	if err := never.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := never.Checkpoint(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("checkpoint of an index never attached, closed: %v, want ErrClosed", err)
	}

	s := openGraph(t, dir)
	fixture(t, s)
	ix, err := Open(s, Options{Dir: dir + "/keyword"})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if info, err := ix.Checkpoint(ended); !errors.Is(err, context.Canceled) || info.Written {
		t.Errorf("checkpoint with an ended context: %+v %v, want context.Canceled", info, err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Checkpoint(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("checkpoint after Close: %v, want ErrClosed", err)
	}
}

// TestCheckpointsRacingWritesAndClose: checkpoints taken while a writer
// commits and Close runs neither deadlock nor write after bleve closed:
// each succeeds or finds the index closed, and the close still marks
// the index clean, with every commit in it.
func TestCheckpointsRacingWritesAndClose(t *testing.T) {
	dir := t.TempDir()
	s := openGraph(t, dir)
	ix, err := Open(s, Options{Dir: dir + "/keyword"})
	if err != nil {
		t.Fatal(err)
	}
	const commits = 30
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range commits {
			fact(t, s, ns, fmt.Sprintf("crate %d", i), "holds", fmt.Sprintf("part %d", i), fmt.Sprintf("LOT-%04d", i))
		}
	}()
	errs := make(chan error, 64)
	var cps sync.WaitGroup
	for range 3 {
		cps.Add(1)
		go func() {
			defer cps.Done()
			for {
				_, err := ix.Checkpoint(context.Background())
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	done := make(chan error, 1)
	go func() { done <- ix.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close racing checkpoints did not return")
	}
	cps.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("checkpoint racing Close: %v, want ErrClosed", err)
		}
	}
	ix, logs := openLogged(t, s, dir)
	defer ix.Close()
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash {
		t.Errorf("reopen after Close: %+v; logs:\n%s", r, logs)
	}
	if hits := search(t, ix, ns, fmt.Sprintf("LOT-%04d", commits-1)); len(hits) != 1 {
		t.Errorf("the last commit: %v", hitIDs(hits))
	}
}
