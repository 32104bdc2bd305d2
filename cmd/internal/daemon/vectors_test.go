package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/wave"
)

func TestVectorIndexSnapshotAtCleanShutdown(t *testing.T) {
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
	// It stays, stamped with the graph's generation it matches: a run
	// that dies before its shutdown leaves it to the next start to catch
	// up (TestVectorSnapshotCatchesUpWithTheGraph).
	at, err := readGeneration(vectorStampBeside(d2.vectorSnapshot()))
	if now, gerr := d2.store.Generation(); err != nil || gerr != nil || at != now {
		t.Errorf("snapshot stamped %+v (%v), the graph at %+v (%v)", at, err, now, gerr)
	}
	if d2.vectorsCaughtUp != -1 {
		t.Errorf("a snapshot of the graph's generation was caught up (%d)", d2.vectorsCaughtUp)
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

// TestVectorSnapshotCatchesUpWithTheGraph: an index saved at one
// generation of the graph, loaded after the graph has taken more
// episodes and forgotten an entity, as a start after a crash loads the
// snapshot the dead run left, is caught up (the vectors of what was
// written or deleted since dropped) and filled from the graph: it then
// holds the vectors the live index holds, each finding itself.
func TestVectorSnapshotCatchesUpWithTheGraph(t *testing.T) {
	ctx := context.Background()
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	msgs := readMessages(t, "episodes.jsonl")
	c.publishAll(msgs[:len(msgs)/2])
	c.waitApplied()
	if err := d.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	var saved bytes.Buffer
	if _, err := d.index.(io.WriterTo).WriteTo(&saved); err != nil {
		t.Fatal(err)
	}
	at, err := d.store.Generation()
	if err != nil {
		t.Fatal(err)
	}
	publishThenForget(t, c, msgs[len(msgs)/2:], "red block")

	idx, err := readVectorIndex(d.cfg.Vectors.Index, &saved)
	if err != nil {
		t.Fatal(err)
	}
	_, want := catchUpAndFill(t, d, idx, at)
	if d.index.Len() != len(want) {
		t.Fatalf("the live index holds %d vectors, the graph %d", d.index.Len(), len(want))
	}
	for seq := range want {
		if !idx.Has(seq) {
			t.Fatalf("caught-up index lacks seq %d", seq)
		}
	}

	// Saved at a generation the graph never had (ahead of it): not
	// matched, rebuilt.
	if _, err := catchUpIndex(d.store, idx, particle.Generation{Version: at.Version + 1<<40}); !errors.Is(err, errNotOfGraph) {
		t.Fatalf("a snapshot ahead of the graph: %v", err)
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

// TestShutdownWithPlannerRequestsQueued shuts the daemon down while
// planner requests wait for its responder workers: the shutdown
// completes, and every request sent before it is answered with a whole
// answer (the responders drain: an unsubscribe dropped 22 to 42 of the
// 48 here).
func TestShutdownWithPlannerRequestsQueued(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	body, err := json.Marshal(redBlockQuery)
	if err != nil {
		t.Fatal(err)
	}
	replies := make(chan *nats.Msg, 64)
	inbox := nats.NewInbox()
	if _, err := c.nc.ChanSubscribe(inbox, replies); err != nil {
		t.Fatal(err)
	}
	const asked = 48
	for range asked {
		if err := c.nc.PublishRequest("ctxgraph.planner.context", inbox, body); err != nil {
			t.Fatal(err)
		}
	}
	// Every request with the server before the shutdown begins: one
	// still in the client's buffer when the daemon stops subscribing
	// would get NATS's "no responders" (an empty 503), not the daemon's.
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	first := <-replies // the workers are busy
	done := make(chan error, 1)
	go func() { done <- d.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown did not return with requests queued")
	}
	got := []*nats.Msg{first}
	for more := true; more; {
		select {
		case m := <-replies:
			got = append(got, m)
		case <-time.After(200 * time.Millisecond):
			more = false
		}
	}
	for i, m := range got {
		var a planner.Answer
		if err := json.Unmarshal(m.Data, &a); err != nil || len(a.Nodes) == 0 {
			t.Fatalf("reply %d of %d is not an answer (%v; status %q): %.200s", i, len(got), err, m.Header.Get("Status"), m.Data)
		}
	}
	if len(got) != asked {
		t.Errorf("%d of %d requests answered before the shutdown", len(got), asked)
	}
}

// TestVectorIndexSplits: with vectors.split_by_agent and
// vectors.split_by_time (the defaults) the IVF is split both ways once
// the daemon has filled it, fresh or reopened from its snapshot (the
// splits read from theirs, saved beside it; filled when that is
// damaged), and same-agent and windowed answers are those of a daemon
// without the splits on the same graph.
func TestVectorIndexSplits(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	if !cfg.Vectors.SplitByAgent || !cfg.Vectors.SplitByTime || cfg.Vectors.Index != "ivf" {
		t.Fatalf("defaults: index %q, split_by_agent %v, split_by_time %v; want ivf, both splits",
			cfg.Vectors.Index, cfg.Vectors.SplitByAgent, cfg.Vectors.SplitByTime)
	}
	sameAgent := redBlockQuery
	sameAgent.SameAgent, sameAgent.Agent = true, "ur5-alpha"
	windowed := redBlockQuery
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	windowed.TimeWindow = &planner.TimeWindow{From: at.Add(-30 * time.Minute), To: at.Add(20 * time.Minute)}
	asked := func(c *controller) string {
		return answerShape(c.ask(sameAgent)) + "\n--- windowed\n" + answerShape(c.ask(windowed))
	}
	split := func(d *Daemon) { t.Helper(); awaitSplits(t, d) }
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	split(d)
	fresh := asked(c)
	if a := c.ask(windowed); len(a.Edges) == 0 {
		t.Fatal("the windowed query finds no edge: it tests nothing")
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	splits := d.splitsSnapshot()
	if _, err := os.Stat(splits); err != nil {
		t.Fatalf("no splits snapshot after a clean shutdown: %v", err)
	}

	d2 := startDaemon(t, cfg) // from the snapshots
	split(d2)
	deadline := time.Now().Add(30 * time.Second)
	for !d2.SplitsFromSnapshot() {
		if time.Now().After(deadline) {
			t.Fatal("splits not read from their snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Kept beside the index's snapshot, for a start after a crash.
	if _, err := os.Stat(splits); err != nil {
		t.Fatalf("the splits snapshot after it was read: %v", err)
	}
	if got := asked(connect(t, d2)); got != fresh {
		t.Errorf("answers after a reopen differ:\n%s\nwant\n%s", got, fresh)
	}
	d2.Shutdown(context.Background())

	// A damaged splits snapshot: the splits are filled from the index.
	raw, err := os.ReadFile(splits)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x55
	if err := os.WriteFile(splits, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	d2 = startDaemon(t, cfg)
	split(d2)
	if d2.SplitsFromSnapshot() {
		t.Error("splits read from a damaged snapshot")
	}
	if got := asked(connect(t, d2)); got != fresh {
		t.Errorf("answers with the splits filled after a damaged snapshot differ:\n%s\nwant\n%s", got, fresh)
	}
	d2.Shutdown(context.Background())

	cfg.Vectors.SplitByAgent, cfg.Vectors.SplitByTime = false, false
	d3 := startDaemon(t, cfg)
	if x := d3.index.(*wave.IVF); x.SplitReady() || x.TimeSplitReady() {
		t.Fatal("split with split_by_agent and split_by_time false")
	}
	if got := asked(connect(t, d3)); got != fresh {
		t.Errorf("answers without the splits differ:\n%s\nwant\n%s", got, fresh)
	}
}

// awaitSplits waits for both of the daemon's IVF splits to be ready.
func awaitSplits(t *testing.T, d *Daemon) {
	t.Helper()
	x, ok := d.index.(*wave.IVF)
	if !ok {
		t.Fatalf("index %T, want *wave.IVF", d.index)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !x.SplitReady() || !x.TimeSplitReady() {
		if time.Now().After(deadline) {
			t.Fatalf("the IVF's splits are not ready 30 s after the start: by agent %v, by time %v", x.SplitReady(), x.TimeSplitReady())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRestartKeepsTheVectorSnapshot: a daemon stopped with nothing
// written since its start keeps the vector snapshot and the splits
// beside it as they are, however soon it stops (a snapshot written
// again then held only the splits ready by then: none while they were
// still being read, and the next start filled them from the index); a
// splits snapshot lacking a split is written again once the split is
// ready, and a write to the graph makes the shutdown write both.
func TestRestartKeepsTheVectorSnapshot(t *testing.T) {
	cfg := testConfig(t.TempDir())
	d, msgs := savedWithSplits(t, cfg)
	index, splits := d.vectorSnapshot(), d.splitsSnapshot()
	stat := func() (os.FileInfo, os.FileInfo) {
		t.Helper()
		a, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(splits)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	saved := func() (agent, byTime bool) { t.Helper(); return splitsSaved(t, d) }
	// untouched reports whether b is a, not written since: the same file
	// with the same time and size. The inode alone does not tell, as a
	// file removed and another made just after may get its number.
	untouched := func(a, b os.FileInfo) bool {
		return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
	}

	i0, s0 := stat()
	d2 := startDaemon(t, cfg) // stopped at once: its splits may still be loading
	if err := d2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if i1, s1 := stat(); !untouched(i0, i1) || !untouched(s0, s1) {
		t.Fatal("a restart with nothing written rewrote the vector snapshot or its splits")
	}
	// The index's snapshot removed while a daemon runs: written again.
	d2 = startDaemon(t, cfg)
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	if err := d2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(index); err != nil {
		t.Fatalf("the vector snapshot, removed while the daemon ran, not written at its stop: %v", err)
	}
	d3 := startDaemon(t, cfg)
	awaitSplits(t, d3)
	deadline := time.Now().Add(30 * time.Second)
	for !d3.SplitsFromSnapshot() {
		if time.Now().After(deadline) {
			t.Fatal("after a quick restart the splits were not read from their snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d3.Shutdown(context.Background())

	// Splits saved without a split (as a shutdown before this change
	// left them): filled at the next start, then written once ready.
	x := d3.index.(*wave.IVF)
	if err := writeSnapshot(splits, func(w io.Writer) error {
		_, err := wave.NewIVF(x.Dim(), wave.IVFOptions{}).WriteSplitsTo(w)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if a, b := saved(); a || b {
		t.Fatalf("an index without splits saved splits by agent %v, by time %v", a, b)
	}
	d4 := startDaemon(t, cfg)
	awaitSplits(t, d4)
	if d4.SplitsFromSnapshot() {
		t.Fatal("splits read from a snapshot holding none")
	}
	d4.Shutdown(context.Background())
	if a, b := saved(); !a || !b {
		t.Fatalf("splits filled at the start, saved at the shutdown by agent %v, by time %v; want both", a, b)
	}

	// A write since the start: both written again.
	i0, s0 = stat()
	d5 := startDaemon(t, cfg)
	c := connect(t, d5)
	c.publishAll(msgs[len(msgs)-4:])
	c.waitApplied()
	awaitSplits(t, d5)
	if err := d5.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if i1, s1 := stat(); untouched(i0, i1) || untouched(s0, s1) {
		t.Fatal("the shutdown after a write kept the vector snapshot or its splits")
	}
}

// TestShutdownWaitsForTheSplitsRead: a daemon stopped while its splits
// are still being read from their snapshot, with a write since its
// start, lets the read finish and saves the splits whole beside the
// index (stopped, the read had left none to save, and the next start
// filled them from the index).
func TestShutdownWaitsForTheSplitsRead(t *testing.T) {
	cfg := testConfig(t.TempDir())
	_, msgs := savedWithSplits(t, cfg)
	release, held := make(chan struct{}), make(chan struct{})
	beforeSplitsLoad = func(ctx context.Context) {
		close(held)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	t.Cleanup(func() { beforeSplitsLoad = nil })
	d2 := startDaemon(t, cfg)
	<-held
	c := connect(t, d2)
	c.publishAll(msgs[len(msgs)-4:])
	c.waitApplied()
	stopped := make(chan error, 1)
	go func() { stopped <- d2.Shutdown(context.Background()) }()
	time.Sleep(100 * time.Millisecond) // the shutdown under way
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if agent, byTime := splitsSaved(t, d2); !agent || !byTime {
		t.Fatalf("splits saved by a shutdown during their read: by agent %v, by time %v; want both", agent, byTime)
	}
}

// savedWithSplits runs a daemon on cfg that takes the test episodes but
// their last four messages (returned, all of them) and stops once its
// splits are ready: its data then holds the vector snapshot and both
// splits beside it.
func savedWithSplits(t *testing.T, cfg Config) (*Daemon, []*rlds.Message) {
	t.Helper()
	d := startDaemon(t, cfg)
	c := connect(t, d)
	msgs := readMessages(t, "episodes.jsonl")
	c.publishAll(msgs[:len(msgs)-4])
	c.waitApplied()
	awaitSplits(t, d)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if agent, byTime := splitsSaved(t, d); !agent || !byTime {
		t.Fatalf("a shutdown with the splits ready saved them by agent %v, by time %v; want both", agent, byTime)
	}
	return d, msgs
}

// splitsSaved reads which splits the splits snapshot beside d's vector
// snapshot holds.
func splitsSaved(t *testing.T, d *Daemon) (agent, byTime bool) {
	t.Helper()
	f, err := os.Open(d.splitsSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	agent, byTime, err = wave.SplitsSaved(f, d.cfg.Embed.Dimensions)
	if err != nil {
		t.Fatal(err)
	}
	return agent, byTime
}

// catchUpAndFill catches idx, a vector snapshot saved at at, up with the
// daemon's graph and fills it as a start does; it fails t unless the
// catch-up dropped written and deleted vectors and the filled index
// holds every embedding of the graph and finds each. It returns the
// catch-up and those embeddings.
func catchUpAndFill(t *testing.T, d *Daemon, idx snapshotIndex, at particle.Generation) (vectorCatchUp, map[uint64][]float32) {
	t.Helper()
	cu, err := catchUpIndex(d.store, idx, at)
	if err != nil || cu.written == 0 || cu.deleted == 0 {
		t.Fatalf("caught up %d written, %d deleted: %v", cu.written, cu.deleted, err)
	}
	ix, err := planner.NewIndexer(d.store, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	want, _ := embeddings(d.store, idx.Dim())
	if idx.Len() != len(want) {
		t.Fatalf("caught-up index holds %d vectors, the graph %d", idx.Len(), len(want))
	}
	findsItself(d.store, idx, want, len(want), func(format string, a ...any) { t.Errorf(format, a...) })
	return cu, want
}

// publishThenForget publishes msgs, waits until they are applied, then
// forgets the entity name through the API and waits until the vector
// index has it all.
func publishThenForget(t *testing.T, c *controller, msgs []*rlds.Message, name string) {
	t.Helper()
	c.publishAll(msgs)
	c.waitApplied()
	id := particle.EntityID(particle.DefaultNamespace, particle.NodeEntity, name)
	if code := httpDo(t, c.d, "DELETE", "/v1/entities/"+id+"?why=test", nil, nil); code != 200 {
		t.Fatalf("forget: %d", code)
	}
	if err := c.d.WaitIndexed(context.Background()); err != nil {
		t.Fatal(err)
	}
}
