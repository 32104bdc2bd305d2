package particle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
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
	// SeqLease is how many compact ids are leased per disk write.
	// Default 1000.
	SeqLease uint64
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options for a store in dir.
func DefaultOptions(dir string) Options {
	return Options{Dir: dir, SyncWrites: true, SeqLease: 1000}
}

func (o *Options) ensureDefaults() {
	if o.SeqLease == 0 {
		o.SeqLease = 1000
	}
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
	return errors.Join(errs...)
}

// Changes are what one committed batch wrote, as the view now holds it.
type Changes struct {
	Nodes    []*Node
	Edges    []*Edge
	Episodes []*Episode
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
	seq  *badger.Sequence

	writeMu sync.Mutex // serialises Update

	mu     sync.RWMutex // guards v and counts
	v      *view
	counts Counts
	closed bool

	subMu sync.RWMutex
	subs  []func(Changes)

	pol policyState // rules and the compiled policy (policyrules.go)

	closeOnce sync.Once
	closeErr  error

	fault atomic.Pointer[error] // see InjectFault
}

// Open opens (or creates) the store described by o and loads its view.
func Open(o Options) (*Store, error) {
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	bo := badger.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(o.SyncWrites).
		WithLogger(badgerLogger{o.Logger.With("component", "badger")}).
		WithNumVersionsToKeep(1)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("particle: open badger in %q: %w", o.Dir, err)
	}
	seq, err := db.GetSequence(metaKey("seq"), o.SeqLease)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("particle: lease sequence: %w", err)
	}
	s := &Store{db: db, opts: o, log: o.Logger, seq: seq, v: newView()}
	if err := s.load(); err != nil {
		seq.Release()
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the sequence lease and closes Badger. It is safe to
// call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.closeErr = errors.Join(s.seq.Release(), s.db.Close())
	})
	return s.closeErr
}

// Subscribe registers fn to be called, on the writer's goroutine, with
// the changes of every committed batch. fn must not call Update.
func (s *Store) Subscribe(fn func(Changes)) {
	s.subMu.Lock()
	s.subs = append(s.subs, fn)
	s.subMu.Unlock()
}

// load reads every node, edge and episode into the view.
func (s *Store) load() error {
	v := newView()
	err := s.db.View(func(txn *badger.Txn) error {
		if err := scanPrefix(txn, []byte{byte(prefixNode)}, func(_ []byte, val []byte) error {
			n, err := decodeNode(val)
			if err != nil {
				return err
			}
			v.putNode(n)
			return nil
		}); err != nil {
			return fmt.Errorf("load nodes: %w", err)
		}
		if err := scanPrefix(txn, []byte{byte(prefixEdge)}, func(_ []byte, val []byte) error {
			e, err := decodeEdge(val)
			if err != nil {
				return err
			}
			v.putEdge(e)
			return nil
		}); err != nil {
			return fmt.Errorf("load edges: %w", err)
		}
		if err := scanPrefix(txn, []byte{byte(prefixEpisode)}, func(_ []byte, val []byte) error {
			e, err := decodeEpisode(val)
			if err != nil {
				return err
			}
			v.putEpisode(e)
			return nil
		}); err != nil {
			return fmt.Errorf("load episodes: %w", err)
		}
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
	s.counts.Nodes, s.counts.Edges = v.countNodes(), v.countEdges()
	s.counts.Episodes = int64(len(v.episodes))
	s.v = v
	return nil
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
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return Changes{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Changes{}, err
	}
	b := s.newBatch()
	defer b.txn.Discard()
	if err := fn(b); err != nil {
		return Changes{}, err
	}
	if err := b.flush(); err != nil {
		return Changes{}, err
	}
	if err := s.injectedFault(); err != nil {
		return Changes{}, err
	}
	if err := b.txn.Commit(); err != nil {
		return Changes{}, fmt.Errorf("%w: commit: %v", ErrStorage, err)
	}
	ch := b.publish()
	s.subMu.RLock()
	subs := s.subs
	s.subMu.RUnlock()
	for _, fn := range subs {
		fn(ch)
	}
	return ch, nil
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
