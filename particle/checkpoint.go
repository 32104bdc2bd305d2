package particle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints bound what a start after a crash catches up with.
//
// A clean Close writes the view snapshot, and a start that follows a
// crash loads the snapshot the dead run left and catches it up with what
// that run committed (catchup.go). The catch-up costs in proportion to
// what was written: on the 1M-edge store, 191k records written since the
// snapshot took 8.7 s to catch the view up, against 2-3 s to load the
// snapshot. A daemon that runs for days between clean stops would catch
// up days of writes. A checkpoint writes the view snapshot while the
// store serves and commits go on, as of one Badger read transaction, so
// that the next start after a crash catches up only what was written
// after it.
//
// The checkpoint replaces the snapshot the start set aside (the one the
// view's strings and embeddings stay mapped from: removed, the file stays
// until the process ends) and an earlier checkpoint. It scans Badger
// with the workers it is given, and stops once its context ends or the
// store closes.

// ErrNoSnapshots is Checkpoint's error for a store that keeps no view
// snapshot (in memory, or opened with Options.ViewSnapshot off).
var ErrNoSnapshots = errors.New("particle: the store keeps no view snapshot")

// checkpoints is a store's record of its view snapshot on disk.
type checkpoints struct {
	// mu is held by a checkpoint's write and by Close's; cancel ends
	// the checkpoint being written (Close calls it first).
	mu     sync.Mutex
	cancel atomic.Pointer[context.CancelFunc]
	// written counts the records committed (written or deleted) since
	// Open, and the records the catch-up at Open read; covered is its
	// value that the snapshot on disk holds. onDisk reports whether
	// there is one (the one loaded, set aside, or a checkpoint).
	written, covered atomic.Int64
	onDisk           atomic.Bool
	// bytes is the size of the last snapshot written or loaded (0:
	// unknown).
	bytes atomic.Int64
}

// countCommitted adds what a committed batch changed to the records
// written.
func (c *checkpoints) countCommitted(ch Changes) {
	c.written.Add(int64(len(ch.Nodes) + len(ch.Edges) + len(ch.Episodes) + len(ch.RemovedNodes) + len(ch.RemovedEdges)))
}

// RecordsSinceSnapshot returns the records committed (each write or
// deletion of a node, edge or episode) that the view snapshot on disk
// does not hold, and whether there is one at all: none until a
// checkpoint when the view was loaded from Badger, or always for a
// store without snapshots. A start that caught up counts what it read.
func (s *Store) RecordsSinceSnapshot() (int64, bool) {
	c := &s.ckpt
	return c.written.Load() - c.covered.Load(), c.onDisk.Load()
}

// RecordsCommitted returns how many records were committed since Open
// (each write or deletion of a node, edge or episode), counting those
// the view caught up with at Open.
func (s *Store) RecordsCommitted() int64 { return s.ckpt.written.Load() }

// Checkpoint is what a checkpoint wrote.
type Checkpoint struct {
	// Version is the Badger version the snapshot holds everything up to.
	Version uint64
	// Bytes is the snapshot's size.
	Bytes int64
	// Records is how many records committed since the snapshot before it
	// it holds (RecordsSinceSnapshot as it began).
	Records int64
	// Took is how long it took.
	Took time.Duration
}

// Checkpoint writes the view snapshot while the store serves, scanning
// Badger with workers goroutines (a daemon gives one, leaving the other
// cores to the planner and ingest), so that a start after a crash
// catches up only what is committed after it. Commits go on meanwhile.
// It fails with [ErrNoSnapshots] for a store without snapshots, with
// [ErrClosed] after Close, with ctx's error once ctx ends or Close
// begins, and when the disk lacks the room: before it writes, free space
// under the last snapshot's size; after, free space under the new one's
// (which is then removed, as Close removes it).
func (s *Store) Checkpoint(ctx context.Context, workers int) (Checkpoint, error) {
	if !s.snapshots() {
		return Checkpoint{}, ErrNoSnapshots
	}
	c := &s.ckpt
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Close marks the store closed, then cancels and waits for mu: the
	// cancel is in place before closed is read, so one of the two sees
	// the other.
	c.cancel.Store(&cancel)
	defer c.cancel.Store(nil)
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return Checkpoint{}, ErrClosed
	}
	t := time.Now()
	path := ViewSnapshotPath(s.opts.Dir)
	if free, ok := freeSpace(s.opts.Dir); ok && free < uint64(c.bytes.Load()) {
		return Checkpoint{}, fmt.Errorf("particle: checkpoint: %d bytes free, the last view snapshot took %d", free, c.bytes.Load())
	}
	s.v.awaitLinks() // the ends are the adjacency's
	base := c.written.Load()
	records := base - c.covered.Load()
	ends := func() []edgeEnds {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return slices.Clone(s.v.ends)
	}
	size, version, err := writeViewSnapshot(ctx, s.db, path, ends, workers)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("particle: checkpoint: %w", err)
	}
	if free, ok := freeSpace(s.opts.Dir); ok && free < uint64(size) {
		s.dropViewSnapshot()
		c.onDisk.Store(false)
		return Checkpoint{}, fmt.Errorf("particle: checkpoint removed: %d bytes free, less than the %d it took", free, size)
	}
	// The snapshot set aside at the start is older: a crash start
	// would load this one first (ViewSnapshotToLoad).
	removeFiles(s.log, path+loadedSuffix)
	c.covered.Store(base)
	c.onDisk.Store(true)
	c.bytes.Store(size)
	return Checkpoint{Version: version, Bytes: size, Records: records, Took: time.Since(t)}, nil
}

// stopCheckpoint ends a checkpoint being written and waits for it (Close
// then writes its own snapshot).
func (c *checkpoints) stopCheckpoint() {
	if cancel := c.cancel.Load(); cancel != nil {
		(*cancel)()
	}
	c.mu.Lock()
	c.mu.Unlock() //nolint:staticcheck // waits for the checkpoint's end
}

// noteLoaded records the snapshot a load read from file (with its
// catch-up's records, which it lacks).
func (c *checkpoints) noteLoaded(file string, caughtUp int64) {
	c.onDisk.Store(true)
	c.written.Store(caughtUp)
	if st, err := os.Stat(file); err == nil {
		c.bytes.Store(st.Size())
	}
}
