package keyword

import (
	"context"
	"sync"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// The store subscription only queues a committed batch's changes; a
// worker goroutine indexes them, several batches in one bleve batch.
// Indexing thus leaves the writer's commit path (bleve analyses every
// changed text), while readers still see every commit: Search, Len and
// Close first wait for what was queued before them.
//
// The worker lingers: once changes are queued it waits up to linger
// for more, until lingerItems records or half the queue have gathered
// or a reader waits (a reader never waits for the linger). Every bleve
// batch builds a segment in memory (buffers of a few hundred KB) that
// later merges rewrite: at a steady stream of small commits, one
// segment per commit was a large share of what each commit allocated,
// and allocation brings the collections whose mark phases make the
// visibility tail (BENCHMARKS.md, thirty-second round).
//
// The queue holds at most maxQueued batches; a writer that finds it
// full waits (back-pressure).

const (
	maxQueued   = 64
	lingerItems = 1024
)

// linger is how long the worker waits for more changes (a variable
// for tests).
var linger = 100 * time.Millisecond

// queue is the changes committed and not yet indexed.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []particle.Changes
	items   int    // the records pending holds
	queued  uint64 // batches ever queued
	done    uint64 // batches indexed
	readers int    // sync calls waiting
	runs    int    // bleve batches the worker wrote (applyAll calls)
	stopped bool
	started bool // the worker runs (Attach started it)
	exited  chan struct{}
}

func newQueue() *queue {
	q := &queue{exited: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// enqueue is the store subscription (on the writer's goroutine).
func (ix *Index) enqueue(ch particle.Changes) {
	n := len(ch.Nodes) + len(ch.Edges) + len(ch.Episodes) + len(ch.RemovedNodes) + len(ch.RemovedEdges)
	if n == 0 {
		return
	}
	q := ix.q
	q.mu.Lock()
	for len(q.pending) >= maxQueued && !q.stopped {
		q.cond.Wait()
	}
	if !q.stopped {
		q.pending = append(q.pending, ch)
		q.items += n
		q.queued++
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

// gathering reports whether the worker should wait for more changes
// before indexing what is pending. q.mu is held.
func (q *queue) gathering() bool {
	return !q.stopped && q.readers == 0 && q.items < lingerItems && len(q.pending) < maxQueued/2
}

// work indexes queued changes until the queue stops and is empty.
func (ix *Index) work() {
	q := ix.q
	defer close(q.exited)
	for {
		q.mu.Lock()
		for len(q.pending) == 0 && !q.stopped {
			q.cond.Wait()
		}
		if q.gathering() {
			// A timer ends the wait at the latest after linger.
			late := false
			t := time.AfterFunc(linger, func() {
				q.mu.Lock()
				late = true
				q.cond.Broadcast()
				q.mu.Unlock()
			})
			for !late && q.gathering() {
				q.cond.Wait()
			}
			t.Stop()
		}
		batch := q.pending
		q.pending, q.items = nil, 0
		q.mu.Unlock()
		if len(batch) == 0 {
			return // stopped, nothing left
		}
		ix.applyAll(batch)
		q.mu.Lock()
		q.runs++
		q.done += uint64(len(batch))
		q.cond.Broadcast()
		q.mu.Unlock()
	}
}

// sync waits until every batch queued before the call is indexed.
func (ix *Index) sync() { _ = ix.syncContext(context.Background()) }

// syncContext is sync that stops waiting when ctx ends, with its error
// (the worker still indexes what was queued).
func (ix *Index) syncContext(ctx context.Context) error {
	q := ix.q
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.queued
	if q.done >= target {
		return nil
	}
	if ctx.Done() != nil {
		// Wakes the wait below (which holds q.mu until it waits, so
		// the broadcast cannot come between the check and the wait).
		stop := context.AfterFunc(ctx, func() {
			q.mu.Lock()
			q.cond.Broadcast()
			q.mu.Unlock()
		})
		defer stop()
	}
	q.readers++
	q.cond.Broadcast() // a lingering worker indexes at once
	for q.done < target && ctx.Err() == nil {
		q.cond.Wait()
	}
	q.readers--
	if q.done < target {
		return ctx.Err()
	}
	return nil
}

// stop indexes what is queued, then ends the worker; later commits are
// not followed.
func (ix *Index) stop() {
	q := ix.q
	q.mu.Lock()
	q.stopped = true
	started := q.started
	q.cond.Broadcast()
	q.mu.Unlock()
	if started {
		<-q.exited
	}
}

// startWorker starts the goroutine that indexes queued batches.
func (ix *Index) startWorker() {
	ix.q.mu.Lock()
	ix.q.started = true
	ix.q.mu.Unlock()
	go ix.work()
}
