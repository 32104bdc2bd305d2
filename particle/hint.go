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
// state of its int8 code (EdgeCode).
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
