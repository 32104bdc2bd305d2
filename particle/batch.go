package particle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Batch is the write set of one [Store.Update]. It reads through its own
// pending writes, then the view. Values it returns for update are private
// clones: change them and hand them back with Put*.
type Batch struct {
	s   *Store
	txn *badger.Txn
	now time.Time

	batchMaps

	order  []string // pending node/edge/episode keys in write order
	counts Counts
	err    error
	// key is scratch for building an alias or identity key to look up:
	// a map index by string(key) does not allocate.
	key []byte
	// keys holds the identity keys of the batch's new edges.
	keys keySlab
	// stale lists the seqs of the edges whose codes the published batch
	// made stale, for the coder.
	stale []uint64
	// written tallies the bytes set, by table, for Store.Written.
	written Written
}

// batchMaps are a batch's lookup maps. The store keeps the last batch's
// maps, cleared, for the next one (keepMaps, under the writer's lock): a
// cleared map keeps its table, so a batch about as large as the last
// fills its maps without growing them. Grown from empty, the maps of a
// bulk pull (thousands of nodes, edges and identity keys) were rehashed
// over and over on the serial writer's path: with Badger's and the
// view's maps, 0.83 s of rehashing and 0.58 s of new tables in 36 s of
// a medium ingest's CPU, 0.49 and 0.32 s with the maps kept
// (BENCHMARKS.md, sixty-second round).
type batchMaps struct {
	nodes    map[string]*Node
	edges    map[string]*Edge
	episodes map[string]*Episode
	aliases  map[string]string
	identity map[string]string
	applied  map[string]bool
	newNodes map[string]bool
	// newEdges holds the identity key of each edge created in the batch,
	// by id, for the view's identity index.
	newEdges map[string]string
	// newFrom holds the ids of the edges created in the batch by source
	// node: a new fact's settle looks at its subject's alone (openFacts),
	// not at every edge the batch created.
	newFrom map[string][]string

	deletedNodes map[string]*Node
	deletedEdges map[string]*Edge

	preds       map[string]*Predicate
	predAliases map[string]string
	redirects   map[string]string
}

func newBatchMaps() batchMaps {
	return batchMaps{
		nodes: map[string]*Node{}, edges: map[string]*Edge{}, episodes: map[string]*Episode{},
		aliases: map[string]string{}, identity: map[string]string{}, applied: map[string]bool{},
		newNodes: map[string]bool{}, newEdges: map[string]string{}, newFrom: map[string][]string{},
		deletedNodes: map[string]*Node{}, deletedEdges: map[string]*Edge{},
		preds: map[string]*Predicate{}, predAliases: map[string]string{}, redirects: map[string]string{},
	}
}

// keptMapEntries bounds the maps keepMaps keeps: a batch whose maps hold
// more entries than this in all (an import's huge pull, a forget's sweep)
// lets them go, so that one outsized batch does not hold its tables for
// the life of the store.
const keptMapEntries = 1 << 18

// clear empties m's maps, keeping their tables, and reports whether they
// were small enough to keep (keptMapEntries).
func (m *batchMaps) clear() bool {
	n := emptied(m.nodes) + emptied(m.edges) + emptied(m.episodes) + emptied(m.aliases) +
		emptied(m.identity) + emptied(m.applied) + emptied(m.newNodes) + emptied(m.newEdges) + emptied(m.newFrom) +
		emptied(m.deletedNodes) + emptied(m.deletedEdges) + emptied(m.preds) + emptied(m.predAliases) +
		emptied(m.redirects)
	return n <= keptMapEntries
}

// emptied clears m, keeping its table, and returns how many entries it
// held.
func emptied[K comparable, V any](m map[K]V) int {
	n := len(m)
	clear(m)
	return n
}

// newBatch starts a batch with the maps the last one left (keepMaps), or
// new ones. The writer's lock is held.
func (s *Store) newBatch() *Batch {
	s.mu.RLock()
	c := s.counts.clone()
	s.mu.RUnlock()
	m := s.spareMaps
	s.spareMaps = batchMaps{}
	if m.nodes == nil {
		m = newBatchMaps()
	}
	txn := s.db.NewTransaction(true)
	txn.Reserve(s.txnKeys)
	return &Batch{s: s, txn: txn, now: time.Now().UTC(), batchMaps: m, counts: c}
}

// maxReservedKeys caps the room a batch's transaction reserves for its
// keys (Store.txnKeys): a batch of 2,048 paced steps sets about 26,000.
const maxReservedKeys = 1 << 15

// keepMaps keeps b's maps, emptied, for the next batch, once nothing
// reads b any more (its Update is returning). The writer's lock is held.
func (s *Store) keepMaps(b *Batch) {
	if b.batchMaps.clear() {
		s.spareMaps = b.batchMaps
	}
	b.batchMaps = batchMaps{}
}

// Now is the batch's clock reading, the same for every write in it.
func (b *Batch) Now() time.Time { return b.now }

func (b *Batch) set(k, v []byte) {
	if b.err != nil {
		return
	}
	b.written.add(k, int64(len(k)+len(v)))
	if err := b.txn.Set(k, v); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			b.err = ErrTooBig
			return
		}
		b.err = fmt.Errorf("%w: set: %v", ErrStorage, err)
	}
}

func (b *Batch) exists(k []byte) (bool, error) {
	_, err := b.txn.Get(k)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: get: %v", ErrStorage, err)
	}
	return true, nil
}

// nextSeq hands out the next compact id (seq); flush stores the
// high-water mark in the batch's transaction.
func (b *Batch) nextSeq() uint64 {
	n := b.s.seqNext
	b.s.seqNext++
	return n + 1 // 0 means "none"
}

// Applied reports whether the message msgID of stream was applied
// before, in this batch or an earlier one.
func (b *Batch) Applied(stream, msgID string) (bool, error) {
	if b.applied[stream+"\x00"+msgID] {
		return true, nil
	}
	return b.exists(appliedKey(stream, msgID))
}

// MarkApplied records that msgID of stream is applied, in the same
// transaction as its effects, so a redelivery changes nothing.
func (b *Batch) MarkApplied(stream, msgID string) {
	b.applied[stream+"\x00"+msgID] = true
	b.set(appliedKey(stream, msgID), nil)
}

// Node returns a private copy of node id for update, or nil.
func (b *Batch) Node(id string) *Node {
	if n, ok := b.nodes[id]; ok {
		return n
	}
	if _, gone := b.deletedNodes[id]; gone {
		return nil
	}
	b.s.mu.RLock()
	n := b.s.v.nodes[id]
	b.s.mu.RUnlock()
	if n == nil {
		return nil
	}
	c := cloneNode(n)
	b.nodes[id] = c
	return c
}

// Resolve returns the node of type t named name (by canonical name or
// alias) in namespace ns, creating it if it does not exist. The returned
// node is a private copy; it is written when the batch commits.
func (b *Batch) Resolve(ns string, t NodeType, name string) (*Node, bool, error) {
	if !t.Valid() {
		return nil, false, fmt.Errorf("%w: unknown node type %q", ErrInvalid, t)
	}
	name = strings.TrimSpace(name)
	if name == "" { // what Canonical leaves of a name with no non-space
		return nil, false, fmt.Errorf("%w: empty %s name", ErrInvalid, t)
	}
	b.key = appendAliasKey(b.key[:0], ns, t, name)
	id, ok := b.aliases[string(b.key)]
	if !ok {
		b.s.mu.RLock()
		id, ok = b.s.v.aliases[string(b.key)]
		b.s.mu.RUnlock()
	}
	if ok {
		if n := b.Node(id); n != nil {
			return n, false, nil
		}
	}
	ak := string(b.key)
	seq := b.nextSeq()
	n := &Node{
		ID: EntityID(ns, t, name), Namespace: ns, Type: t, Name: collapse(name),
		Belief:    Belief{Score: 0.5, UpdatedAt: b.now},
		CreatedAt: b.now, UpdatedAt: b.now, Seq: seq,
	}
	b.nodes[n.ID] = n
	b.newNodes[n.ID] = true
	b.aliases[ak] = n.ID
	return n, true, nil
}

// PutNode stages n (from Resolve or Node, or a new node with an ID).
func (b *Batch) PutNode(n *Node) error {
	if n.ID == "" || !n.Type.Valid() {
		return fmt.Errorf("%w: node needs an id and a known type (got %q)", ErrInvalid, n.Type)
	}
	if n.Namespace == "" {
		n.Namespace = DefaultNamespace
	}
	if n.Seq == 0 {
		n.Seq = b.nextSeq()
		if n.CreatedAt.IsZero() {
			n.CreatedAt = b.now
		}
		b.newNodes[n.ID] = true
	}
	n.UpdatedAt = b.now
	for _, a := range n.Aliases {
		b.aliases[aliasKey(n.Namespace, n.Type, a)] = n.ID
	}
	b.nodes[n.ID] = n
	return nil
}

// FindEdge returns a private copy of the edge with this identity, or nil.
func (b *Batch) FindEdge(ns, src string, t EdgeType, predicate, dst string) *Edge {
	b.key = appendEdgeIdentity(b.key[:0], ns, src, t, predicate, dst)
	return b.edgeByIdentity(b.key)
}

// edgeByIdentity is FindEdge of a built identity key.
func (b *Batch) edgeByIdentity(ik []byte) *Edge {
	if id, ok := b.identity[string(ik)]; ok {
		return b.Edge(id)
	}
	b.s.mu.RLock()
	held := b.s.v.identity.find(b.s.v, ik)
	b.s.mu.RUnlock()
	if held == nil {
		return nil
	}
	return b.edge(held.ID, held)
}

// Edge returns a private copy of edge id for update, or nil.
func (b *Batch) Edge(id string) *Edge { return b.edge(id, nil) }

// edge is Edge; held, when not nil, is the view's edge id, found
// already.
func (b *Batch) edge(id string, held *Edge) *Edge {
	if e, ok := b.edges[id]; ok {
		return e
	}
	if _, gone := b.deletedEdges[id]; gone {
		return nil
	}
	if held == nil {
		b.s.mu.RLock()
		held = b.s.v.edge(id)
		b.s.mu.RUnlock()
		if held == nil {
			return nil
		}
	}
	c := cloneEdge(held)
	b.edges[id] = c
	return c
}

// PutEdge stages e. A new edge (no ID) gets an id and a compact seq, and
// its identity and adjacency entries.
func (b *Batch) PutEdge(e *Edge) error { return b.putEdge(e, nil) }

// putEdge is PutEdge; ik, when set, is the identity key of e, new (the
// one edgeIdentity makes of it), copied before putEdge returns.
func (b *Batch) putEdge(e *Edge, ik []byte) error {
	if !e.Type.Valid() {
		return fmt.Errorf("%w: unknown edge type %q", ErrInvalid, e.Type)
	}
	if e.Source == "" || e.Target == "" {
		return fmt.Errorf("%w: edge needs a source and a target", ErrInvalid)
	}
	if e.Namespace == "" {
		e.Namespace = DefaultNamespace
	}
	if e.ID == "" {
		seq := b.nextSeq()
		if ik == nil {
			ik = appendIdentityOf(b.key[:0], e)
			b.key = ik
		}
		// The id is an allocation of its own, which the edge keeps; the
		// key lives in the batch's slab, as long as the batch.
		e.ID = NewEdgeID()
		key := b.keys.add(ik)
		e.Seq = seq
		if e.CreatedAt.IsZero() {
			e.CreatedAt = b.now
		}
		if e.Status == "" {
			e.Status = StatusActive
		}
		b.newEdges[e.ID] = key
		b.newFrom[e.Source] = append(b.newFrom[e.Source], e.ID)
		b.identity[key] = e.ID
	}
	e.UpdatedAt = b.now
	b.edges[e.ID] = e
	return nil
}

// episode is the episode of key k: the batch's pending copy (pending
// true), else the view's shared one (read it, do not change it).
func (b *Batch) episode(k string) (e *Episode, pending bool) {
	if e, ok := b.episodes[k]; ok {
		return e, true
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	return b.s.v.episodes[k], false
}

// Episode returns a private copy of the episode, or nil. Its node and
// edge lists are the exception to the copy: they are shared with the
// view's episode, so add to them at their end (append, AppendEdge), and
// to change anything else (remove, reorder, shorten) give the episode a
// copy: never write the ids they hold, nor append past a shortened end.
func (b *Batch) Episode(ns, id string) *Episode {
	k := ns + "\x00" + id
	e, pending := b.episode(k)
	if pending {
		return e
	}
	if e == nil {
		return nil
	}
	c := *e
	// The node and edge lists are shared, not copied (a long episode's
	// are long, and a batch of one step copied them whole): they only
	// grow at their end, past the view's length, which the view never
	// reads, so a batch appends in place while readers read the view's.
	// What changes ids in place (Forget) copies them first.
	c.Features = maps.Clone(e.Features)
	c.Metadata = maps.Clone(e.Metadata)
	// Embeddings are replaced, never changed in place: sharing is safe.
	b.episodes[k] = &c
	return &c
}

// PutEpisode stages e, giving a new episode its compact seq.
func (b *Batch) PutEpisode(e *Episode) error {
	if e.ID == "" {
		return fmt.Errorf("%w: episode needs an id", ErrInvalid)
	}
	if e.Namespace == "" {
		e.Namespace = DefaultNamespace
	}
	if e.Ended {
		e.edgePos = nil // an ended episode is not written to again
	}
	if e.Seq == 0 {
		e.Seq = b.nextSeq()
	}
	b.episodes[e.Namespace+"\x00"+e.ID] = e
	return nil
}

// PutStep stores the encoded step idx of an episode.
func (b *Batch) PutStep(ns, episode string, idx int, raw []byte) error {
	k := stepKey(ns, episode, idx)
	had, err := b.exists(k)
	if err != nil {
		return err
	}
	if !had {
		b.counts.Steps++
	}
	b.set(k, raw)
	return b.err
}

// PutNewStep is PutStep for a step the caller knows is not stored (in
// this batch or before), without reading Badger to find out: RLDS
// writes a step and raises its episode's step count past it in one
// batch, and never deletes either, so a step at or past the count
// (as the episode was before the step) is new.
func (b *Batch) PutNewStep(ns, episode string, idx int, raw []byte) error {
	b.counts.Steps++
	b.set(stepKey(ns, episode, idx), raw)
	return b.err
}

// StepStored reports whether step idx of an episode is stored, in this
// batch or an earlier one. A step at or past the episode's step count is
// not (see PutNewStep), which needs no read of Badger.
func (b *Batch) StepStored(ns, episode string, idx int) (bool, error) {
	ep, _ := b.episode(ns + "\x00" + episode)
	if ep == nil || idx >= ep.Steps {
		return false, nil
	}
	return b.exists(stepKey(ns, episode, idx))
}

// PutBlob stores data under its SHA-256 and returns the reference
// "blob:<hex>". Storing the same bytes twice stores them once.
func (b *Batch) PutBlob(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	k := blobKey(h)
	had, err := b.exists(k)
	if err != nil {
		return "", err
	}
	if !had {
		b.counts.Blobs++
		b.set(k, data)
	}
	return "blob:" + h, b.err
}

// PutSpan stores the encoded CMS span id at level.
func (b *Batch) PutSpan(ns, id string, level int, raw []byte) error {
	k := spanKey(ns, id)
	had, err := b.exists(k)
	if err != nil {
		return err
	}
	if !had {
		b.counts.Spans++
		b.counts.SpansLevels[level]++
	}
	b.set(k, raw)
	return b.err
}

// PutSession stores the encoded session id.
func (b *Batch) PutSession(ns, id string, raw []byte) error {
	k := sessionKey(ns, id)
	had, err := b.exists(k)
	if err != nil {
		return err
	}
	if !had {
		b.counts.Sessions++
	}
	b.set(k, raw)
	return b.err
}

// PutRecord stores an opaque record of a kind (audit entries, dead
// letters, ...) under key.
func (b *Batch) PutRecord(kind, key string, raw []byte) error {
	b.set(recordKey(kind, key), raw)
	return b.err
}

// flush writes every staged value into the transaction, and packs the
// nodes and edges for the view (pack.go). Nodes and edges are written in
// format 3, each embedding under its own key when the view does not hold
// it stored so already (storeVector).
func (b *Batch) flush() error {
	// The view's items by seq and its apart set change only in publish,
	// under the writer's lock that Update holds here: they are read
	// without Store.mu.
	view := b.s.v
	for _, n := range b.nodes {
		enc, err := encodeNodeV2(n, b.s.slab, true)
		if err != nil {
			return err
		}
		k := nodeKey(n.Namespace, n.ID)
		b.set(k, enc)
		b.storeVector(k, n.Embedding, view.storedNodeVector(n.Seq, n.ID))
		packNode(n, view.nodes[n.ID])
	}
	for ak, id := range b.aliases {
		b.set(aliasDBKey(ak), []byte(id))
	}
	for id, e := range b.edges {
		enc, err := encodeEdgeV2(e, b.s.slab, true)
		if err != nil {
			return err
		}
		// Only the edge and its embedding: its adjacency and identity
		// are derived from it (the view's, on load), not stored beside it.
		k := edgeKey(e.Namespace, e.ID)
		b.set(k, enc)
		b.storeVector(k, e.Embedding, view.storedEdgeVector(e.Seq, e.ID))
		b.edges[id] = commitEdge(e) // publish hands the view the kept (or packed) copy
	}
	for k, e := range b.episodes {
		if err := b.putEpisode(e, view.episodes[k]); err != nil {
			return err
		}
	}
	b.flushDeletes()
	c := b.counts
	c.Nodes, c.Edges = nil, nil // derived from the view on load
	v, err := encodeValue(&c, nil)
	if err != nil {
		return err
	}
	b.set(metaKey("counts"), v)
	if next := b.s.seqNext; next != b.s.seqSaved {
		b.set(metaKey("seq"), binary.BigEndian.AppendUint64(nil, next))
	}
	return b.err
}

// storeVector writes emb, the embedding of the node or edge written
// under record key k, under its own key, unless it is stored, the
// embedding stored apart already for the item (view.storedNodeVector):
// embeddings are replaced, never changed in place, so the same slice is
// the same embedding. An item that loses its embedding loses its key.
// Afterwards the item's embedding is stored apart if it has one, as
// publish records (view.apart).
func (b *Batch) storeVector(k []byte, emb, stored []float32) {
	switch {
	case len(emb) > 0 && !sameVector(stored, emb):
		b.set(vectorKey(k), vectorValue(emb, b.s.slab))
	case len(emb) == 0 && stored != nil:
		b.deleteKey(vectorKey(k))
	}
}

// publishHold and publishHoldTime bound one hold of the view's write
// lock while publish puts a batch's nodes, edges and episodes into it:
// at most 64 items, and at most 0.1 ms (the clock is read every
// holdClockEvery items). A hold ends sooner, at its next item, once a
// reader waits (Store.readLock). Between holds the readers waiting get
// in.
//
// A bulk batch of 1,700 steps takes 25-35 ms to publish on the medium
// bench. Before holds, a planner call that arrived meanwhile waited for
// all of it. Bounded by count alone, a hold of 64 items took 0.2 ms at
// the median, but 2 ms at the p99 and 6 ms at the p999: the writer
// shares two cores with Badger's goroutines and the collector. A
// reader's wait p99 in BenchmarkReadWaitWhilePublishing was 0.8-1.1 ms;
// bounded by time as well, it was 0.45-0.55 ms in three of four
// interleaved pairs (BENCHMARKS.md, forty-sixth round).
//
// publishHoldTime is a variable for tests.
const (
	publishHold    = 64
	holdClockEvery = 4
)

var publishHoldTime = 100 * time.Microsecond

// betweenHolds, when set (by tests), runs each time publish lets
// readers in, with the view's lock released; inHold runs before each
// item, with the lock held.
var betweenHolds, inHold func()

// publish applies the committed batch to the view: its nodes, then its
// edges, then its episodes, in holds of at most publishHold items and
// publishHoldTime (a reader sees each item whole, and a large batch
// possibly in part; all of it is committed), then the rest at once.
func (b *Batch) publish() Changes {
	var ch Changes
	s := b.s
	room := s.v.reserveRoom(b) // without the lock (seqroom.go)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v.useSeqRoom(room)
	held, since := 0, time.Now()
	hold := func() {
		held++
		if inHold != nil {
			inHold()
		}
		if held == publishHold || s.readersWaiting.Load() > 0 || held%holdClockEvery == 0 && time.Since(since) >= publishHoldTime {
			held = 0
			s.mu.Unlock() // the readers waiting get in; the next Lock waits for them
			if betweenHolds != nil {
				betweenHolds()
			}
			s.mu.Lock()
			since = time.Now()
		}
	}
	for _, n := range b.nodes {
		hold()
		if s.v.putNode(n) {
			b.counts.Nodes[n.Type]++
		}
		s.v.rekeyAdj(n)
		s.v.apart.set(n.Seq, len(n.Embedding) > 0)
		ch.Nodes = append(ch.Nodes, n)
	}
	ch.Edges = make([]*Edge, 0, len(b.edges))
	ch.EdgeFacts = make([]EdgeFacts, 0, len(b.edges))
	for _, e := range b.edges {
		hold()
		f, created := s.v.putEdgeFacts(e, b.newEdges[e.ID])
		if created {
			b.counts.Edges[e.Type]++
		}
		s.v.apart.set(e.Seq, len(e.Embedding) > 0)
		ch.Edges = append(ch.Edges, e)
		ch.EdgeFacts = append(ch.EdgeFacts, f)
	}
	for _, e := range b.episodes {
		hold()
		if s.v.putEpisode(e) {
			b.counts.Episodes++
		}
		ch.Episodes = append(ch.Episodes, e)
	}
	for ak, id := range b.aliases {
		s.v.aliases[ak] = id
	}
	b.publishDeletes(&ch)
	for _, p := range b.preds {
		s.v.putPredicate(p)
	}
	for from, to := range b.redirects {
		s.v.redirects[from] = to
	}
	s.counts = b.counts
	b.stale = s.v.codes.takeDirty()
	return ch
}

// cloneNode copies n for a batch to change. Its lists (aliases, tags,
// episode and span ids) are shared, not copied: every writer only adds
// to them at their end (appendRecent, append), past the length that the
// view's node and its readers read, or replaces them with a new slice.
// A node touched by a step then costs no copy of its lists (up to 64
// ids each), and packNode leaves lists that did not change as the view
// packed them.
func cloneNode(n *Node) *Node {
	c := *n
	if n.Attributes.Props != nil {
		c.Attributes.Props = make(map[string]string, len(n.Attributes.Props))
		for k, v := range n.Attributes.Props {
			c.Attributes.Props[k] = v
		}
	}
	// Embeddings are replaced, never changed in place: sharing is safe.
	return &c
}

// cloneEdge copies e for a batch to change: e, its assertion and its
// provenance in one box (boxRoom), the provenance with room for one more
// sighting: a clone is taken to be reinforced, and Observe appends a
// sighting (then drops the oldest past MaxProvenance) in place instead of
// regrowing a full window. A batch commits a copy of it as the view's
// new version (commitEdge).
func cloneEdge(e *Edge) *Edge {
	c := boxRoom(e)
	c.Scope.Audience = slices.Clone(e.Scope.Audience)
	c.Policy.AllowRoles = slices.Clone(e.Policy.AllowRoles)
	c.Policy.DenyRoles = slices.Clone(e.Policy.DenyRoles)
	return c
}

// collapse trims and collapses whitespace, keeping case: the display form.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
