package planner

import (
	"sync"
	"sync/atomic"
	"time"
)

// Priority lets background work (decoding, applying and indexing what
// ingest brings) give way to planner calls. On two cores a plan shares
// the CPU with ingest: in the soak at 2,000 steps/s the planner's own
// p99 had a median of 26 ms over eight runs, and of 21 ms over nine with
// ingest giving way, the spreads overlapping (BENCHMARKS.md, forty-fourth
// round).
//
// A planner call opens a window, unless one is open; the window closes
// when no call is running, or maxWait after it opened. While it is open,
// [Priority.Yield] blocks. A window opens only once the time since the
// last one closed is at least as long as that one stayed open, so the
// background keeps at least half of the time however busy the planner
// is, and never waits longer than maxWait at a time.
//
// A nil *Priority gives no priority: its methods do nothing.
type Priority struct {
	maxWait time.Duration
	open    atomic.Bool // a window is open (read without mu by Yield)

	mu       sync.Mutex
	running  int           // planner calls running
	free     chan struct{} // closed when the open window closes
	opened   time.Time     // when the open window opened
	nextOpen time.Time     // no window opens before this
	window   uint64        // the open window's number, for its timer
	timer    *time.Timer
	waits    atomic.Int64 // Yield calls that waited
	waited   atomic.Int64 // nanoseconds they waited
	now      func() time.Time
}

// NewPriority returns a Priority whose windows last at most maxWait;
// nil if maxWait is not positive.
func NewPriority(maxWait time.Duration) *Priority {
	if maxWait <= 0 {
		return nil
	}
	return &Priority{maxWait: maxWait, now: time.Now}
}

// Enter counts a planner call in, opening a window if it may. Every
// Enter is followed by one Leave.
func (p *Priority) Enter() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running++; p.running != 1 || p.open.Load() {
		return
	}
	now := p.now()
	if now.Before(p.nextOpen) {
		return
	}
	p.window++
	p.free, p.opened = make(chan struct{}), now
	p.open.Store(true)
	w := p.window
	p.timer = time.AfterFunc(p.maxWait, func() { p.expire(w) })
}

// Leave counts a planner call out, closing the window when none runs.
func (p *Priority) Leave() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running--; p.running == 0 {
		p.closeLocked()
	}
}

// expire closes window w at its deadline, if it is still open.
func (p *Priority) expire(w uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.window == w {
		p.closeLocked()
	}
}

func (p *Priority) closeLocked() {
	if !p.open.Load() {
		return
	}
	p.open.Store(false)
	close(p.free)
	now := p.now()
	p.nextOpen = now.Add(now.Sub(p.opened))
	p.timer.Stop()
}

// Yield blocks while a window is open. Background work calls it between
// items, holding nothing a planner call needs.
func (p *Priority) Yield() {
	if p == nil || !p.open.Load() {
		return
	}
	p.mu.Lock()
	free, open := p.free, p.open.Load()
	p.mu.Unlock()
	if !open {
		return
	}
	t := time.Now()
	<-free
	p.waits.Add(1)
	p.waited.Add(int64(time.Since(t)))
}

// Waited reports how many Yield calls waited and for how long in all.
func (p *Priority) Waited() (waits int64, total time.Duration) {
	if p == nil {
		return 0, 0
	}
	return p.waits.Load(), time.Duration(p.waited.Load())
}
