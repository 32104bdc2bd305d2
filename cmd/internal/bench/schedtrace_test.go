package bench

import (
	"bytes"
	"context"
	"runtime/trace"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestSummarizeTraceSplitsTheWritersStages traces batches committed to a
// real store whose apply sleeps and then spins, and reads the trace
// back: the apply region holds the sleeps as blocked time and the spins
// as running time, the writer's other stages are there, and the CPU
// table names this test's goroutine.
func TestSummarizeTraceSplitsTheWritersStages(t *testing.T) {
	o := particle.DefaultOptions(t.TempDir())
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	sum, err := summarizeTrace(&buf, particle.RegionApply, particle.RegionEncode, particle.RegionCommit, particle.RegionPublish)
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
