package daemon

import (
	"context"
	"io"
	"os"
	"testing"
)

func TestVectorIndexSnapshotAtCleanShutdownOnly(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, testConfig(dir))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	want := d.index.Len()
	before := answerShape(c.ask(redBlockQuery))
	if _, ok := d.index.(io.WriterTo); !ok || want == 0 {
		t.Fatalf("index %T with %d vectors, want a filled index that saves snapshots", d.index, want)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.vectorSnapshot()); err != nil {
		t.Fatalf("no snapshot after a clean shutdown: %v", err)
	}

	d2 := startDaemon(t, testConfig(dir))
	if got := d2.index.Len(); got != want {
		t.Errorf("loaded index holds %d vectors, want %d", got, want)
	}
	if _, err := os.Stat(d2.vectorSnapshot()); !os.IsNotExist(err) {
		t.Errorf("the snapshot must be consumed at start (a crash must not find it): %v", err)
	}
	if after := answerShape(connect(t, d2).ask(redBlockQuery)); after != before {
		t.Errorf("answer differs after reopening from the snapshot")
	}

	// A corrupt snapshot is not trusted: the index is rebuilt from the graph.
	d2.Shutdown(context.Background())
	if err := os.WriteFile(d2.vectorSnapshot(), []byte("not an index"), 0o644); err != nil {
		t.Fatal(err)
	}
	d3 := startDaemon(t, testConfig(dir))
	if got := d3.index.Len(); got != want {
		t.Errorf("rebuilt index holds %d vectors, want %d", got, want)
	}
}

func TestConcurrentPlannerRequestsOverNATS(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	want := answerShape(c.ask(redBlockQuery))
	shapes := make(chan string, 40)
	for i := 0; i < cap(shapes); i++ {
		go func() { shapes <- answerShape(c.ask(redBlockQuery)) }()
	}
	for i := 0; i < cap(shapes); i++ {
		if got := <-shapes; got != want {
			t.Fatalf("concurrent answer %d differs", i)
		}
	}
}
