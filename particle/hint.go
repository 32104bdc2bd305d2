package particle

import (
	"unsafe"

	"github.com/ctxgraph/ctxgraph/wave"
)

// Cache hints. The planner reads small per-seq records of many edges at
// random seqs (facts, salience, the state of an int8 code). Read one
// after another, each read waits for its own cache miss; hinting all of
// them first lets the misses overlap. A hint reads nothing and changes
// nothing: a seq out of range, or of no edge, is hinted harmlessly or
// not at all, and so is any seq of a zero Reader.

// HintEdgeFacts hints the facts of the edge at seq into the caches, as
// EdgeFactsBySeq is about to read them.
func (r Reader) HintEdgeFacts(seq uint64) {
	if r.v != nil && seq < uint64(len(r.v.edgeFacts)) {
		wave.PrefetchRange(unsafe.Pointer(&r.v.edgeFacts[seq]), unsafe.Sizeof(EdgeFacts{}))
	}
}

// HintEdgeScore hints what scoring the edge at seq reads by its seq
// besides its facts: its salience record (EdgeSalienceBySeq) and the
// state of its int8 code (EmbeddingCode).
func (r Reader) HintEdgeScore(seq uint64) {
	if r.v == nil {
		return
	}
	if seq < uint64(len(r.v.edgeSal)) {
		wave.PrefetchRange(unsafe.Pointer(&r.v.edgeSal[seq]), unsafe.Sizeof(EdgeSalience{}))
	}
	if st := r.v.codes.stateAt(seq); st != nil {
		wave.PrefetchRange(unsafe.Pointer(st), unsafe.Sizeof(*st))
	}
}

// HintBySeq hints into the caches the pointers by which EdgeBySeq and
// NodeBySeq find the edge at edge and the node at node (0: none): each
// lies at a random seq, a miss of its own before the edge or node can
// be read or hinted.
func (r Reader) HintBySeq(edge, node uint64) {
	if r.v == nil {
		return
	}
	if edge != 0 && edge < uint64(len(r.v.edgeSeq)) {
		wave.PrefetchRange(unsafe.Pointer(&r.v.edgeSeq[edge]), unsafe.Sizeof(r.v.edgeSeq[edge]))
	}
	if node != 0 && node < uint64(len(r.v.nodeSeq)) {
		wave.PrefetchRange(unsafe.Pointer(&r.v.nodeSeq[node]), unsafe.Sizeof(r.v.nodeSeq[node]))
	}
}

// HintEmbeddingCode hints into the caches the int8 code of the embedding
// of the edge or node at seq and its state, as EmbeddingCode is about to
// read them (a chunk not made yet is left alone).
func (r Reader) HintEmbeddingCode(seq uint64) {
	if r.v == nil {
		return
	}
	c := &r.v.codes
	if seq == 0 || c.dim == 0 {
		return
	}
	ch, i := c.chunkOf(seq, false)
	if ch == nil {
		return
	}
	wave.PrefetchRange(unsafe.Pointer(&ch.state[i]), unsafe.Sizeof(ch.state[i]))
	wave.PrefetchCode(ch.codes[i*c.dim : (i+1)*c.dim])
}
