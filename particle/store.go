package particle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configures a Store. Start from DefaultOptions.
type Options struct {
	// Dir is the Badger directory. Required unless InMemory.
	Dir string
	// InMemory keeps everything in RAM (tests). Default false.
	InMemory bool
	// SyncWrites fsyncs every commit, so that what is acknowledged
	// survives a power cut. Default true.
	SyncWrites bool
	// ValueThreshold: values larger than this many bytes are kept in
	// Badger's value log, the LSM tree holding a pointer (see
	// badgerOptions). 0 keeps every value in the tree. DefaultOptions
	// sets DefaultValueThreshold. Ignored InMemory.
	ValueThreshold int
	// MemTableSize is the bytes of each of Badger's memtables: a full
	// one is written out as a table, a few hundred milliseconds of a
	// core at Badger's default 64 MiB, which gives way to the goroutines
	// waiting to run (the badgerfork's yields) but still slows
	// JetStream's delivery to ingest; a transaction may hold 15% of it.
	// DefaultOptions sets DefaultMemTableSize; 0 keeps Badger's default.
	// Ignored InMemory.
	MemTableSize int64
	// ValueLogFileSize is the bytes at which Badger starts a new value-
	// log file. Every Open reads the newest file whole, to find where
	// its last whole entry ends, before it can read anything else: a
	// smaller file bounds that read. DefaultOptions sets
	// DefaultValueLogFileSize; 0 keeps Badger's default (1 GiB).
	// Ignored InMemory.
	ValueLogFileSize int64
	// ViewSnapshot: Close writes the view's tables to a snapshot file
	// in Dir, and Open loads from it instead of scanning Badger, catching
	// up with what Badger holds written since (viewsnap.go, catchup.go).
	// DefaultOptions sets it. Ignored InMemory.
	ViewSnapshot bool
	// KeepDeletionMarkers: Close leaves the markers of deleted nodes and
	// edges (catchup.go) for whatever else was saved before it to catch
	// up with, such as a daemon's vector snapshot when a tool opens its
	// store. Ignored InMemory.
	KeepDeletionMarkers bool
	// CheckEmbeddingsLater: a load from the view snapshot leaves the
	// check of the edges' embeddings (which it does not read) to the
	// owner's call of Store.CheckEmbeddings, instead of starting it at
	// Open, so that it does not compete for the disk with what the owner
	// does before it serves (a daemon's index fill). Until then readers
	// of the view may meet an embedding damaged in the file.
	CheckEmbeddingsLater bool
	// ReadChangedSince is a Badger version older than the store's that
	// the owner will ask ChangedSince about once Open returns (a
	// daemon's vector snapshot to catch up after a crash), 0 for none.
	// Open reads that answer beside the view's load, and ChangedSince
	// then gives it without reading Badger again while nothing is
	// committed: on the serial path of a start after a crash that read
	// took 7.8 s for 191k records at 1M edges (BENCHMARKS.md, sixtieth
	// round). Ignored InMemory.
	ReadChangedSince uint64
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options for a store in dir.
func DefaultOptions(dir string) Options {
	return Options{Dir: dir, SyncWrites: true, ValueThreshold: DefaultValueThreshold,
		MemTableSize: DefaultMemTableSize, ValueLogFileSize: DefaultValueLogFileSize, ViewSnapshot: true}
}

func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func (o Options) validate() error {
	var errs []error
	if o.Dir == "" && !o.InMemory {
		errs = append(errs, errors.New("particle: options: Dir is required unless InMemory is set"))
	}
	if o.Dir != "" && o.InMemory {
		errs = append(errs, errors.New("particle: options: Dir and InMemory are exclusive"))
	}
	if o.ValueThreshold < 0 || o.ValueThreshold > maxValueThreshold {
		errs = append(errs, fmt.Errorf("particle: options: ValueThreshold %d outside 0..%d", o.ValueThreshold, maxValueThreshold))
	}
	if o.ValueLogFileSize != 0 && (o.ValueLogFileSize < minValueLogFileSize || o.ValueLogFileSize >= maxValueLogFileSize) {
		errs = append(errs, fmt.Errorf("particle: options: ValueLogFileSize %d outside %d..%d", o.ValueLogFileSize, minValueLogFileSize, maxValueLogFileSize-1))
	}
	return errors.Join(errs...)
}

// Changes are what one committed batch wrote, as the view now holds it.
type Changes struct {
	Nodes []*Node
	Edges []*Edge
	// EdgeFacts are the facts of Edges, one for one, as the view holds
	// them (EdgeFactsOf, NS set): computed once where they are published.
	EdgeFacts []EdgeFacts
	Episodes  []*Episode
	// RemovedNodes and RemovedEdges were deleted by the batch.
	RemovedNodes []*Node
	RemovedEdges []*Edge
}

// Store is the particle graph: Badger holds it durably, and a
// memory-resident view serves reads without touching disk.
//
// A Store is safe for concurrent use. Writes are serialised (one batch,
// one Badger transaction, at a time); reads never wait for a batch to
// commit, only for the moment its results are published to the view.
type Store struct {
	db   *badger.DB
	opts Options
	log  *slog.Logger
	// seqNext is the next compact id (seq) a batch hands out, and
	// seqSaved the one the last committed batch stored (metaKey("seq"),
	// big-endian, as Badger's own sequences store it): a batch writes its
	// ids' high-water mark in its own transaction, so that no id needs a
	// write of its own and a failed batch's ids are handed out again.
	// The writer's, under writeMu.
	seqNext, seqSaved uint64

	writeMu sync.Mutex // serialises Update
	slab    *valueSlab // the buffers of a batch's values (see valueSlab); under writeMu
	// spareMaps are the last batch's maps, emptied, for the next one
	// (batchMaps); under writeMu.
	spareMaps batchMaps
	// txnKeys is how many keys the last batch set: the next one's
	// transaction makes room for as many (badger.Txn.Reserve), as
	// consecutive ingest batches are alike. Under writeMu.
	txnKeys int
	written writtenCounter
	updates updateTimer

	mu sync.RWMutex // guards v and counts
	// readersWaiting counts the readers (Read) waiting for mu: publish
	// ends its hold of the write lock at its next item when there are
	// any (batch.go).
	readersWaiting atomic.Int32
	v              *view
	counts         Counts
	closed         bool
	// fromSnapshot: the view was loaded from the view snapshot.
	fromSnapshot bool
	// behind: the snapshot was older than Badger, and the load caught up
	// with what Badger holds written since, caughtUp (catchup.go).
	behind   bool
	caughtUp CatchUp
	// changedSince keeps ChangedSince's last answer (catchup.go).
	changedSince changedSinceCache
	// readAhead is closed once Open's read for ReadChangedSince ends
	// (nil: none began).
	readAhead chan struct{}
	// openTimes are where Open's time went (OpenTimes).
	openTimes OpenTimes
	// openVersion is Badger's version when Open began: the store has
	// written nothing since while Badger is still at it.
	openVersion uint64
	// snapEdges are the edges' embeddings a load from the view snapshot
	// left unread, until Open starts their check (embCheck).
	snapEdges    *snapEdgeEmbeddings
	embCheckOnce sync.Once
	embCheck     *embeddingsCheck

	subMu sync.RWMutex
	subs  []func(Changes)

	pol policyState // rules and the compiled policy (policyrules.go)

	closeOnce sync.Once
	closeErr  error

	fault atomic.Pointer[error] // see InjectFault

	coder *coder // makes the edges' codes (coder.go)

	ckpt checkpoints // the view snapshot on disk (checkpoint.go)
}

// Open opens (or creates) the store described by o and loads its view.
func Open(o Options) (*Store, error) {
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	if !o.InMemory {
		readTableTails(o.Dir)
	}
	db, err := badger.Open(badgerOptions(o))
	if err != nil {
		return nil, fmt.Errorf("particle: open badger in %q: %w", o.Dir, err)
	}
	opened := time.Now()
	version := db.MaxVersion()
	seq, err := readSeq(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("particle: read sequence: %w", err)
	}
	s := &Store{db: db, opts: o, log: o.Logger, seqNext: seq, seqSaved: seq, v: newView(), slab: &valueSlab{}, openVersion: version}
	if v := o.ReadChangedSince; v > 0 && v < version && !o.InMemory {
		s.readChangedAhead(v)
	}
	loading := time.Now()
	if err := s.load(version); err != nil {
		s.awaitReadAhead()
		db.Close()
		return nil, err
	}
	s.openTimes = OpenTimes{Badger: opened.Sub(began), Lease: loading.Sub(opened), Load: time.Since(loading)}
	s.startCoder()
	if !o.CheckEmbeddingsLater {
		s.CheckEmbeddings()
	}
	return s, nil
}

// DefaultValueThreshold keeps node and edge records in the value log,
// as it kept them while they held their embeddings (1 KiB then). Format
// 3's records, a few hundred bytes without their embeddings, fell under
// 1 KiB into the tree: its memtables filled several times as fast, and
// their arenas and table builds, on the Go heap, added a garbage
// collection to a medium bench's ingest (8 against 7) and, at a steady
// 2,200 steps/s over 20 s, a longer visibility tail (p99 373-1,155 ms,
// median 768, in nine runs against 321-871, median 568, in six at 128;
// BENCHMARKS.md, twenty-seventh round). Aliases, applied marks and other
// small values stay in the tree.
const DefaultValueThreshold = 128

// DefaultMemTableSize is Options.MemTableSize by default: 16 MiB, a
// quarter of Badger's default. Writing a full memtable out as a table
// took a core for about 0.35 s at 64 MiB, and JetStream's delivery to
// the consumer slowed to a trickle meanwhile: at the medium bench's
// paced rate the visibility p99 of the steps clear of the collector's
// mark phases was 173-701 ms at 64 MiB and 154-211 ms at 16 MiB, the
// whole p99 412-836 against 233-576 ms (four interleaved pairs), bulk
// ingest unchanged (BENCHMARKS.md, thirty-fourth round). A transaction
// may then hold 2.4 MB of keys and pointers, several times an ingest
// batch's.
const DefaultMemTableSize = 16 << 20

// DefaultValueLogFileSize is the size at which Badger starts a new
// value-log file: 64 MiB, a sixteenth of Badger's default.
//
// Badger's Open reads the newest value-log file whole (it looks for the
// end of its last whole entry, to cut a torn write off), copying every
// entry, before the store can load anything. After ingest the newest
// file is the one ingest was filling, up to Badger's 1 GiB: the medium
// bench's reopen spent 1.33 of its 1.88 s reading 643 MB of it, and its
// copies, made while the start holds the collector off, stayed resident.
// At 64 MiB that read is at most about a tenth of a second. Three
// interleaved medium pairs (`ctxgraph bench run --phases reopen`):
// reopen 2.30-2.84 s against 0.80-1.24 s, RSS after it 1.77-1.79 GB
// against 1.14-1.15 GB; ingest, which starts a file every 64 MB written,
// was no slower (BENCHMARKS.md, fiftieth round).
const DefaultValueLogFileSize = 64 << 20

// Badger's bounds on a value-log file's size.
const (
	minValueLogFileSize = 1 << 20
	maxValueLogFileSize = 2 << 30
)

// maxValueThreshold is Badger's default threshold (1 MiB), which keeps
// every value of this store in the tree; Badger refuses larger ones.
const maxValueThreshold = 1 << 20

// badgerOptions are the Badger options of a store with options o, chosen
// by BenchmarkReopen and BenchmarkWrite (reopen_bench_test.go) for values
// of 1.5-4 KB (a 384-d embedding and its record) written in bulk:
//
//   - memtables of Options.MemTableSize (DefaultMemTableSize, 16 MiB),
//     a quarter of Badger's default, so that writing one out does not
//     hold a core for long;
//   - no conflict detection: one batch writes at a time (Update holds
//     the writer's lock through its commit), so there is nothing for it
//     to find, and it cost a map entry per key written and per key read
//     (BenchmarkApplyLongEpisode: about 1 KB less allocated per step);
//   - no block compression: the embeddings hardly compress, and snappy
//     cost about a fifth of the CPU of a write (compaction rebuilds
//     tables) and, decompressing every block, most of a reopen's scan;
//   - so no block cache either (Badger needs one only to keep blocks it
//     decompressed): reads come straight from the memory-mapped tables,
//     and a reopen's full scan does not churn 256 MB of cache. Tables an
//     older store wrote compressed still read, decompressed per block,
//     until compaction rewrites them;
//   - values over Options.ValueThreshold, DefaultValueThreshold (128
//     bytes) by default (node and edge records, their embeddings, stored
//     steps, episodes) go to the value log, so
//     compactions move 20-byte pointers
//     instead of rewriting kilobytes at every level. Measured with
//     `ctxgraph bench run --preset medium --phases=""`: 507 -> 308 µs of
//     CPU per ingested step, 2,211 -> 3,349 steps/s, visibility p99
//     1,211 -> 424 ms; the compaction share grows with the store (a
//     quarter of the CPU of a 1M-edge load kept in the tree). Reopen is
//     unchanged (BenchmarkReopen 200k: 1.00 s against 1.08 s). The cost
//     is disk: a replaced value leaves its old version in the value log
//     until value-log GC (storage.gc_interval) reclaims it, 1.2 GB
//     against 0.5 GB for the benchmark's 200k-edge store when every
//     re-observed node and edge went there whole (format 2). Since
//     their embeddings are written once, apart from their records
//     (format 3), the medium bench's graph takes 617 MB against 804 MB
//     (full runs).
func badgerOptions(o Options) badger.Options {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	bo := badger.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(o.SyncWrites).
		WithLogger(badgerLogger{lg.With("component", "badger")}).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false).
		WithCompression(options.None).
		WithBlockCacheSize(0)
	if !o.InMemory && o.MemTableSize > 0 {
		bo = bo.WithMemTableSize(o.MemTableSize)
	}
	if !o.InMemory && o.ValueLogFileSize > 0 {
		bo = bo.WithValueLogFileSize(o.ValueLogFileSize)
	}
	if !o.InMemory && o.ValueThreshold > 0 {
		// (An in-memory store has no value log: every value stays in
		// the tree, whatever its size.)
		bo = bo.WithValueThreshold(int64(o.ValueThreshold))
	}
	return bo
}

// Close saves the view snapshot (where the store keeps one) and closes
// Badger. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopEmbeddingsCheck()
		s.awaitReadAhead()
		s.v.awaitLinks() // no goroutine of the store outlives it
		s.stopCoder()
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.ckpt.stopCheckpoint()
		unwritten := s.fromSnapshot && !s.behind && s.db.MaxVersion() == s.openVersion && s.embeddingsMended() == 0
		if !s.opts.InMemory && !s.opts.KeepDeletionMarkers {
			if err := s.dropGoneMarkers(); err != nil {
				s.log.Warn("deletion markers not dropped", "err", err)
			}
		}
		if s.snapshots() {
			s.saveViewSnapshot(unwritten)
		}
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// OpenTimes are where Open's time went.
type OpenTimes struct {
	// Badger is Badger's open: its tables' and value-log files' opening,
	// and its read of the newest value-log file whole (see
	// DefaultValueLogFileSize).
	Badger time.Duration
	// Lease is the read of the sequence's next id (a write of its own
	// before the seventieth round's ids rode on the batches).
	Lease time.Duration
	// Load is the view's load, from the view snapshot or from Badger
	// (LoadedFromSnapshot). The adjacency is built after it, beside the
	// caller's next work (WaitLinked).
	Load time.Duration
}

// OpenTimes returns where Open's time went.
func (s *Store) OpenTimes() OpenTimes { return s.openTimes }

// Subscribe registers fn to be called, on the writer's goroutine, with
// the changes of every committed batch. fn must not call Update.
func (s *Store) Subscribe(fn func(Changes)) {
	s.subMu.Lock()
	s.subs = append(s.subs, fn)
	s.subMu.Unlock()
}

// snapshots reports whether the store keeps a view snapshot.
func (s *Store) snapshots() bool { return s.opts.ViewSnapshot && !s.opts.InMemory }

// load reads every node, edge and episode into the view: from the view
// snapshot if there is one taken at Badger version version, else from
// Badger, with values decoded in parallel (loadValues). Either puts them
// into the view in key order, as a serial scan would put them.
func (s *Store) load(version uint64) error {
	// The view is most of the heap and all of it stays reachable, and
	// the load makes little else: a collection while it grows finds
	// nothing to free. GC is off until the load ends (a memory limit
	// set with GOMEMLIMIT still applies); BenchmarkReopen measured 25%
	// less CPU than with GOGC=400, 40% less than with 100.
	// Format-1 values (JSON) leave garbage: the load ends its pause at
	// the first (PauseGC: GC comes back unless another pause holds it).
	resume := PauseGC()
	defer resume()
	legacy := resume
	fresh := func() *view {
		v := newView()
		presize(v, s.db, s.seqSaved)
		return v
	}
	v := fresh()
	var kinds loadCounts
	var left *snapEdgeEmbeddings
	var base uint64
	loaded := false
	var ahead *writtenAhead
	defer func() { ahead.wait() }() // read beside a load that failed: not used
	switch {
	case s.snapshots():
		ahead = s.readWrittenAhead(version, legacy)
		if kinds, left, base, loaded = s.loadViewSnapshot(v, version, legacy); !loaded {
			v = fresh()
		}
	case !s.opts.InMemory:
		s.dropViewSnapshot() // stale from the first write on
	}
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey("counts"))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(b []byte) error {
				_, err := decodeValue(b, &s.counts)
				return err
			}); err != nil {
				return fmt.Errorf("load counts: %w", err)
			}
		}
		if loaded && base < version {
			t := time.Now()
			w, beside, err := ahead.take(base)
			if !beside {
				w, err = readWritten(txn, base, legacy, true)
			}
			switch {
			case err == nil && w.empty():
				// Only keys outside the view's tables were written since
				// (a store of before the seventieth round leased ids at
				// every Open):
				// the snapshot holds the view, and a Close that writes
				// nothing may put it back stamped anew.
				s.log.Info("view snapshot older than the store, with no record written since", "since_version", base, "took", time.Since(t))
			case err == nil:
				cu := catchUp(v, w, &kinds)
				cu.Since = base
				s.behind, s.caughtUp = true, cu
				s.log.Info("view caught up with the store since its snapshot", "since_version", base,
					"nodes", cu.Nodes, "edges", cu.Edges, "episodes", cu.Episodes, "removed", cu.Removed,
					"read_beside_the_load", beside, "took", time.Since(t))
			case errors.Is(err, ErrDeletionsUnknown):
				s.log.Warn("view snapshot cannot catch up with the store; loading from the store", "since_version", base, "err", err)
				s.dropViewSnapshot()
				v, left, loaded = fresh(), nil, false
			default:
				return err
			}
		}
		if !loaded {
			var err error
			if kinds, err = loadValues(s.db, txn, v, legacy); err != nil {
				return err
			}
			if err := joinLoadedEdgeChunks(txn, v); err != nil {
				return err
			}
		}
		v.linkLoaded()
		return nil
	})
	if err != nil {
		return fmt.Errorf("particle: %w", err)
	}
	if err := s.loadPredicates(v); err != nil {
		return fmt.Errorf("particle: load predicates: %w", err)
	}
	if err := s.loadRedirects(v); err != nil {
		return fmt.Errorf("particle: load redirects: %w", err)
	}
	s.counts.ensure()
	// Node and edge counts are those of the view, whatever was recorded.
	s.counts.Nodes, s.counts.Edges = kinds.nodes, kinds.edges
	s.counts.Episodes = int64(len(v.episodes))
	s.v = v
	s.fromSnapshot = loaded
	if loaded {
		s.snapEdges = left // checked once the store is open
		cu := s.caughtUp
		s.ckpt.noteLoaded(ViewSnapshotPath(s.opts.Dir)+loadedSuffix, int64(cu.Nodes+cu.Edges+cu.Episodes+cu.Removed))
	}
	return nil
}

// IndexLoaded puts the loaded edges into the view's maps by id and by
// identity, which Open leaves to the first read or write that needs them
// (a look-up of an edge by id, a write): a daemon calls it in the
// background once it serves, so that those find it done. It is safe to
// call more than once, and concurrently with reads and writes.
func (s *Store) IndexLoaded() { s.v.indexLoaded() }

// EdgesIndexedByID reports whether the view's maps of edges by id and by
// identity hold every edge it holds: false from an Open that loaded
// edges until IndexLoaded, or the first read or write that needs those
// maps, has put them in. Readers that walk every edge without needing
// the maps (Reader.EdgesBySeq) leave it false.
func (s *Store) EdgesIndexedByID() bool { return !s.v.loadedPending.Load() }

// WaitLinked returns once the adjacency of the loaded edges is built:
// Open leaves it to a goroutine, so that what its caller does next (a
// daemon's vector index fill) runs beside it. Reads and writes of the
// adjacency wait for it on their own; a daemon waits before it serves.
func (s *Store) WaitLinked() { s.v.awaitLinks() }

// LoadedFromSnapshot reports whether Open loaded the view from the view
// snapshot rather than from Badger.
func (s *Store) LoadedFromSnapshot() bool { return s.fromSnapshot }

// CaughtUp reports whether Open loaded the view from a view snapshot
// older than Badger (one a run that died without its Close set aside)
// and then read what Badger holds written since, and what that was.
func (s *Store) CaughtUp() (CatchUp, bool) { return s.caughtUp, s.behind }

// presize makes the view's maps of edges as large as Badger's tables say
// the store is, so that the load does not grow them step by step (at 1M
// edges, rehashing took a third of the time the view's inserts did).
// The counts include older versions of rewritten keys not yet compacted
// away: an overestimate, by the size of a map's slots. Maps of nodes
// are left to grow: ingest rewrites a node at every sighting, so their
// key counts can be many times the nodes, and there are fewer of them.
func presize(v *view, db *badger.DB, nextSeq uint64) {
	keys := map[prefix]int{}
	for _, t := range db.Tables() {
		if len(t.Left) == 0 || len(t.Right) == 0 {
			continue
		}
		if l, r := prefix(t.Left[0]), prefix(t.Right[0]); l == r {
			keys[l] += int(t.KeyCount)
		} else {
			keys[l] += int(t.KeyCount) / 2
			keys[r] += int(t.KeyCount) / 2
		}
	}
	// The counts are estimates: a table spanning two prefixes is split
	// evenly, and the memtable is not counted. Under-sizing costs a full
	// rehash of the largest maps near the end of the load (0.8 s of a
	// 1M-edge reopen); a quarter more costs a few MB.
	const most = 1 << 26
	edges := min(keys[prefixEdge]+keys[prefixEdge]/4+4096, most)
	v.edges, v.identity = newEdgeIDs(edges), newIdentityIndex(edges)
	// The slices by seq reach the highest seq issued, which is below the
	// sequence's next id (Open read it): made that large once, they are
	// not copied as they grow (at 1M edges the copies were a fifth of the
	// serial put).
	if n := int(min(nextSeq, most)); n > 0 {
		v.nodeSeq, v.edgeSeq, v.episodeSeq = make([]*Node, 0, n), make([]*Edge, 0, n), make([]*Episode, 0, n)
		v.edgeFacts, v.edgeSal, v.edgeAgents = make([]EdgeFacts, 0, n), make([]EdgeSalience, 0, n), make([]agentSet, 0, n)
	}
}

// readSeq returns the sequence's next id as stored under
// metaKey("seq"), big-endian (0 in a new store). Stores written before
// the ids rode on the batches hold the end of a lease of Badger's
// sequence there: the ids up to it are skipped, as after a crash then.
func readSeq(db *badger.DB) (uint64, error) {
	var next uint64
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey("seq"))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(b []byte) error {
			if len(b) != 8 {
				return fmt.Errorf("%w: sequence value of %d bytes", ErrCorrupt, len(b))
			}
			next = binary.BigEndian.Uint64(b)
			return nil
		})
	})
	return next, err
}

// loadTables are the tables the view holds, in load order: edges refer
// to nodes, episodes to both.
var loadTables = []struct {
	p    prefix
	name string
}{{prefixNode, "nodes"}, {prefixEdge, "edges"}, {prefixEpisode, "episodes"}}

// loadChunk is a run of consecutive values of one table, in key order,
// decoded by a scanner and put into the view by load. Chunk idx of part
// part is the idx-th of that key range; last marks the range's final
// chunk (possibly empty).
type loadChunk struct {
	part     int
	idx      int
	last     bool
	nodes    []*Node
	edges    []*Edge
	facts    []EdgeFacts // of edges, computed by the scanner
	episodes []*Episode
	// apart lists the seqs of the chunk's nodes and edges whose
	// embeddings are stored apart (view.apart).
	apart []uint64
	snap  snapChunk // the values, copied for the view snapshot (scanner.sink)
	// mem is the view snapshot's mapping, whose records a mapped chunk
	// decodes (readChunk); stage is where its edges are decoded.
	mem   []byte
	stage *edgeStage
}

// chunkFacts recycles the loaded chunks' facts, which the put copies
// into the view (1M edges' worth, 50 MB, were garbage, each page of it
// fresh memory faulted in).
var chunkFacts sync.Pool

// loadChunkValues is how many values a chunk holds.
const loadChunkValues = 512

// loadPart is a key range of one table, scanned by one goroutine.
type loadPart struct {
	table  int    // index in loadTables
	lo, hi []byte // hi nil: to the end of the table
}

// loadValues scans the node, edge and episode tables, each split into
// key ranges that are read and decoded in parallel, and puts the results
// into v in key order.
// It counts the nodes and edges it puts, by type.
//
// legacy is called on reading a format-1 value.
func loadValues(db *badger.DB, txn *badger.Txn, v *view, legacy func()) (loadCounts, error) {
	workers := max(1, runtime.GOMAXPROCS(0))
	// More ranges than scanners, so that one long range does not leave
	// the others idle.
	return loadPartsInto(txn, loadParts(db, 4*workers), workers, v, legacy)
}

// loadPartsInto loads parts, which cover the loaded tables in key order,
// with n scanners.
func loadPartsInto(txn *badger.Txn, parts []loadPart, n int, v *view, legacy func()) (loadCounts, error) {
	put := newChunkPutter(v, len(parts))
	err := drainChunks(n, func(done chan<- *loadChunk, quit <-chan struct{}) error {
		sc := scanner{txn: txn, done: done, quit: quit, legacy: legacy}
		return sc.parts(parts, n)
	}, put.put)
	counts, finished := put.finish()
	if err != nil {
		return loadCounts{}, err
	}
	return counts, finished
}

// drainChunks runs produce, which sends chunks on done until quit
// closes, and calls fn on each chunk as it arrives. After fn's first
// error it closes quit and drops the rest; it returns once produce has.
func drainChunks(n int, produce func(done chan<- *loadChunk, quit <-chan struct{}) error, fn func(*loadChunk) error) error {
	done := make(chan *loadChunk, 4*n)
	quit := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		defer close(done)
		produced <- produce(done, quit)
	}()
	var err error
	for c := range done {
		if err != nil {
			continue
		}
		if err = fn(c); err != nil {
			close(quit)
		}
	}
	if err == nil {
		close(quit)
	}
	return errors.Join(err, <-produced)
}

// chunkPutter puts chunks into a view in key order, whatever order they
// arrive in: chunk idx of part p after every earlier one.
// The edges are kept for the view's maps by id and identity, which it
// fills later (view.indexLoaded).
type chunkPutter struct {
	v         *view
	parts     int
	part, idx int
	pending   map[[2]int]*loadChunk
	counts    loadCounts
}

func newChunkPutter(v *view, parts int) *chunkPutter {
	return &chunkPutter{v: v, parts: parts, pending: map[[2]int]*loadChunk{},
		counts: loadCounts{nodes: map[NodeType]int64{}, edges: map[EdgeType]int64{}}}
}

func (p *chunkPutter) put(c *loadChunk) error {
	if c.part < 0 || c.part >= p.parts {
		return fmt.Errorf("load: chunk of key range %d, of %d", c.part, p.parts)
	}
	p.pending[[2]int{c.part, c.idx}] = c
	for c := p.pending[[2]int{p.part, p.idx}]; c != nil; c = p.pending[[2]int{p.part, p.idx}] {
		delete(p.pending, [2]int{p.part, p.idx})
		if p.idx++; c.last {
			p.part, p.idx = p.part+1, 0
		}
		for _, n := range c.nodes {
			if p.v.putNode(n) {
				p.counts.nodes[n.Type]++
			}
		}
		for i, e := range c.edges {
			p.v.putLoadedEdge(e, &c.facts[i])
			p.counts.edges[e.Type]++
		}
		if len(c.edges) > 0 {
			p.v.loaded = append(p.v.loaded, c.edges)
			p.v.loadedPending.Store(true)
		}
		if c.facts != nil { // copied into the view: the next chunk's
			b := c.facts[:0]
			chunkFacts.Put(&b)
			c.facts = nil
		}
		for _, e := range c.episodes {
			p.v.putEpisode(e)
		}
		for _, seq := range c.apart {
			p.v.apart.set(seq, true)
		}
	}
	return nil
}

// finish checks that every key range was put and returns the counts.
func (p *chunkPutter) finish() (loadCounts, error) {
	if len(p.pending) != 0 || p.part != p.parts {
		return loadCounts{}, fmt.Errorf("load: %d of %d key ranges put, %d chunks left over", p.part, p.parts, len(p.pending))
	}
	return p.counts, nil
}

// loadCounts are the nodes and edges a load put into the view, by type
// (counted as they go in: counting the view afterwards took a sixth of
// a load's serial time).
type loadCounts struct {
	nodes map[NodeType]int64
	edges map[EdgeType]int64
}

// loadParts splits each loaded table into about n key ranges at the
// boundaries of Badger's tables, in key order.
func loadParts(db *badger.DB, n int) []loadPart {
	var starts [][]byte
	for _, t := range db.Tables() {
		if len(t.Left) > 8 {
			starts = append(starts, t.Left[:len(t.Left)-8]) // without the version
		}
	}
	slices.SortFunc(starts, bytes.Compare)
	starts = slices.CompactFunc(starts, bytes.Equal)
	var parts []loadPart
	for ti, t := range loadTables {
		var in [][]byte
		for _, k := range starts {
			if len(k) > 1 && k[0] == byte(t.p) {
				in = append(in, k)
			}
		}
		lo := []byte{byte(t.p)}
		for i := 1; i < n && len(in) > 0; i++ {
			cut := in[i*len(in)/n]
			if bytes.Compare(cut, lo) > 0 {
				parts = append(parts, loadPart{table: ti, lo: lo, hi: cut})
				lo = cut
			}
		}
		parts = append(parts, loadPart{table: ti, lo: lo})
	}
	return parts
}

// scanner reads and decodes key ranges in txn, sending chunks to done
// until quit closes.
type scanner struct {
	txn    *badger.Txn
	done   chan<- *loadChunk
	quit   <-chan struct{}
	legacy func() // called on a format-1 value
	// sink, when set, takes each value into its chunk instead of the
	// decoder (the view snapshot's writer copies them).
	sink func(c *loadChunk, p loadPart) func(b, vec []byte) error
}

// valueFunc is what takes each value of key range p, with the embedding
// stored apart for it (nil if none), into c.
func (sc scanner) valueFunc(c *loadChunk, p loadPart) func(b, vec []byte) error {
	if sc.sink != nil {
		return sc.sink(c, p)
	}
	return c.decoder(loadTables[p.table].p, sc.legacy)
}

// parts scans parts, at most n at a time.
func (sc scanner) parts(parts []loadPart, n int) error {
	sem := make(chan struct{}, n)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, p := range parts {
		select {
		case sem <- struct{}{}:
		case <-sc.quit:
			return nil
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = sc.part(i, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// part reads and decodes one key range into chunks. The decoders copy
// what they keep, so values are read in place from the memory-mapped
// tables (no prefetch, which would copy them first).
func (sc scanner) part(part int, p loadPart) error {
	t := loadTables[p.table]
	prefix := []byte{byte(t.p)}
	c := &loadChunk{part: part}
	dec, n := sc.valueFunc(c, p), 0
	send := func(last bool) bool {
		c.last = last
		select {
		case sc.done <- c:
		case <-sc.quit:
			return false
		}
		c = &loadChunk{part: part, idx: c.idx + 1}
		dec, n = sc.valueFunc(c, p), 0
		return true
	}
	it := sc.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var vecs *vectorJoin
	if t.p == prefixNode || t.p == prefixEdge {
		vecs = newVectorJoin(sc.txn, t.p)
		defer vecs.close()
	}
	var vec []byte
	value := func(b []byte) error { return dec(b, vec) } // one closure for the range
	for it.Seek(p.lo); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		if p.hi != nil && bytes.Compare(item.Key(), p.hi) >= 0 {
			break
		}
		if vecs != nil {
			var err error
			if vec, err = vecs.of(item.Key()); err != nil {
				return fmt.Errorf("load %s: %w", t.name, err)
			}
		}
		if err := item.Value(value); err != nil {
			return fmt.Errorf("load %s: %w", t.name, err)
		}
		if n++; n == loadChunkValues && !send(false) {
			return nil
		}
	}
	send(true)
	return nil
}

// presize makes room in c for n values of table p.
func (c *loadChunk) presize(p prefix, n int) {
	switch p {
	case prefixNode:
		c.nodes = slices.Grow(c.nodes, n)
	case prefixEdge:
		if c.facts == nil {
			if b, ok := chunkFacts.Get().(*[]EdgeFacts); ok {
				c.facts = *b
			}
		}
		c.edges, c.facts = slices.Grow(c.edges, n), slices.Grow(c.facts, n)
	default:
		c.episodes = slices.Grow(c.episodes, n)
	}
}

// decoder returns the function that decodes one value of table p, with
// its vector, into c, calling legacy first if the value is in format 1.
func (c *loadChunk) decoder(p prefix, legacy func()) func(b, vec []byte) error {
	return func(b, vec []byte) error { return c.add(p, b, vec, legacy, nil, false, false) }
}

// add decodes value b of table p, whose embedding stored apart is vec
// (nil if none), into c, calling legacy first if it is in format 1. With
// mapped, b is a record of the view snapshot's mapping: its embedding is
// emb instead of what b or vec hold (the snapshot keeps embeddings
// apart), unit says whether emb has unit length (an edge's facts are
// made without reading it), and a binary record's strings alias b (the
// mapping outlives them, and its records never change).
func (c *loadChunk) add(p prefix, b, vec []byte, legacy func(), emb []float32, mapped, unit bool) error {
	inBinary := isBinary(b)
	if len(b) > 0 && !inBinary {
		legacy()
	}
	switch p {
	case prefixNode:
		var n *Node
		var err error
		if mapped {
			var apart int
			if n, apart, err = decodeNodeV2(b, true); err == nil {
				n.Embedding, err = mappedVector(b, apart, emb)
				n = mappedMemOf(c.mem).packNode(n)
			}
		} else {
			n, err = decodeNodeAt(b, vec, false)
		}
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
		c.noteApart(b, n.Seq, n.Embedding)
		return nil
	case prefixEdge:
		var e *Edge
		var err error
		if mapped {
			e, err = c.decodeMappedEdge(b, emb)
		} else {
			e, err = decodeEdgeAt(b, vec, false)
		}
		if err != nil {
			return err
		}
		c.edges = append(c.edges, e)
		if mapped {
			// The snapshot says whether the embedding has unit length:
			// it is not read here (readChunk).
			c.facts = append(c.facts, edgeFacts(e, unit))
		} else {
			c.facts = append(c.facts, EdgeFactsOf(e))
		}
		c.noteApart(b, e.Seq, e.Embedding)
		return nil
	default:
		e, err := decodeEpisodeAt(b, mapped && inBinary)
		if err != nil {
			return err
		}
		if mapped {
			e.Embedding = emb
		}
		c.episodes = append(c.episodes, e)
		return nil
	}
}

// decodeMappedEdge decodes the edge of view snapshot record b, whose
// embedding is emb, into memory the collector does not scan
// (edgeStage.pack), or into a box where it cannot.
func (c *loadChunk) decodeMappedEdge(b []byte, emb []float32) (*Edge, error) {
	if c.stage == nil {
		c.stage = newEdgeStage(c.mem)
	}
	e, apart, err := decodeEdgeAs(b, true, c.stage)
	if err == nil {
		e.Embedding, err = mappedVector(b, apart, emb)
	}
	if err != nil {
		return nil, err
	}
	if packed, ok := c.stage.pack(); ok {
		return packed, nil
	}
	e, _, err = decodeEdgeV2(b, true)
	if err == nil {
		e.Embedding, err = mappedVector(b, apart, emb)
	}
	return e, err
}

// mappedVector is the embedding of view snapshot record b: emb, which
// must hold the apart floats a format-3 record counts.
func mappedVector(b []byte, apart int, emb []float32) ([]float32, error) {
	if b[0] == formatV3 && len(emb) != apart {
		return nil, fmt.Errorf("%w: a record of %d floats stored apart has %d in the view snapshot", ErrCorrupt, apart, len(emb))
	}
	return emb, nil
}

// noteApart records seq in c.apart if value b (a node or edge) keeps its
// embedding emb apart: it is in format 3 and emb is not empty.
func (c *loadChunk) noteApart(b []byte, seq uint64, emb []float32) {
	if b[0] == formatV3 && len(emb) > 0 && seq != 0 {
		c.apart = append(c.apart, seq)
	}
}

func scanPrefix(txn *badger.Txn, p []byte, fn func(k, v []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Seek(p); it.ValidForPrefix(p); it.Next() {
		item := it.Item()
		if err := item.Value(func(val []byte) error { return fn(item.Key(), val) }); err != nil {
			return err
		}
	}
	return nil
}

// Counts returns the store's record counts.
func (s *Store) Counts() Counts {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counts.clone()
}

// Update runs fn in one batch: everything fn writes commits in one Badger
// transaction, or nothing does. After the commit the view shows the
// changes and subscribers are told.
func (s *Store) Update(ctx context.Context, fn func(b *Batch) error) (Changes, error) {
	s.v.indexLoaded() // a batch finds edges by id and by identity
	if err := s.lockWriter(); err != nil {
		return Changes{}, err
	}
	defer s.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return Changes{}, err
	}
	start := time.Now()
	b := s.newBatch()
	defer s.slab.reset() // after the transaction ends (defers run last first)
	defer b.txn.Discard()
	defer s.keepMaps(b)
	stage := trace.StartRegion(ctx, RegionApply)
	tried := false // the commit was tried: its ids may be on disk
	defer func() {
		stage.End() // the stage a failure ends in
		if !tried {
			s.seqNext = s.seqSaved // the batch's ids are handed out again
		}
	}()
	if err := fn(b); err != nil {
		return Changes{}, err
	}
	applied := time.Now()
	stage = nextRegion(ctx, stage, RegionEncode)
	if err := b.flush(); err != nil {
		return Changes{}, err
	}
	s.txnKeys = int(min(b.written.Keys, maxReservedKeys))
	if err := s.injectedFault(); err != nil {
		return Changes{}, err
	}
	encoded := time.Now()
	stage = nextRegion(ctx, stage, RegionCommit)
	tried = true
	if err := b.txn.Commit(); err != nil {
		// A failed commit may have written some of the batch: its ids
		// are not handed out again, and the next batch stores the mark.
		return Changes{}, fmt.Errorf("%w: commit: %v", ErrStorage, err)
	}
	s.seqSaved = s.seqNext
	committedAt := time.Now()
	stage = nextRegion(ctx, stage, RegionPublish)
	s.written.add(b.written)
	s.updates.committed(start, applied, encoded, committedAt)
	ch := b.publish()
	s.ckpt.countCommitted(ch)
	s.changedSince.drop()
	s.feedCoder(b.stale)
	s.subMu.RLock()
	subs := s.subs
	s.subMu.RUnlock()
	for _, fn := range subs {
		fn(ch)
	}
	s.updates.published(time.Since(committedAt))
	return ch, nil
}

// lockWriter takes the writer's lock (which Update holds through its
// commit and its subscribers' calls); after Close it fails with
// [ErrClosed], not holding it.
func (s *Store) lockWriter() error {
	s.v.awaitLinks() // a write changes the adjacency
	return s.lockCommits()
}

// lockCommits takes the writer's lock, as lockWriter does, without
// waiting for the loaded adjacency: what reads the committed state alone
// (Generation) needs no more.
func (s *Store) lockCommits() error {
	s.writeMu.Lock()
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		s.writeMu.Unlock()
		return ErrClosed
	}
	return nil
}

// badgerLogger adapts slog to Badger's Logger.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debug(fmt.Sprintf(f, a...)) }

func (c *Counts) ensure() {
	if c.Nodes == nil {
		c.Nodes = map[NodeType]int64{}
	}
	if c.Edges == nil {
		c.Edges = map[EdgeType]int64{}
	}
	if c.SpansLevels == nil {
		c.SpansLevels = map[int]int64{}
	}
}

func (c Counts) clone() Counts {
	out := c
	out.Nodes = make(map[NodeType]int64, len(c.Nodes))
	for k, v := range c.Nodes {
		out.Nodes[k] = v
	}
	out.Edges = make(map[EdgeType]int64, len(c.Edges))
	for k, v := range c.Edges {
		out.Edges[k] = v
	}
	out.SpansLevels = make(map[int]int64, len(c.SpansLevels))
	for k, v := range c.SpansLevels {
		out.SpansLevels[k] = v
	}
	return out
}
