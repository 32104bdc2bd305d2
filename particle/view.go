package particle

import (
	"slices"
	"unsafe"
)

// view is the memory-resident copy of the graph. Published values are
// immutable: a writer clones a node or edge, changes the clone and swaps
// the pointer under Store.mu, so a reader may keep a pointer it got.
//
// The hot paths are compact: items are also indexed by their Seq in
// dense slices (one counter serves nodes, edges and episodes, so each
// slice has holes where the others took ids, and gaps after a restart),
// and adjacency lists hold edge seqs, so a step of an expansion is one
// slice index, not a string hash. An item without a seq (0) is not
// indexed by seq, and an edge without one is not in the adjacency.
//
// The put and remove methods are not safe for concurrent use: the store
// calls them under Store.mu, the loader from one goroutine.
type view struct {
	nodes       map[string]*Node
	edges       map[string]*Edge
	episodes    map[string]*Episode   // ns \0 id
	nodeSeq     []*Node               // seq -> node, nil where none
	edgeSeq     []*Edge               // seq -> edge
	edgeFacts   []EdgeFacts           // seq -> the edge's facts (see EdgeFacts)
	edgeSal     []EdgeSalience        // seq -> the edge's salience record
	episodeSeq  []*Episode            // seq -> episode
	aliases     map[string]string     // aliasKey -> node id
	identity    map[string]string     // edgeIdentity -> edge id
	out         map[string][]uint64   // node id -> seqs of the edges leaving it, oldest first
	in          map[string][]uint64   // node id -> seqs of the edges entering it
	preds       map[string]*Predicate // scope \0 name
	predAliases map[string]string     // scope \0 alias -> name
	redirects   map[string]string     // merged node id -> survivor id
	// namespaces interns namespace strings: every item of a namespace
	// shares one copy, so comparing an item's namespace with a request's
	// (the planner does it per candidate) is a pointer comparison, not a
	// read of bytes in another cache line.
	namespaces map[string]string
	// nsKeys numbers the namespaces of edges for their facts
	// (EdgeFacts.NS); lastNS is the one numbered last (nsKey).
	nsKeys    map[string]uint32
	lastNS    string
	lastNSKey uint32
}

func newView() *view {
	return &view{
		nodes: map[string]*Node{}, edges: map[string]*Edge{}, episodes: map[string]*Episode{},
		aliases: map[string]string{}, identity: map[string]string{},
		out: map[string][]uint64{}, in: map[string][]uint64{},
		preds: map[string]*Predicate{}, predAliases: map[string]string{}, redirects: map[string]string{},
		namespaces: map[string]string{}, nsKeys: map[string]uint32{},
	}
}

// intern returns the view's copy of namespace ns, adding it if new.
func (v *view) intern(ns string) string {
	if s, ok := v.namespaces[ns]; ok {
		return s
	}
	v.namespaces[ns] = ns
	return ns
}

// internNS points *ns at the interned copy. It writes only when the
// pointer differs, so re-putting a published value writes nothing.
func (v *view) internNS(ns *string) {
	if s := v.intern(*ns); unsafe.StringData(s) != unsafe.StringData(*ns) {
		*ns = s
	}
}

func (v *view) putNode(n *Node) (created bool) {
	v.internNS(&n.Namespace)
	old, had := v.nodes[n.ID]
	v.nodes[n.ID] = n
	if had && old.Seq != n.Seq {
		v.nodeSeq = unsetSeq(v.nodeSeq, old.Seq, old)
	}
	v.nodeSeq = setSeq(v.nodeSeq, n.Seq, n)
	v.aliases[aliasKey(n.Namespace, n.Type, n.Name)] = n.ID
	for _, a := range n.Aliases {
		v.aliases[aliasKey(n.Namespace, n.Type, a)] = n.ID
	}
	return !had
}

func (v *view) putEdge(e *Edge) (created bool) { return v.putEdgeLoaded(e, EdgeFactsOf(e), "") }

// putEdgeLoaded is putEdge with e's facts, and its identity unless ik is
// "", computed already (a load computes both in its parallel scanners).
func (v *view) putEdgeLoaded(e *Edge, f EdgeFacts, ik string) (created bool) {
	v.internNS(&e.Namespace)
	old, had := v.edges[e.ID]
	v.edges[e.ID] = e
	v.edgeSeq = setSeq(v.edgeSeq, e.Seq, e)
	if had && old.Seq != e.Seq {
		v.unsetFacts(old.Seq)
	}
	v.setFacts(e, f)
	if !had {
		if ik == "" {
			ik = edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)
		}
		v.identity[ik] = e.ID
		if e.Seq != 0 {
			v.out[e.Source] = append(v.out[e.Source], e.Seq)
			v.in[e.Target] = append(v.in[e.Target], e.Seq)
		}
		return true
	}
	if old.Seq != e.Seq {
		// Renumbered (not done by the store today): the adjacency
		// follows, in place of the old seq.
		v.edgeSeq = unsetSeq(v.edgeSeq, old.Seq, old)
		v.out[old.Source] = withoutSeq(v.out[old.Source], old.Seq)
		v.in[old.Target] = withoutSeq(v.in[old.Target], old.Seq)
		if e.Seq != 0 {
			v.out[e.Source] = append(v.out[e.Source], e.Seq)
			v.in[e.Target] = append(v.in[e.Target], e.Seq)
		}
	}
	return false
}

func (v *view) putEpisode(e *Episode) (created bool) {
	v.internNS(&e.Namespace)
	k := e.Namespace + "\x00" + e.ID
	old, had := v.episodes[k]
	v.episodes[k] = e
	if had && old.Seq != e.Seq {
		v.episodeSeq = unsetSeq(v.episodeSeq, old.Seq, old)
	}
	v.episodeSeq = setSeq(v.episodeSeq, e.Seq, e)
	return !had
}

// setSeq stores x at seq (0 is no seq), growing s as needed.
func setSeq[T any](s []*T, seq uint64, x *T) []*T {
	if seq == 0 {
		return s
	}
	return setDense(s, seq, x)
}

// unsetSeq clears seq if it still holds x.
func unsetSeq[T any](s []*T, seq uint64, x *T) []*T {
	if seq < uint64(len(s)) && s[seq] == x {
		s[seq] = nil
	}
	return s
}

// atSeq is the item at seq, or nil.
func atSeq[T any](s []*T, seq uint64) *T {
	if seq < uint64(len(s)) {
		return s[seq]
	}
	return nil
}

// withoutSeq returns seqs less seq, as a new slice (a writer's caller
// may hold the old one).
func withoutSeq(seqs []uint64, seq uint64) []uint64 {
	i := slices.Index(seqs, seq)
	if i < 0 {
		return seqs
	}
	out := make([]uint64, 0, len(seqs)-1)
	out = append(out, seqs[:i]...)
	return append(out, seqs[i+1:]...)
}

// edgeIDs appends the ids of the edges with the given seqs to ids.
func (v *view) edgeIDs(seqs []uint64, ids []string) []string {
	for _, s := range seqs {
		if e := atSeq(v.edgeSeq, s); e != nil {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// identityPredicate is the predicate part of an edge's identity: the
// assertion predicate for assertion edges; nothing for the other types,
// whose label is descriptive and not part of what makes them unique.
//
// A fact (assertion) is unique per (namespace, scope location, subject,
// predicate, object): the location is part of its predicate key.
func identityPredicate(e *Edge) string {
	if e.Type == EdgeAssertion && e.Assertion != nil {
		return factKey(e.Assertion.Predicate, e.Scope.Location)
	}
	return ""
}
