package planner

import (
	"context"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// returns reports whether fn returns within d (a bound for a broken
// Yield to hang against, not a measure of speed).
func returns(fn func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestPriorityNilGivesNoPriority(t *testing.T) {
	var p *Priority
	if NewPriority(0) != nil {
		t.Fatal("NewPriority(0) is not nil")
	}
	p.Enter()
	if !returns(p.Yield, 10*time.Second) {
		t.Fatal("a nil Priority's Yield blocked")
	}
	p.Leave()
	if n, d := p.Waited(); n != 0 || d != 0 {
		t.Fatalf("a nil Priority waited %d times (%v)", n, d)
	}
}

func TestPriorityYieldWaitsForTheRunningCalls(t *testing.T) {
	p := NewPriority(time.Hour) // only the calls' end closes the window
	if !returns(p.Yield, 10*time.Second) {
		t.Fatal("Yield blocked with no call running")
	}
	p.Enter()
	p.Enter() // a second call while the first runs
	yielded := make(chan struct{})
	go func() { p.Yield(); close(yielded) }()
	p.Leave()
	select {
	case <-yielded:
		t.Fatal("Yield returned while a call still ran")
	case <-time.After(50 * time.Millisecond):
	}
	p.Leave()
	select {
	case <-yielded:
	case <-time.After(10 * time.Second):
		t.Fatal("Yield still blocked after the calls ended")
	}
	if n, _ := p.Waited(); n != 1 {
		t.Fatalf("Waited counts %d waits, want 1", n)
	}
}

func TestPriorityWindowEndsAtItsDeadline(t *testing.T) {
	p := NewPriority(20 * time.Millisecond)
	p.Enter() // a call that runs on past the window
	if !returns(p.Yield, 10*time.Second) {
		t.Fatal("Yield blocked past the window's deadline")
	}
	p.Leave()
}

// Once a window closes, none opens for as long as it stayed open: the
// background keeps half the time under a planner that never rests.
func TestPriorityWindowsLeaveHalfTheTime(t *testing.T) {
	p := NewPriority(time.Hour)
	clock := time.Unix(1_800_000_000, 0)
	p.now = func() time.Time { return clock }

	p.Enter()
	if !p.open.Load() {
		t.Fatal("the first call opened no window")
	}
	clock = clock.Add(3 * time.Millisecond)
	p.Leave() // the window was open 3 ms
	if p.open.Load() {
		t.Fatal("the window stayed open with no call running")
	}
	clock = clock.Add(2 * time.Millisecond)
	p.Enter()
	if p.open.Load() {
		t.Fatal("a window opened 2 ms after one of 3 ms closed")
	}
	if !returns(p.Yield, 10*time.Second) {
		t.Fatal("Yield blocked with no window open")
	}
	p.Leave()
	clock = clock.Add(time.Millisecond)
	p.Enter()
	if !p.open.Load() {
		t.Fatal("no window opened 3 ms after one of 3 ms closed")
	}
	w := p.window
	p.expire(w) // its deadline
	if p.open.Load() {
		t.Fatal("the window outlived its deadline")
	}
	p.expire(w) // a late timer of a closed window changes nothing
	p.Leave()
}

// The indexer gives way to a running planner call: a committed edge
// reaches the vector index only once the call leaves.
func TestIndexerGivesWayToThePlanner(t *testing.T) {
	f := newFixture(t, false)
	idx, ix := countingIndexer(t, f)
	p := NewPriority(time.Hour)
	ix.GiveWayTo(p)
	p.Enter()
	e := f.fact(particle.EdgeCausal, "cup", "spills", "table", "", t0, 0.9)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ix.Sync(ctx); err == nil {
		t.Fatal("the indexer indexed a batch while a planner call ran")
	}
	p.Leave()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ix.Sync(ctx); err != nil {
		t.Fatalf("the indexer did not catch up once the call left: %v", err)
	}
	if hits := idx.Search(e.Embedding, 1, nil); len(hits) != 1 || hits[0].ID != e.Seq {
		t.Fatalf("the edge committed during the call is not indexed: %v", hits)
	}
	if n, _ := p.Waited(); n == 0 {
		t.Fatal("Waited counts no wait")
	}
}

// BenchmarkPriorityEnterLeave is what a planner call pays for the
// priority it gives itself, calls back to back (a window opens for
// about every other call).
func BenchmarkPriorityEnterLeave(b *testing.B) {
	p := NewPriority(5 * time.Millisecond)
	for b.Loop() {
		p.Enter()
		p.Leave()
	}
}
