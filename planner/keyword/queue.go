package keyword

import (
	"sync"

	"github.com/ctxgraph/ctxgraph/particle"
)

// The store subscription only queues a committed batch's changes; a
// worker goroutine indexes them, several batches in one bleve batch when
// they queue up. Indexing thus leaves the writer's commit path (bleve
// analyses every changed text), while readers still see every commit:
// Search, Len and Close first wait for what was queued before them.
// The queue holds at most maxQueued batches; a writer that finds it full
// waits (back-pressure).

const maxQueued = 16

// queue is the changes committed and not yet indexed.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []particle.Changes
	queued  uint64 // batches ever queued
	done    uint64 // batches indexed
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
	if len(ch.Nodes)+len(ch.Edges)+len(ch.Episodes)+len(ch.RemovedNodes)+len(ch.RemovedEdges) == 0 {
		return
	}
	q := ix.q
	q.mu.Lock()
	for len(q.pending) >= maxQueued && !q.stopped {
		q.cond.Wait()
	}
	if !q.stopped {
		q.pending = append(q.pending, ch)
		q.queued++
		q.cond.Broadcast()
	}
	q.mu.Unlock()
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
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		if len(batch) == 0 {
			return // stopped, nothing left
		}
		ix.applyAll(batch)
		q.mu.Lock()
		q.done += uint64(len(batch))
		q.cond.Broadcast()
		q.mu.Unlock()
	}
}

// sync waits until every batch queued before the call is indexed.
func (ix *Index) sync() {
	q := ix.q
	q.mu.Lock()
	for target := q.queued; q.done < target; {
		q.cond.Wait()
	}
	q.mu.Unlock()
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
