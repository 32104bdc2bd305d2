package planner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Indexer keeps a vector index in step with the store. The index is
// derived state: NewIndexer fills it from the store's view, then every
// committed batch's changes are queued and applied by one background
// goroutine, off the commit path. The queue is bounded: when the index
// falls that far behind, commits wait (back-pressure, not memory growth).
type Indexer struct {
	idx   wave.Index
	queue chan particle.Changes
	done  chan struct{}

	sendMu sync.RWMutex // held to send on queue; Close takes it to close queue
	// priority is what apply yields to between items (GiveWayTo).
	priority atomic.Pointer[Priority]
	mu       sync.Mutex
	cond     *sync.Cond
	// queued numbers the batches queued so far, indexed those applied
	// (queued − indexed are pending): the queue is first in, first out,
	// so batch n (a Queued reading taken after its commit) is in the
	// index once indexed reaches n.
	// throughWaiters counts SyncThrough calls waiting, which want a
	// broadcast after every batch rather than only once drained.
	queued, indexed uint64
	throughWaiters  int
	closed          bool
	// vecs remembers, by id (a seq: dense, as the view's slices are),
	// which vector each id was indexed with, so a batch that rewrites a
	// node without changing its vector costs nothing. A slice: at 1M
	// vectors, a map's lookups and inserts were a quarter of the fill
	// after a reopen.
	vecs []*float32
	// loading is true while NewIndexer fills the index from the view;
	// filled counts the vectors it fed the index.
	loading bool
	filled  int
	// cleanups counts tombstone clean-ups of the index.
	cleanups int
}

// NewIndexer fills idx with every vector of store and keeps it current.
// queue bounds the batches waiting to be indexed (default 64).
func NewIndexer(store *particle.Store, idx wave.Index, queue int) (*Indexer, error) {
	if queue <= 0 {
		queue = 64
	}
	ix := &Indexer{idx: idx, queue: make(chan particle.Changes, queue), done: make(chan struct{})}
	ix.cond = sync.NewCond(&ix.mu)
	var err error
	ix.loading = true
	store.Read(func(r particle.Reader) {
		f := ix.newFill()
		// By seq: dense slices, in about the order the items were
		// allocated, and the edges' metas from the view's facts.
		r.NodesBySeq(func(n *particle.Node) bool {
			err = f.add(n.Seq, n.Embedding, NodeMeta(n), false)
			return err == nil
		})
		if err != nil {
			return
		}
		r.EdgesBySeq(func(e *particle.Edge, facts *particle.EdgeFacts) bool {
			err = f.add(e.Seq, e.Embedding, edgeMetaOf(e, facts), facts.Flags&particle.FactUnit != 0)
			return err == nil
		})
		if err != nil {
			return
		}
		r.EpisodesBySeq(func(e *particle.Episode) bool {
			err = f.add(e.Seq, e.Embedding, EpisodeMeta(e), false)
			return err == nil
		})
		if err == nil {
			err = f.flush()
		}
	})
	ix.loading = false
	if err != nil {
		return nil, err
	}
	if n := idx.Len(); n > ix.filled {
		// The index held vectors the store does not: a snapshot caught
		// up with an incomplete list of what was deleted since.
		return nil, fmt.Errorf("%w: %d vectors after the fill, %d from the store", ErrIndexHoldsMore, n, ix.filled)
	}
	go ix.run()
	store.Subscribe(ix.enqueue)
	return ix, nil
}

// ErrIndexHoldsMore is NewIndexer's error when the index it filled holds
// vectors the store does not: one loaded from a snapshot that did not
// match the store. Rebuild it from an empty index.
var ErrIndexHoldsMore = errors.New("planner: the vector index holds vectors the store does not")

// bulkAttacher is an index that attaches many loaded items at once
// ([wave.IVF.AttachMetaAll]).
type bulkAttacher interface {
	AttachMetaAll(items []wave.Attachment, workers int, found []bool)
}

// fillBatch is how many items a fill hands a bulkAttacher at once (a
// variable for tests).
var fillBatch = 1 << 15

// fill feeds NewIndexer's vectors to the index: in batches to a
// bulkAttacher, which attaches those its snapshot holds on every core
// (and the rest are added as add would), one by one (add) to any other
// index. After a reopen of a million-edge store, attaching one by one
// was a third of the start, on one core.
type fill struct {
	ix    *Indexer
	bulk  bulkAttacher // nil: one by one
	items []wave.Attachment
	found []bool
}

func (ix *Indexer) newFill() *fill {
	f := &fill{ix: ix}
	if b, ok := ix.idx.(bulkAttacher); ok {
		f.bulk = b
		f.items = make([]wave.Attachment, 0, fillBatch)
		f.found = make([]bool, fillBatch)
	}
	return f
}

// add feeds one item; unit says vec is known to have unit length.
func (f *fill) add(id uint64, vec []float32, m wave.Meta, unit bool) error {
	if len(vec) != f.ix.idx.Dim() {
		return nil
	}
	f.ix.filled++
	if f.bulk == nil {
		return f.ix.add(id, vec, m)
	}
	f.items = append(f.items, wave.Attachment{ID: id, Vec: vec, Meta: m, Unit: unit})
	if len(f.items) == fillBatch {
		return f.flush()
	}
	return nil
}

// flush attaches the batched items, adds those the index did not hold,
// and empties the batch.
func (f *fill) flush() error {
	if f.bulk == nil || len(f.items) == 0 {
		return nil
	}
	found := f.found[:len(f.items)]
	f.bulk.AttachMetaAll(f.items, runtime.GOMAXPROCS(0), found)
	for i, it := range f.items {
		if !found[i] {
			if err := f.ix.idx.Add(it.ID, it.Vec, it.Meta); err != nil {
				return err
			}
		}
		f.ix.setVec(it.ID, &it.Vec[0])
	}
	clear(f.items) // let go of the vectors
	f.items = f.items[:0]
	return nil
}

// yieldEvery is how many items the indexer adds between yields to the
// planner (about 0.1 ms of inserts).
const yieldEvery = 16

// GiveWayTo has the indexer yield to p's planner calls between items.
func (ix *Indexer) GiveWayTo(p *Priority) { ix.priority.Store(p) }

func (ix *Indexer) enqueue(ch particle.Changes) {
	ix.sendMu.RLock()
	defer ix.sendMu.RUnlock()
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return
	}
	ix.queued++
	ix.mu.Unlock()
	ix.queue <- ch
}

func (ix *Indexer) run() {
	defer close(ix.done)
	for ch := range ix.queue {
		ix.apply(ch)
		ix.mu.Lock()
		ix.indexed++
		if ix.indexed == ix.queued || ix.throughWaiters > 0 {
			ix.cond.Broadcast()
		}
		ix.mu.Unlock()
	}
}

// apply adds and removes the vectors of one batch. Vectors were
// validated before the commit; one the index refuses is skipped.
func (ix *Indexer) apply(ch particle.Changes) {
	pri := ix.priority.Load()
	for i, n := range ch.Nodes {
		if i%yieldEvery == 0 {
			pri.Yield()
		}
		_ = ix.add(n.Seq, n.Embedding, NodeMeta(n))
	}
	for i, e := range ch.Edges {
		if i%yieldEvery == 0 {
			pri.Yield()
		}
		var m wave.Meta
		if len(ch.EdgeFacts) == len(ch.Edges) {
			m = edgeMetaOf(e, &ch.EdgeFacts[i]) // the facts the store published
		} else {
			m = EdgeMeta(e)
		}
		_ = ix.add(e.Seq, e.Embedding, m)
	}
	for _, e := range ch.Episodes {
		_ = ix.add(e.Seq, e.Embedding, EpisodeMeta(e))
	}
	for _, n := range ch.RemovedNodes {
		ix.remove(n.Seq)
	}
	for _, e := range ch.RemovedEdges {
		ix.remove(e.Seq)
	}
	ix.maybeCleanup()
}

// cleaner is an index whose removals leave tombstones to clean up.
type cleaner interface {
	Tombstones() int
	Cleanup() int
}

// maybeCleanup reclaims the index's tombstones once they pass 5% of it.
func (ix *Indexer) maybeCleanup() {
	c, ok := ix.idx.(cleaner)
	if ok && wave.CleanupDue(c.Tombstones(), ix.idx.Len()) {
		c.Cleanup()
		ix.cleanups++
	}
}

// add indexes vec under id. Published values never change a vector in
// place, so the same backing array means the same vector: then only the
// Meta is refreshed (an edge re-observed later widens its time scope),
// which is cheap when the index is a [wave.MetaSetter].
func (ix *Indexer) add(id uint64, vec []float32, m wave.Meta) error {
	if len(vec) != ix.idx.Dim() {
		return nil
	}
	ms, canSet := ix.idx.(wave.MetaSetter)
	if ix.vecAt(id) == &vec[0] {
		if canSet {
			ms.SetMeta(id, m)
		}
		return nil
	}
	if ix.loading && ix.loaded(id, m) {
		// Filling from the view over an index loaded from a snapshot
		// taken at the last clean shutdown: it already holds this vector
		// (its Meta may be from an older format: loaded refreshed it).
		ix.setVec(id, &vec[0])
		return nil
	}
	if err := ix.idx.Add(id, vec, m); err != nil {
		return err
	}
	ix.setVec(id, &vec[0])
	return nil
}

// vecAt is the vector id was indexed with (nil: none).
func (ix *Indexer) vecAt(id uint64) *float32 {
	if id < uint64(len(ix.vecs)) {
		return ix.vecs[id]
	}
	return nil
}

// setVec records p as id's vector (nil: none), growing vecs by doubling.
func (ix *Indexer) setVec(id uint64, p *float32) {
	if id >= uint64(len(ix.vecs)) {
		if p == nil {
			return
		}
		ix.vecs = slices.Grow(ix.vecs, int(id)+1-len(ix.vecs))
		ix.vecs = ix.vecs[:cap(ix.vecs)]
	}
	ix.vecs[id] = p
}

// loaded reports whether the index, loaded from a snapshot, holds id,
// and refreshes its Meta to m. (An index whose snapshot holds no float
// vectors, wave.IVF, is a bulkAttacher: the fill gives it theirs.)
func (ix *Indexer) loaded(id uint64, m wave.Meta) bool {
	x, ok := ix.idx.(interface{ Has(uint64) bool })
	if !ok || !x.Has(id) {
		return false
	}
	if ms, ok := ix.idx.(wave.MetaSetter); ok {
		ms.SetMeta(id, m)
	}
	return true
}

func (ix *Indexer) remove(id uint64) {
	ix.idx.Remove(id)
	ix.setVec(id, nil)
}

// Pending is the number of committed batches not yet in the index.
func (ix *Indexer) Pending() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return int(ix.queued - ix.indexed)
}

// Sync waits until every batch committed so far is in the index: until
// the indexer is idle, which under a steady stream of commits can be
// later than any one batch's arrival (SyncThrough waits for that).
func (ix *Indexer) Sync(ctx context.Context) error {
	return ix.wait(ctx, func() bool { return ix.indexed == ix.queued })
}

// Queued is the mark of the last batch queued for the index: read in a
// store subscription called after the indexer's (a daemon subscribes its
// indexer first), it names the batch being committed.
func (ix *Indexer) Queued() uint64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.queued
}

// SyncThrough waits until the batches up to mark (a Queued reading) are
// in the index, whatever was committed after them: the moment a step
// committed in that batch is visible to the planner's vector search.
func (ix *Indexer) SyncThrough(ctx context.Context, mark uint64) error {
	ix.mu.Lock()
	ix.throughWaiters++
	ix.mu.Unlock()
	defer func() {
		ix.mu.Lock()
		ix.throughWaiters--
		ix.mu.Unlock()
	}()
	return ix.wait(ctx, func() bool { return ix.indexed >= mark })
}

// wait blocks until done (called under ix.mu) holds or ctx ends.
func (ix *Indexer) wait(ctx context.Context, done func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		ix.mu.Lock()
		ix.cond.Broadcast()
		ix.mu.Unlock()
	})
	defer stop()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for !done() && ctx.Err() == nil {
		ix.cond.Wait()
	}
	return ctx.Err()
}

// Close indexes what is queued and stops. Call it after the store's last
// commit; later commits are not indexed.
func (ix *Indexer) Close() {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return
	}
	ix.closed = true
	ix.mu.Unlock()
	ix.sendMu.Lock()
	close(ix.queue)
	ix.sendMu.Unlock()
	<-ix.done
}

// NodeMeta is the index Meta of a node: nodes have no time scope.
func NodeMeta(n *particle.Node) wave.Meta {
	return wave.Meta{Kind: wave.KindNode, Type: n.Type.Code()}
}

// EdgeMeta is the index Meta of an edge: its scope's time range, the
// keys of its agents and location and its confidence level, which let
// the prefilter rule out most edges a request's same-agent, location
// and minimum-confidence constraints reject before [run.admits] checks
// them exactly. It is computed from the edge's particle.EdgeFacts.
func EdgeMeta(e *particle.Edge) wave.Meta {
	f := particle.EdgeFactsOf(e)
	return edgeMetaOf(e, &f)
}

// edgeMetaOf is EdgeMeta from the facts the view holds for e. A time the
// facts cannot hold (outside int64 ns) is an open bound: the index then
// admits more, and admits decides.
func edgeMetaOf(e *particle.Edge, f *particle.EdgeFacts) wave.Meta {
	return wave.Meta{Kind: wave.KindEdge, Type: e.Type.Code(), Time: f.ScopeFrom, End: f.ScopeTo,
		Agent: f.Agent, Site: f.Site, Confidence: wave.ConfidenceLevel(f.Confidence)}
}

// EpisodeMeta is the index Meta of an episode: its start and end (open
// while it runs) and its agent's key.
func EpisodeMeta(e *particle.Episode) wave.Meta {
	return wave.Meta{Kind: wave.KindEpisode, Time: unixNano(e.StartTime), End: unixNano(e.EndTime),
		Agent: wave.AgentKey(e.Agent)}
}

// unixNano is t in Unix nanoseconds, 0 (an open bound) for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
