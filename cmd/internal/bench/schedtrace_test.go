package bench

import (
	"bytes"
	"context"
	"runtime"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// openScratch opens a store in a temporary directory, without syncs,
// closed when the test ends.
func openScratch(t *testing.T) *particle.Store {
	t.Helper()
	o := particle.DefaultOptions(t.TempDir())
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSummarizeTraceSplitsTheWritersStages traces batches committed to a
// real store whose apply sleeps and then spins, and reads the trace
// back: the apply region holds the sleeps as blocked time and the spins
// as running time, the writer's other stages are there, and the CPU
// table names this test's goroutine.
func TestSummarizeTraceSplitsTheWritersStages(t *testing.T) {
	s := openScratch(t)
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("an execution trace is running already: %v", err)
	}
	const batches, sleep, spin = 5, 4 * time.Millisecond, 3 * time.Millisecond
	for i := range batches {
		_, err := s.Update(context.Background(), func(b *particle.Batch) error {
			time.Sleep(sleep)
			for t0 := time.Now(); time.Since(t0) < spin; {
			}
			return b.PutNode(&particle.Node{ID: string(rune('a' + i)), Type: particle.NodeEntity, Name: string(rune('a' + i))})
		})
		if err != nil {
			trace.Stop()
			t.Fatal(err)
		}
	}
	trace.Stop()
	sum, err := summarizeTrace(&buf, writerRegions()...)
	if err != nil {
		t.Fatal(err)
	}
	apply := sum.stages[particle.RegionApply]
	if got := apply[schedBlocked]; got < batches*sleep {
		t.Errorf("apply blocked %v, want at least the sleeps' %v (apply: %v)", got, batches*sleep, apply)
	}
	if got := apply[schedRunning] + apply[schedRunnable]; got < batches*spin {
		t.Errorf("apply running or runnable %v, want at least the spins' %v (apply: %v)", got, batches*spin, apply)
	}
	if got := apply.total(); got > 2*batches*(sleep+spin)+time.Second {
		t.Errorf("apply in all %v: far more than the batches took", got)
	}
	for _, r := range []string{particle.RegionEncode, particle.RegionCommit, particle.RegionPublish} {
		if sum.stages[r].total() == 0 {
			t.Errorf("no time in region %s", r)
		}
	}
	var mine time.Duration
	for _, g := range sum.cpu {
		if g.fn == "testing.tRunner" {
			mine += g.cpu
		}
	}
	if mine < batches*spin {
		t.Errorf("CPU of goroutines started in testing.tRunner %v, want at least the spins' %v (table %v)", mine, batches*spin, sum.cpu)
	}
	if sum.span < batches*(sleep+spin) {
		t.Errorf("trace span %v shorter than the batches", sum.span)
	}
}

// spinUntil keeps a CPU busy until stop is closed: what a writer waits
// behind, in TestSummarizeTraceNamesWhatTheWriterWaitedBehind.
func spinUntil(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
	}
}

// TestSummarizeTraceNamesWhatTheWriterWaitedBehind runs batches on one P
// beside a goroutine that spins: the writer's apply spins too, longer
// than a time slice, so the scheduler preempts it and it waits for the
// spinner's slice; the summary names the spinner among what it waited
// behind (and not the writer itself).
func TestSummarizeTraceNamesWhatTheWriterWaitedBehind(t *testing.T) {
	s := openScratch(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("an execution trace is running already: %v", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { spinUntil(stop); close(done) }()
	for i := range 3 {
		_, err := s.Update(context.Background(), func(b *particle.Batch) error {
			for t0 := time.Now(); time.Since(t0) < 40*time.Millisecond; {
			}
			return b.PutNode(&particle.Node{ID: string(rune('a' + i)), Type: particle.NodeEntity, Name: string(rune('a' + i))})
		})
		if err != nil {
			close(stop)
			trace.Stop()
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	trace.Stop()
	sum, err := summarizeTrace(&buf, writerRegions()...)
	if err != nil {
		t.Fatal(err)
	}
	var spinner time.Duration
	for _, g := range sum.waitedFor {
		if g.fn == "testing.tRunner" {
			t.Errorf("the writer is listed among what it waited behind: %v", sum.waitedFor)
		}
		if strings.Contains(g.fn, "TestSummarizeTraceNamesWhatTheWriterWaitedBehind") {
			spinner += g.cpu
		}
	}
	if spinner < time.Millisecond {
		t.Errorf("the spinner's CPU while the writer waited %v, want at least 1 ms (waited for: %v; apply %v)", spinner, sum.waitedFor, sum.stages[particle.RegionApply])
	}
}
