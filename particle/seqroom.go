package particle

import "slices"

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
// The copies hold what the originals hold: only the writer changes
// those arrays and lists, in publish, and it is the one copying them;
// the readers reading the originals meanwhile only read.

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
	return r
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
