package particle

import (
	"maps"
	"slices"
)

// A batch's new items take seqs past the end of the view's arrays by
// seq (nodes, edges and episodes by seq, the edges' facts, salience,
// agents and ends). Growing one copies it: a medium store's facts are
// about 16 MB, and a copy that size, its zeroing and its page faults
// made some of the longest holds of the view's write lock, 1.4 to 78 ms
// where a hold is 0.2 ms at the median (BenchmarkReadWaitWhilePublishing;
// BENCHMARKS.md, forty-sixth round). So publish makes that room before
// it takes the lock (reserveSeqs) and only puts the larger arrays in
// place under it (useSeqRoom).
//
// The same holds for the adjacency lists of a hub (a robot, a site, a
// tool): a batch's new edges are appended to them, and a list of tens of
// thousands of edges (88 bytes each) was copied under the lock when it
// grew. So the lists that the batch's new edges would outgrow are grown
// before the lock too.
//
// The same holds for the view's maps by id (nodes, edges, identities,
// aliases, adjacency, episodes). A Go map grows under an insert: past a
// table's load it rehashes that table (up to 7,168 entries) into two.
// With string keys one such insert took 0.1-0.3 ms, and the publish of
// 2,048-edge batches back to back held the lock through 509 items of
// more than 0.1 ms in 239,000, against 33 with the two largest maps made
// large enough beforehand. So a map that a batch's inserts could take
// past seven eighths of the size it was made for is copied into one
// made for twice its size, before the lock (reserveMaps). A reader's
// wait p99 in BenchmarkReadWaitWhilePublishing went from 262-326 to
// 44-169 µs (three interleaved pairs); the batch that copies pays for
// the copy instead, once each time a map doubles.
//
// The copies hold what the originals hold: only the writer changes
// those arrays, lists and maps, in publish, and it is the one copying
// them; the readers reading the originals meanwhile only read.

// seqRoom is the view's arrays by seq, each with room for a batch's
// items (the same array where it had room, else a larger copy), and the
// adjacency lists the batch's new edges would outgrow, grown.
type seqRoom struct {
	nodeSeq    []*Node
	edgeSeq    []*Edge
	episodeSeq []*Episode
	edgeFacts  []EdgeFacts
	edgeSal    []EdgeSalience
	edgeAgents []agentSet
	ends       []edgeEnds
	// out and in are the adjacency lists grown, by node id (nil: none).
	out, in map[string][]adjEdge
	// maps holds the maps by id copied into larger ones (nil: kept).
	maps mapRoom
}

// mapRoom is the view's maps by id, each nil or a larger copy (growMap),
// and the sizes the view's maps are then made for.
type mapRoom struct {
	nodes    map[string]*Node
	edges    map[string]*Edge
	identity map[string]string
	aliases  map[string]string
	out, in  map[string][]adjEdge
	episodes map[string]*Episode
	sizes    mapSizes
}

// mapSizes are the numbers of entries the view's maps by id were made
// for (0: unknown, as for a map made empty).
type mapSizes struct {
	nodes, edges, identity, aliases, out, in, episodes int
}

// growMap returns a copy of m made for twice the entries adds more
// would give it, and sets *size to that, if those would pass seven
// eighths of *size (what m was made for); else it returns nil. A map
// made for n entries has room for n at most seven eighths full, its
// tables filling evenly: none of them splits before it holds 7n/8.
func growMap[V any](m map[string]V, size *int, adds int) map[string]V {
	need := len(m) + adds
	if 8*need <= 7**size {
		return nil
	}
	*size = max(2*need, 1024)
	grown := make(map[string]V, *size)
	maps.Copy(grown, m)
	return grown
}

// useMap puts grown in *m, unless it is nil.
func useMap[V any](m *map[string]V, grown map[string]V) {
	if grown != nil {
		*m = grown
	}
}

// roomFor returns s with room for index seq (its length unchanged): a
// larger copy, grown as append grows a slice, if it has none. setDense
// grows by it too.
func roomFor[T any](s []T, seq uint64) []T {
	if seq < uint64(cap(s)) {
		return s
	}
	return slices.Grow(s, int(seq)+1-len(s))
}

// reserveRoom returns v's arrays by seq with room for b's nodes, edges
// and episodes, and the adjacency lists b's new edges would outgrow,
// grown. The writer calls it without the view's lock.
func (v *view) reserveRoom(b *Batch) seqRoom {
	r := v.reserveSeqs(b.maxSeqs())
	outs, ins := map[string]int{}, map[string]int{} // node id -> new edges to add
	for _, e := range b.edges {
		if _, isNew := b.newEdges[e.ID]; !isNew || e.Seq == 0 {
			continue
		}
		outs[e.Source]++
		ins[e.Target]++
	}
	r.out = growAdj(v.out, outs)
	r.in = growAdj(v.in, ins)
	r.maps = v.reserveMaps(b, len(outs), len(ins))
	return r
}

// reserveMaps returns copies of the view's maps by id that b's inserts
// could take past seven eighths of the size they were made for, made
// larger; sources and targets are how many nodes b's new edges leave and
// enter (each may get its first adjacency list). The writer calls it
// without the view's lock.
func (v *view) reserveMaps(b *Batch, sources, targets int) mapRoom {
	r := mapRoom{sizes: v.mapSizes}
	aliases := len(b.aliases)
	for _, n := range b.nodes {
		aliases += 1 + len(n.Aliases)
	}
	r.nodes = growMap(v.nodes, &r.sizes.nodes, len(b.nodes))
	r.aliases = growMap(v.aliases, &r.sizes.aliases, aliases)
	r.edges = growMap(v.edges, &r.sizes.edges, len(b.newEdges))
	r.identity = growMap(v.identity, &r.sizes.identity, len(b.newEdges))
	r.out = growMap(v.out, &r.sizes.out, sources)
	r.in = growMap(v.in, &r.sizes.in, targets)
	r.episodes = growMap(v.episodes, &r.sizes.episodes, len(b.episodes))
	return r
}

// useMaps puts r's larger maps in place of the view's, under the view's
// write lock, with nothing changed in them since reserveMaps.
func (v *view) useMaps(r mapRoom) {
	useMap(&v.nodes, r.nodes)
	useMap(&v.edges, r.edges)
	useMap(&v.identity, r.identity)
	useMap(&v.aliases, r.aliases)
	useMap(&v.out, r.out)
	useMap(&v.in, r.in)
	useMap(&v.episodes, r.episodes)
	v.mapSizes = r.sizes
}

// growAdj returns the lists of adj that cannot take the number of new
// entries adds gives them, each grown as append would grow it (nil if
// none need to grow).
func growAdj(adj map[string][]adjEdge, adds map[string]int) map[string][]adjEdge {
	var grown map[string][]adjEdge
	for id, n := range adds {
		list, ok := adj[id]
		if !ok || cap(list)-len(list) >= n {
			continue // a new list, or one with room
		}
		if grown == nil {
			grown = map[string][]adjEdge{}
		}
		grown[id] = slices.Grow(list, n)
	}
	return grown
}

// reserveSeqs returns v's arrays by seq with room for the nodes, edges
// and episodes up to the seqs given (0: none). The edges' agents get
// room only once some edge has them.
func (v *view) reserveSeqs(nodes, edges, episodes uint64) seqRoom {
	r := seqRoom{
		nodeSeq: v.nodeSeq, edgeSeq: v.edgeSeq, episodeSeq: v.episodeSeq,
		edgeFacts: v.edgeFacts, edgeSal: v.edgeSal, edgeAgents: v.edgeAgents, ends: v.ends,
	}
	if nodes > 0 {
		r.nodeSeq = roomFor(r.nodeSeq, nodes)
	}
	if edges > 0 {
		r.edgeSeq = roomFor(r.edgeSeq, edges)
		r.edgeFacts = roomFor(r.edgeFacts, edges)
		r.edgeSal = roomFor(r.edgeSal, edges)
		r.ends = roomFor(r.ends, edges)
		if len(r.edgeAgents) > 0 {
			r.edgeAgents = roomFor(r.edgeAgents, edges)
		}
	}
	if episodes > 0 {
		r.episodeSeq = roomFor(r.episodeSeq, episodes)
	}
	return r
}

// useSeqRoom puts r's arrays and lists in place; the writer calls it
// under the view's write lock, with nothing changed in them since
// reserveRoom.
func (v *view) useSeqRoom(r seqRoom) {
	v.useMaps(r.maps) // first: the lists below go into the maps in place
	v.nodeSeq, v.edgeSeq, v.episodeSeq = r.nodeSeq, r.edgeSeq, r.episodeSeq
	v.edgeFacts, v.edgeSal, v.edgeAgents, v.ends = r.edgeFacts, r.edgeSal, r.edgeAgents, r.ends
	for id, list := range r.out {
		v.out[id] = list
	}
	for id, list := range r.in {
		v.in[id] = list
	}
}

// maxSeqs returns the highest seq among b's nodes, edges and episodes
// (0 where none has one).
func (b *Batch) maxSeqs() (nodes, edges, episodes uint64) {
	for _, n := range b.nodes {
		nodes = max(nodes, n.Seq)
	}
	for _, e := range b.edges {
		edges = max(edges, e.Seq)
	}
	for _, e := range b.episodes {
		episodes = max(episodes, e.Seq)
	}
	return nodes, edges, episodes
}
