package particle

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
	edges       edgeIDs               // edge id -> seq, the edge at it in edgeSeq (edgeids.go)
	episodes    map[string]*Episode   // ns \0 id
	nodeSeq     []*Node               // seq -> node, nil where none
	edgeSeq     []*Edge               // seq -> edge
	edgeFacts   []EdgeFacts           // seq -> the edge's facts (see EdgeFacts)
	edgeSal     []EdgeSalience        // seq -> the edge's salience record
	episodeSeq  []*Episode            // seq -> episode
	aliases     map[string]string     // aliasKey -> node id
	identity    identityIndex         // edgeIdentity -> edge (identityindex.go)
	out         map[string][]adjEdge  // node id -> the edges leaving it, by seq (oldest first)
	in          map[string][]adjEdge  // node id -> the edges entering it, by seq
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
	// agentKeys and siteKeys record the names behind the agent and site
	// keys of edge facts (keyNames); lastLocation is the scope location
	// whose site was recorded last.
	agentKeys, siteKeys keyNames
	lastLocation        string
	// agentNums numbers the agents of edges with several (agentNumber);
	// edgeAgents holds, by seq, the agents of each such edge (agentSet).
	agentNums     map[string]uint16
	agentNumsFull bool
	edgeAgents    []agentSet
	// codes holds the int8 code of each edge's embedding by seq.
	codes edgeCodes
	// apart holds the seqs of the nodes and edges whose embedding, as
	// the view holds it, is stored apart from their record (vectors.go).
	apart seqBits
	// unseq counts the edges without a seq, which edgeFacts leaves out.
	unseq int
	// ends holds, by edge seq, the seqs of the edge's end nodes when it
	// was linked (0 where that node had none), as adjEdge.end does for
	// one end: Reader.EdgeEnds reaches them without hashing their ids.
	// Written with the adjacency (link, unlink, linkAdjacency).
	ends []edgeEnds
	// snapEnds, set by a load from the view snapshot, is its table of
	// the loaded edges' end nodes, for linkAdjacency.
	snapEnds []edgeEnds
	// loaded holds the edges a load put, chunk by chunk, until
	// indexLoaded puts them into edges and identity.
	loaded     [][]*Edge
	loadedOnce sync.Once
	// loadedPending is true while loaded holds edges indexLoaded has
	// not put in the maps (Store.EdgesIndexedByID).
	loadedPending atomic.Bool
	// linking, set by a load, builds the loaded edges' adjacency once
	// (linkAdjacency): Open starts it on a goroutine and returns, and
	// every reader and writer of out and in waits for it (awaitLinks).
	linking *sync.Once
}

// awaitLinks returns once the adjacency of a loaded view is built,
// building it if no one has started to. A view that was not loaded has
// nothing to wait for. It takes no lock.
func (v *view) awaitLinks() {
	if v.linking != nil {
		v.linking.Do(v.linkAdjacency)
	}
}

// indexLoaded puts the loaded edges into the map by id and the identity
// index, which a load leaves out: at 1M edges their inserts, a cache miss
// each, took 0.7 s of CPU on the load's serial path and the identities'
// keys 0.34 s beside it, and a daemon serves first and has them made in
// the background. Everything that reads or writes those maps calls it first
// (edge does, Store.Update does); it takes no lock, so it runs as well
// with the store's lock held as without: whoever else would touch the
// maps waits for it.
func (v *view) indexLoaded() {
	v.loadedOnce.Do(func() {
		// The two maps side by side.
		var wg sync.WaitGroup
		// (A catch-up leaves nil where it removed a loaded edge.)
		wg.Go(func() {
			for _, chunk := range v.loaded {
				for _, e := range chunk {
					if e != nil {
						v.edges.putLoaded(e)
					}
				}
			}
		})
		wg.Go(func() {
			var key []byte
			for _, chunk := range v.loaded {
				for _, e := range chunk {
					if e != nil {
						key = appendIdentityOf(key[:0], e)
						v.identity.put(v, keyString(key), e)
					}
				}
			}
		})
		wg.Wait()
		v.loaded = nil
		v.loadedPending.Store(false)
	})
}

// edge is the edge id, or nil.
func (v *view) edge(id string) *Edge {
	v.indexLoaded()
	return v.edges.get(v, id)
}

func newView() *view {
	return &view{
		nodes: map[string]*Node{}, edges: newEdgeIDs(0), episodes: map[string]*Episode{},
		aliases: map[string]string{}, identity: newIdentityIndex(0),
		out: map[string][]adjEdge{}, in: map[string][]adjEdge{},
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
	pinNamespace(ns)
	return ns
}

// pinned holds every namespace string a view interned, for the life of
// the process: a loaded edge lies in memory the collector does not scan
// (edgeStage.pack), and its namespace, interned, may be a string of the
// heap that nothing else would keep once its view is gone while a
// reader still holds the edge. A process holds few namespaces.
var pinned struct {
	sync.Mutex
	strs map[*byte]string
}

func pinNamespace(ns string) {
	if ns == "" {
		return
	}
	pinned.Lock()
	defer pinned.Unlock()
	if pinned.strs == nil {
		pinned.strs = map[*byte]string{}
	}
	pinned.strs[unsafe.StringData(ns)] = ns
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
		v.codes.unset(old.Seq)
	}
	v.nodeSeq = setSeq(v.nodeSeq, n.Seq, n)
	if n.Seq != 0 && (!had || old.Seq != n.Seq || !sameVector(old.Embedding, n.Embedding)) {
		v.codes.stale(n.Seq, n.Embedding)
	}
	v.aliases[aliasKey(n.Namespace, n.Type, n.Name)] = n.ID
	for _, a := range n.Aliases {
		v.aliases[aliasKey(n.Namespace, n.Type, a)] = n.ID
	}
	return !had
}

func (v *view) putEdge(e *Edge) (created bool) {
	_, created = v.putEdgeFacts(e, "")
	return created
}

// putEdgeFacts is putEdge, returning e's facts as the view holds them.
// ik is e's identity key when the caller has it (a batch's new edge),
// else "".
func (v *view) putEdgeFacts(e *Edge, ik string) (EdgeFacts, bool) {
	f := EdgeFactsOf(e)
	created, renumbered := v.putEdgeLinked(e, &f)
	if created || renumbered {
		if ik == "" {
			ik = identityOf(e)
		}
		v.identity.put(v, ik, e)
	}
	return f, created
}

// putLoadedEdge puts edge e, whose facts f a load's scanners computed,
// into a loading view. Every loaded edge is new (one key each): the
// load keeps it for indexLoaded, and linkLoaded puts it in the
// adjacency. It leaves in f the facts as stored (with their NS).
func (v *view) putLoadedEdge(e *Edge, f *EdgeFacts) {
	v.internNS(&e.Namespace)
	v.edgeSeq = setSeq(v.edgeSeq, e.Seq, e)
	*f = v.setFacts(e, *f, true) // linkLoaded makes every code stale at once
	if e.Seq == 0 {
		v.unseq++
	}
}

// putEdgeLinked is putEdge with e's facts, computed already, but for the
// identity of a new edge, or of one given a new seq (renumbered), which
// the caller records. It leaves in f the facts as stored (with their NS).
func (v *view) putEdgeLinked(e *Edge, f *EdgeFacts) (created, renumbered bool) {
	v.internNS(&e.Namespace)
	old := v.edges.put(v, e)
	had := old != nil
	if had && old.Seq == 0 {
		v.unseq--
	}
	if e.Seq == 0 {
		v.unseq++
	}
	v.edgeSeq = setSeq(v.edgeSeq, e.Seq, e)
	if had && old.Seq != e.Seq {
		v.unsetFacts(old.Seq)
	}
	*f = v.setFacts(e, *f, had && old.Seq == e.Seq && sameVector(old.Embedding, e.Embedding))
	if !had {
		v.link(e, *f)
		return true, false
	}
	if old.Seq != e.Seq {
		// Renumbered (not done by the store today): the adjacency
		// follows, in place of the old seq.
		v.edgeSeq = unsetSeq(v.edgeSeq, old.Seq, old)
		v.unlink(old)
		v.link(e, *f)
		return false, true
	}
	if e.Seq != 0 {
		// The same edge, changed: its adjacency entries take its facts.
		updateAdj(v.out[e.Source], e.Seq, *f)
		updateAdj(v.in[e.Target], e.Seq, *f)
	}
	return false, false
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

// adjEdge is an edge in a node's adjacency list: its seq, a copy of its
// facts (the view's EdgeFacts for that seq, kept equal by
// putEdgeLinked) and the seq of the node at its other end. A walk reads
// a hub's edges in one sequential pass over its list, instead of one
// read at a random seq per edge, and reaches the nodes at their other
// ends by seq, instead of hashing their ids.
type adjEdge struct {
	seq   uint64
	facts EdgeFacts
	// end is the seq of the node at the edge's other end (its target in
	// an out list, its source in an in list) when the edge was linked:
	// 0 when that node had none or did not exist yet. Seqs are never
	// reused, so a node found at end is that node; none found there
	// (removed, or renumbered) sends a reader to the id.
	end uint64
}

// link adds edge e, whose facts are f, to the adjacency of its ends (an
// edge without a seq is not in the adjacency).
func (v *view) link(e *Edge, f EdgeFacts) {
	if e.Seq == 0 {
		return
	}
	src, dst := v.nodes[e.Source], v.nodes[e.Target]
	v.ends = setDense(v.ends, e.Seq, edgeEnds{source: seqOf(src), target: seqOf(dst)})
	k := listKey(src, e.Source)
	v.out[k] = appendAdj(v.out[k], adjEdge{seq: e.Seq, facts: f, end: seqOf(dst)})
	k = listKey(dst, e.Target)
	v.in[k] = appendAdj(v.in[k], adjEdge{seq: e.Seq, facts: f, end: seqOf(src)})
}

// listKey is the key to write node id's adjacency lists under: the
// string n.ID of its node n when the view has it, id otherwise. A map
// keeps the key of the latest write, and a reader holding the node looks
// its lists up by n.ID: with the same string as the key, comparing the
// two is a pointer comparison, where two copies would read both from
// memory (a cache miss apiece on the planner's expansion). A load keys
// the lists by the loaded nodes' ids (loadedAdjacency), and a published
// node has its lists keyed by its new record's id (rekeyAdj).
func listKey(n *Node, id string) string {
	if n != nil {
		return n.ID
	}
	return id
}

// seqOf is n's seq, 0 for no node.
func seqOf(n *Node) uint64 {
	if n == nil {
		return 0
	}
	return n.Seq
}

// rekeyAdj keys node n's adjacency lists, if it has any, by n.ID (see
// listKey): after its record is replaced, the lists' key is otherwise
// the old record's string.
func (v *view) rekeyAdj(n *Node) {
	if l, ok := v.out[n.ID]; ok {
		v.out[n.ID] = l
	}
	if l, ok := v.in[n.ID]; ok {
		v.in[n.ID] = l
	}
}

// linkLoaded ends a load: it makes room for the edges' codes
// (edgeCodes.loaded) and has the adjacency built (linkAdjacency) on a
// goroutine, which the caller's next work (a daemon's vector index fill)
// runs beside: awaitLinks waits for it.
func (v *view) linkLoaded() {
	v.codes.loaded(v.edgeSeq, v.nodeSeq)
	v.linking = new(sync.Once)
	go v.awaitLinks()
}

// linkAdjacency puts every loaded edge in the adjacency of its ends, in
// seq order, reading the edges and their facts by seq (a load
// puts edges in key order, which is not quite seq order: ids are
// time-ordered to the millisecond, seqs count commits). The out and in
// lists are built side by side (loadedAdjacency).
func (v *view) linkAdjacency() {
	ends := v.snapshotEnds()
	var wg sync.WaitGroup
	wg.Go(func() {
		v.loadedAdjacency(v.out, ends, func(e *Edge) string { return e.Source },
			func(x edgeEnds) (uint64, uint64) { return x.source, x.target })
	})
	wg.Go(func() {
		v.loadedAdjacency(v.in, ends, func(e *Edge) string { return e.Target },
			func(x edgeEnds) (uint64, uint64) { return x.target, x.source })
	})
	wg.Wait()
	v.ends = ends
}

// loadedAdjacency fills lists (out or in: at(e) is the end an edge is
// listed under, by id; pick gives that end's seq and the other's) with
// every loaded edge, in seq order. Each list is sized once from a count
// by node seq: appending edge by edge, through a map lookup each, took
// most of a 1M-edge load's linking (growing lists and hashing ids).
// An edge whose end has no node (seq 0 in ends: loadedSeqOf) is listed
// through the map.
func (v *view) loadedAdjacency(lists map[string][]adjEdge, ends []edgeEnds, at func(*Edge) string, pick func(edgeEnds) (uint64, uint64)) {
	degree := make([]int32, len(v.nodeSeq))
	for seq, e := range v.edgeSeq {
		if n, _ := pick(ends[seq]); e != nil && n != 0 {
			degree[n]++
		}
	}
	byNode := make([][]adjEdge, len(v.nodeSeq))
	for n, d := range degree {
		if d > 0 {
			byNode[n] = make([]adjEdge, 0, d)
		}
	}
	for seq, e := range v.edgeSeq {
		if e == nil {
			continue
		}
		n, other := pick(ends[seq])
		a := adjEdge{seq: uint64(seq), facts: v.edgeFacts[seq], end: other}
		if n != 0 {
			byNode[n] = append(byNode[n], a)
		} else {
			lists[at(e)] = append(lists[at(e)], a)
		}
	}
	for n, list := range byNode {
		if list != nil {
			lists[v.nodeSeq[n].ID] = list
		}
	}
}

// snapshotEnds returns loadedEnds, taken from the table a load from the
// view snapshot found (snapEnds): the ends the writer's view noted over
// the same graph. A node found at a noted seq is that node (seqs are
// never reused, as Reader.EdgeEnds relies on too); an end whose seq
// holds no node, or that the table leaves out, is looked up by id.
func (v *view) snapshotEnds() []edgeEnds {
	table := v.snapEnds
	v.snapEnds = nil
	if table == nil {
		return v.loadedEnds()
	}
	// In place: the table is this load's own copy.
	ends := table[:min(len(table), len(v.edgeSeq))]
	ends = append(ends, make([]edgeEnds, len(v.edgeSeq)-len(ends))...)
	for seq, e := range v.edgeSeq {
		if e == nil {
			ends[seq] = edgeEnds{}
			continue
		}
		x := ends[seq]
		if x.source == 0 || atSeq(v.nodeSeq, x.source) == nil {
			x.source = v.loadedSeqOf(e.Source)
		}
		if x.target == 0 || atSeq(v.nodeSeq, x.target) == nil {
			x.target = v.loadedSeqOf(e.Target)
		}
		ends[seq] = x
	}
	return ends
}

// edgeEnds are the seqs of an edge's end nodes.
type edgeEnds struct{ source, target uint64 }

// loadedEnds returns, by edge seq, the seqs of each loaded edge's end
// nodes. The lookups hash two ids per edge: they run on every core,
// reading the finished node map, off the serial part of the load.
func (v *view) loadedEnds() []edgeEnds {
	ends := make([]edgeEnds, len(v.edgeSeq))
	workers := max(1, runtime.GOMAXPROCS(0))
	per := (len(ends) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(ends); lo += per {
		hi := min(lo+per, len(ends))
		wg.Go(func() {
			for seq := lo; seq < hi; seq++ {
				if e := v.edgeSeq[seq]; e != nil {
					ends[seq] = edgeEnds{source: v.loadedSeqOf(e.Source), target: v.loadedSeqOf(e.Target)}
				}
			}
		})
	}
	wg.Wait()
	return ends
}

// loadedSeqOf is the seq of node id, 0 when the view has no such node or
// its seq's slot holds another (only a damaged store has two nodes at
// one seq): a node at a seq loadedEnds returns is the one named id.
func (v *view) loadedSeqOf(id string) uint64 {
	n := v.nodes[id]
	if n == nil || atSeq(v.nodeSeq, n.Seq) != n {
		return 0
	}
	return n.Seq
}

// unlink removes edge e from the adjacency of its ends.
func (v *view) unlink(e *Edge) {
	if e.Seq < uint64(len(v.ends)) {
		v.ends[e.Seq] = edgeEnds{}
	}
	k := listKey(v.nodes[e.Source], e.Source)
	v.out[k] = withoutSeq(v.out[k], e.Seq)
	k = listKey(v.nodes[e.Target], e.Target)
	v.in[k] = withoutSeq(v.in[k], e.Seq)
}

// appendAdj adds a to list, which is in seq order: at the end, where a
// new edge's seq goes, else at its place.
func appendAdj(list []adjEdge, a adjEdge) []adjEdge {
	if n := len(list); n == 0 || list[n-1].seq < a.seq {
		return append(list, a)
	}
	i, _ := slices.BinarySearchFunc(list, a.seq, cmpAdjSeq)
	return slices.Insert(list, i, a)
}

func cmpAdjSeq(a adjEdge, seq uint64) int { return cmp.Compare(a.seq, seq) }

// updateAdj sets the facts of the entry of seq in list, if it has one.
func updateAdj(list []adjEdge, seq uint64, f EdgeFacts) {
	if i, ok := slices.BinarySearchFunc(list, seq, cmpAdjSeq); ok {
		list[i].facts = f
	}
}

// withoutSeq returns list less the entry of seq, as a new slice (a
// writer's caller may hold the old one).
func withoutSeq(list []adjEdge, seq uint64) []adjEdge {
	i, ok := slices.BinarySearchFunc(list, seq, cmpAdjSeq)
	if !ok {
		return list
	}
	out := make([]adjEdge, 0, len(list)-1)
	out = append(out, list[:i]...)
	return append(out, list[i+1:]...)
}

// edgeIDs appends the ids of the edges of an adjacency list to ids.
func (v *view) edgeIDs(list []adjEdge, ids []string) []string {
	for _, a := range list {
		if e := atSeq(v.edgeSeq, a.seq); e != nil {
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
	if hasFactKey(e) {
		return factKey(e.Assertion.Predicate, e.Scope.Location)
	}
	return ""
}

// hasFactKey reports whether e's identity holds a fact key (its
// predicate and scope location): an assertion's does.
func hasFactKey(e *Edge) bool { return e.Type == EdgeAssertion && e.Assertion != nil }
