package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestCheckpointWhileIngesting checkpoints a serving daemon while steps
// stream in, then ingests and forgets more. The checkpoint's view
// snapshot is the one a crash start would load, with only what came after
// it still to catch up; its vector snapshot, read back from disk and
// caught up from its stamp, holds every vector of the graph and finds
// each; the keyword documents were saved.
func TestCheckpointWhileIngesting(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	// The schedule's: never due here.
	cfg.Storage.Checkpoints.ViewRecords, cfg.Storage.Checkpoints.VectorRecords, cfg.Storage.Checkpoints.KeywordRecords = 1<<40, 1<<40, 1<<40
	d := startDaemon(t, cfg)
	c := connect(t, d)
	msgs := readMessages(t, "episodes.jsonl")
	third := len(msgs) / 3
	c.publishAll(msgs[:third])
	c.waitApplied()

	published := make(chan struct{})
	go func() {
		defer close(published)
		c.publishAll(msgs[third : 2*third])
	}()
	if err := d.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	<-published
	c.waitApplied()
	for _, part := range []string{partView, partVectors, partKeyword} {
		if got := gathered(t, d, "ctxgraph_checkpoints_total", map[string]string{"part": part, "result": "ok"}); got != 1 {
			t.Fatalf("%v %s checkpoints counted", got, part)
		}
	}
	graphDir := filepath.Join(cfg.Data, "graph")
	if got := particle.ViewSnapshotToLoad(graphDir); got != particle.ViewSnapshotPath(graphDir) {
		t.Fatalf("a crash start would load %q", got)
	}
	for _, p := range []string{d.vectorSnapshot(), vectorStampBeside(d.vectorSnapshot())} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("no vector snapshot after the checkpoint: %v", err)
		}
	}

	publishThenForget(t, c, msgs[2*third:], "red block")
	since, onDisk := d.store.RecordsSinceSnapshot()
	if !onDisk || since == 0 {
		t.Fatalf("%d records since the checkpoint (on disk %v)", since, onDisk)
	}

	// The vector snapshot as a crash start reads it.
	f, err := os.Open(d.vectorSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := readVectorIndex(d.cfg.Vectors.Index, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	at, err := readGeneration(vectorStampBeside(d.vectorSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	cu, want := catchUpAndFill(t, d, idx, at)
	if cu.written >= len(want) {
		// The first third's records not written again are the
		// checkpoint's.
		t.Fatalf("the catch-up from the checkpoint rewrote all %d vectors", cu.written)
	}
}

// gathered is the value of the daemon's counter or gauge name with the
// labels given (-1 when it has none).
func gathered(t *testing.T, d *Daemon, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := d.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestCheckpointsCountWhatIsOnDisk: a fresh daemon's parts lack the whole
// graph (nothing is on disk) and are due; after a clean restart every
// part's snapshot matches the graph, so none is behind.
func TestCheckpointsCountWhatIsOnDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Storage.Checkpoints.ViewRecords, cfg.Storage.Checkpoints.VectorRecords, cfg.Storage.Checkpoints.KeywordRecords = 1<<40, 1<<40, 1<<40
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	behind := func(d *Daemon, part string) float64 {
		return gathered(t, d, "ctxgraph_checkpoint_records_behind", map[string]string{"part": part})
	}
	for _, part := range []string{partView, partVectors} {
		if got, all := behind(d, part), float64(d.graphRecords()); got != all || all == 0 {
			t.Errorf("fresh daemon: %s behind by %v records, want the graph's %v", part, got, all)
		}
	}
	if got := behind(d, partKeyword); got <= 0 {
		t.Errorf("fresh daemon: keyword behind by %v records", got)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, cfg)
	for _, part := range []string{partView, partVectors, partKeyword} {
		if got := behind(d, part); got != 0 {
			t.Errorf("after a clean restart: %s behind by %v records", part, got)
		}
	}
}

// TestCheckpointBackoff: a part whose checkpoints fail is tried again a
// minute later, then after twice as long each time, up to half an hour;
// a success (a zero backoff) allows the next at once.
func TestCheckpointBackoff(t *testing.T) {
	var b backoff
	now := time.Unix(1_000_000, 0)
	if !b.allows(now) {
		t.Fatal("a part that never failed is not allowed")
	}
	for _, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute} {
		b.failed(now)
		if b.wait != want || b.allows(now.Add(want-time.Second)) || !b.allows(now.Add(want)) {
			t.Fatalf("after a failure: waits %v (allowed a second early %v), want %v", b.wait, b.allows(now.Add(want-time.Second)), want)
		}
	}
}

// TestCheckpointWaitsForALull: a due part is checkpointed in a lull of
// ingest, or at twice its pace while ingest runs on.
func TestCheckpointWaitsForALull(t *testing.T) {
	for _, c := range []struct {
		behind, every int64
		lull, want    bool
	}{
		{99, 100, true, false}, {100, 100, true, true}, {100, 100, false, false},
		{199, 100, false, false}, {200, 100, false, true}, {250, 100, true, true},
	} {
		if got := checkpointDue(c.behind, c.every, c.lull); got != c.want {
			t.Errorf("behind %d, every %d, lull %v: due %v, want %v", c.behind, c.every, c.lull, got, c.want)
		}
	}
}
