package particle

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Reader reads the memory-resident view. It is valid only inside the
// function given to [Store.Read]; the values it returns stay valid (they
// are never changed in place) but must not be modified.
type Reader struct {
	v   *view
	pol *ruleSet // the policy compiled when the read began
}

// Read calls fn with a view of the graph that holds still while fn
// runs: writers wait, so keep it short (the planner's expansion, a page
// of a list). It holds committed items only, each whole; a batch being
// published may be in it in part (nodes first, then edges, then
// episodes), since a writer publishing a large batch lets a reader in
// at its next item once one waits, rather than stall it for all of it.
func (s *Store) Read(fn func(r Reader)) {
	pol := s.policies()
	s.readLock()
	defer s.mu.RUnlock()
	fn(Reader{v: s.v, pol: pol})
}

// readLock takes the view's read lock for Read. A reader that finds it
// held counts itself in readersWaiting while it waits, and a publish
// holding the write lock lets it in at its next item.
func (s *Store) readLock() {
	if s.mu.TryRLock() {
		return
	}
	s.readersWaiting.Add(1)
	s.mu.RLock()
	s.readersWaiting.Add(-1)
}

// Node returns the node id, or nil.
func (r Reader) Node(id string) *Node { return r.v.nodes[id] }

// Edge returns the edge id, or nil.
func (r Reader) Edge(id string) *Edge { return r.v.edge(id) }

// Episode returns the episode id of namespace ns, or nil.
func (r Reader) Episode(ns, id string) *Episode { return r.v.episodes[ns+"\x00"+id] }

// Namespace returns the view's shared copy of namespace ns (ns itself
// when the view holds nothing of it). Every item's Namespace is that
// copy, so comparing it with the result costs no read of the bytes.
func (r Reader) Namespace(ns string) string {
	if s, ok := r.v.namespaces[ns]; ok {
		return s
	}
	return ns
}

// EdgeEnds returns the nodes at edge e's ends, source and target, each
// nil where the view has no such node: by the seqs the view noted when
// it linked e (a seq is never reused, so a node found at one is that
// node), else by id. It reads no id's bytes where the seqs serve.
func (r Reader) EdgeEnds(e *Edge) (source, target *Node) {
	r.v.awaitLinks()
	if e.Seq != 0 && e.Seq < uint64(len(r.v.ends)) {
		x := r.v.ends[e.Seq]
		source, target = atSeq(r.v.nodeSeq, x.source), atSeq(r.v.nodeSeq, x.target)
	}
	if source == nil {
		source = r.v.nodes[e.Source]
	}
	if target == nil {
		target = r.v.nodes[e.Target]
	}
	return source, target
}

// NodeBySeq returns the node with compact id seq, or nil.
func (r Reader) NodeBySeq(seq uint64) *Node { return atSeq(r.v.nodeSeq, seq) }

// EdgeBySeq returns the edge with compact id seq, or nil.
func (r Reader) EdgeBySeq(seq uint64) *Edge { return atSeq(r.v.edgeSeq, seq) }

// EpisodeBySeq returns the episode with compact id seq, or nil.
func (r Reader) EpisodeBySeq(seq uint64) *Episode { return atSeq(r.v.episodeSeq, seq) }

// Lookup resolves name (canonical name or alias) among nodes of type t.
func (r Reader) Lookup(ns string, t NodeType, name string) *Node {
	if id, ok := r.v.aliases[aliasKey(ns, t, name)]; ok {
		return r.v.nodes[id]
	}
	return nil
}

// LookupAny resolves name among nodes of every type, in NodeTypes order.
func (r Reader) LookupAny(ns, name string) *Node {
	for _, t := range NodeTypes {
		if n := r.Lookup(ns, t, name); n != nil {
			return n
		}
	}
	return nil
}

// Out calls fn for each edge leaving node id, oldest first; fn returns
// false to stop.
func (r Reader) Out(id string, fn func(*Edge) bool) {
	r.v.awaitLinks()
	oldest(r, r.v.out[id], fn)
}

// In calls fn for each edge entering node id, oldest first; fn returns
// false to stop.
func (r Reader) In(id string, fn func(*Edge) bool) {
	r.v.awaitLinks()
	oldest(r, r.v.in[id], fn)
}

func oldest(r Reader, list []adjEdge, fn func(*Edge) bool) {
	edges := r.v.edgeSeq
	for _, a := range list {
		if !fn(edges[a.seq]) {
			return
		}
	}
}

// Degree is the number of edges touching node id.
func (r Reader) Degree(id string) int {
	r.v.awaitLinks()
	return len(r.v.out[id]) + len(r.v.in[id])
}

// Nodes calls fn for every node; fn returns false to stop.
func (r Reader) Nodes(fn func(*Node) bool) {
	for _, n := range r.v.nodes {
		if !fn(n) {
			return
		}
	}
}

// Edges calls fn for every edge; fn returns false to stop.
func (r Reader) Edges(fn func(*Edge) bool) {
	r.v.indexLoaded()
	r.v.edges.each(r.v, func(_ string, e *Edge) bool { return e == nil || fn(e) })
}

// NodesBySeq calls fn for every numbered node in seq order, until fn
// returns false (dense slices: faster than Nodes over a large graph).
func (r Reader) NodesBySeq(fn func(*Node) bool) { bySeq(r.v.nodeSeq, fn) }

// EpisodesBySeq calls fn for every numbered episode in seq order, until
// fn returns false.
func (r Reader) EpisodesBySeq(fn func(*Episode) bool) { bySeq(r.v.episodeSeq, fn) }

func bySeq[T any](items []*T, fn func(*T) bool) {
	for _, x := range items {
		if x != nil && !fn(x) {
			return
		}
	}
}

// Episodes calls fn for every episode; fn returns false to stop.
func (r Reader) Episodes(fn func(*Episode) bool) {
	for _, e := range r.v.episodes {
		if !fn(e) {
			return
		}
	}
}

// Node returns node id from the view.
func (s *Store) Node(id string) (*Node, error) {
	var n *Node
	s.Read(func(r Reader) { n = r.Node(id) })
	if n == nil {
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	return n, nil
}

// Edge returns edge id from the view.
func (s *Store) Edge(id string) (*Edge, error) {
	var e *Edge
	s.Read(func(r Reader) { e = r.Edge(id) })
	if e == nil {
		return nil, fmt.Errorf("edge %s: %w", id, ErrNotFound)
	}
	return e, nil
}

// Episode returns episode id of namespace ns from the view.
func (s *Store) Episode(ns, id string) (*Episode, error) {
	var e *Episode
	s.Read(func(r Reader) { e = r.Episode(ns, id) })
	if e == nil {
		return nil, fmt.Errorf("episode %s: %w", id, ErrNotFound)
	}
	return e, nil
}

func (s *Store) get(k []byte, what string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	case errors.Is(err, badger.ErrDBClosed):
		return nil, ErrClosed
	case err != nil:
		return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, what, err)
	}
	return out, nil
}

func (s *Store) scan(p []byte, what string, fn func(k, v []byte) error) error {
	err := s.db.View(func(txn *badger.Txn) error { return scanPrefix(txn, p, fn) })
	switch {
	case errors.Is(err, badger.ErrDBClosed):
		return ErrClosed
	case err != nil:
		return fmt.Errorf("particle: scan %s: %w", what, err)
	}
	return nil
}

// Steps calls fn with each stored step of an episode, in index order.
// raw is valid only during the call.
func (s *Store) Steps(ns, episode string, fn func(idx int, raw []byte) error) error {
	return s.scan(stepPrefix(ns, episode), "steps", func(k, v []byte) error {
		idx, ok := stepIndexOf(k)
		if !ok {
			return fmt.Errorf("%w: step key %x", ErrCorrupt, k)
		}
		return fn(idx, v)
	})
}

// Blob returns the bytes stored under a "blob:<hex>" reference.
func (s *Store) Blob(ref string) ([]byte, error) {
	h, ok := strings.CutPrefix(ref, "blob:")
	if !ok {
		return nil, fmt.Errorf("%w: blob reference %q", ErrInvalid, ref)
	}
	return s.get(blobKey(h), "blob "+h)
}

// Span returns the encoded CMS span id.
func (s *Store) Span(ns, id string) ([]byte, error) { return s.get(spanKey(ns, id), "span "+id) }

// Session returns the encoded session id.
func (s *Store) Session(ns, id string) ([]byte, error) {
	return s.get(sessionKey(ns, id), "session "+id)
}

// Sessions calls fn with every stored session of namespace ns.
func (s *Store) Sessions(ns string, fn func(raw []byte) error) error {
	return s.scan(append(key(prefixSession, ns), 0), "sessions", func(_, v []byte) error { return fn(v) })
}

// Spans calls fn with every stored span of namespace ns.
func (s *Store) Spans(ns string, fn func(raw []byte) error) error {
	return s.scan(append(key(prefixSpan, ns), 0), "spans", func(_, v []byte) error { return fn(v) })
}

// Record returns the record key of kind.
func (s *Store) Record(kind, k string) ([]byte, error) {
	return s.get(recordKey(kind, k), kind+" "+k)
}

// Records calls fn with every record of kind, in key order.
func (s *Store) Records(kind string, fn func(key string, raw []byte) error) error {
	p := append(key(prefixRecord, kind), 0)
	return s.scan(p, kind, func(k, v []byte) error { return fn(string(k[len(p):]), v) })
}
