package planner

import (
	"sync"

	"github.com/ctxgraph/ctxgraph/particle"
)

// runNode is a node a run keeps, with why: its best score, the fewest
// hops it was reached in, and whether it is a seed.
type runNode struct {
	n     *particle.Node
	score float64
	hop   int
	seed  bool
	// own is scoreNode(n), once computed (ownOK): expansion and
	// re-rank both need it.
	own   float64
	ownOK bool
}

// runEdge is an edge a run keeps with its score and, when the run knew
// them as it took the edge, its endpoints (stitch names them).
type runEdge struct {
	e     *particle.Edge
	score float64
	// salience is e's decayed salience at the run's time, kept from its
	// scoring: the answer reports it, and computing it again in stitch
	// would read the edge's salience and decay function from memory.
	salience float64
	src, dst *particle.Node
}

// seqIndex maps compact ids (particle seqs) to positions in a run's
// node or edge list: open addressing over a power-of-two table, so a
// membership test is a multiply and a probe or two, not a string hash.
// Keys are never 0 (0 is no seq; such items are looked up by id).
type seqIndex struct {
	keys []uint64
	pos  []int32
	n    int
	bits uint
}

const minSeqIndexBits = 9 // 512 slots: a budget of 256 stays under half full

// reset empties the index, keeping its table.
func (x *seqIndex) reset() {
	if x.keys == nil {
		x.grow(minSeqIndexBits)
		return
	}
	clear(x.keys)
	x.n = 0
}

func (x *seqIndex) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> (64 - x.bits) }

// get returns the position stored for k.
func (x *seqIndex) get(k uint64) (int32, bool) {
	mask := uint64(len(x.keys) - 1)
	for i := x.slot(k); ; i = (i + 1) & mask {
		switch x.keys[i] {
		case k:
			return x.pos[i], true
		case 0:
			return 0, false
		}
	}
}

// put stores position p for k (k not yet in the index).
func (x *seqIndex) put(k uint64, p int32) {
	if 2*(x.n+1) > len(x.keys) {
		x.grow(x.bits + 1)
	}
	mask := uint64(len(x.keys) - 1)
	i := x.slot(k)
	for x.keys[i] != 0 {
		i = (i + 1) & mask
	}
	x.keys[i], x.pos[i] = k, p
	x.n++
}

func (x *seqIndex) grow(bits uint) {
	keys, pos := x.keys, x.pos
	x.bits, x.n = bits, 0
	x.keys, x.pos = make([]uint64, 1<<bits), make([]int32, 1<<bits)
	for i, k := range keys {
		if k != 0 {
			x.put(k, pos[i])
		}
	}
}

// runState is the reusable part of a run: its lists, indexes and
// scratch, kept in a pool so a request allocates little.
type runState struct {
	nodes  []runNode
	edges  []runEdge
	nodeAt seqIndex // node seq -> index in nodes
	edgeAt seqIndex // edge seq -> index in edges

	// ranked is nodes' indexes best first (stitch orders them once;
	// contextState reads the top).
	ranked []int32

	// scratch for expand and scoreCands
	order          []uint64 // scoreCands' candidates by bound (boundKey)
	best           topFloats
	frontier, next []int32
	cands          []edgeCand // one expansion step's candidates
	scores, ages   []float64
	bounds         []float64 // codeBounds' results
	sims           []float32
	codes          [][]int8  // codeBounds' scratch: the candidates' codes
	scales         []float32 // and their scales
	groups         []decayGroup
	groupS, groupA []float64
	edgeOrder      []int32
	// contextState's blend: the query and the best nodes' embeddings,
	// and their weights.
	stateVecs    [][]float32
	stateWeights []float64
	// the seeding's candidates and their nodes (fromVector)
	seeds     []candidate
	candNodes []*particle.Node
}

// maxPooledItems keeps a run state that grew for a huge request (a
// budget in the thousands) out of the pool.
const maxPooledItems = 4096

var runStates = sync.Pool{New: func() any { return new(runState) }}

func getRunState() *runState {
	st := runStates.Get().(*runState)
	st.reset()
	return st
}

func putRunState(st *runState) {
	if st == nil || cap(st.nodes)+cap(st.edges) > maxPooledItems {
		return
	}
	clear(st.nodes[:cap(st.nodes)]) // drop pointers into the graph
	clear(st.stateVecs[:cap(st.stateVecs)])
	clear(st.seeds[:cap(st.seeds)])
	clear(st.candNodes[:cap(st.candNodes)])
	clear(st.edges[:cap(st.edges)])
	clear(st.cands[:cap(st.cands)])
	runStates.Put(st)
}

func (st *runState) reset() {
	st.nodes, st.edges, st.ranked = st.nodes[:0], st.edges[:0], st.ranked[:0]
	st.candNodes = st.candNodes[:0]
	st.nodeAt.reset()
	st.edgeAt.reset()
}

// nodeIndex is the index of n among the run's nodes.
func (st *runState) nodeIndex(n *particle.Node) (int32, bool) {
	if n.Seq != 0 {
		return st.nodeAt.get(n.Seq)
	}
	for i := range st.nodes {
		if st.nodes[i].n.ID == n.ID {
			return int32(i), true
		}
	}
	return 0, false
}

// hasEdge reports whether the run keeps e, whose seq is seq (e.Seq,
// which the caller passes when it has it at hand: the field lies in
// the last line of the edge's 640 bytes, a miss of its own).
func (st *runState) hasEdge(e *particle.Edge, seq uint64) bool {
	if seq != 0 {
		_, ok := st.edgeAt.get(seq)
		return ok
	}
	for i := range st.edges {
		if st.edges[i].e.ID == e.ID {
			return true
		}
	}
	return false
}

// keepEdge adds re's edge, whose seq is seq (as for hasEdge), to the
// run's edges unless it is there.
func (st *runState) keepEdge(re runEdge, seq uint64) {
	if st.hasEdge(re.e, seq) {
		return
	}
	if seq != 0 {
		st.edgeAt.put(seq, int32(len(st.edges)))
	}
	st.edges = append(st.edges, re)
}
