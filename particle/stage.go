package particle

import (
	"time"
	"unsafe"
)

// A view snapshot's edges are loaded into memory the collector does not
// scan. An edge box (boxFor) has pointer words in every one of its cache
// lines (its strings, slices and times), and a collection of a loaded
// view spent about half its marking reading them: at 1M edges, 340 of
// some 700 ms. Yet a loaded edge points only at the snapshot's mapping
// (its strings and embedding), at constants (its type, stepIndexes) and
// at its own assertion, provenance and lists. So the load decodes each
// edge into an edgeStage and packs it (edgeStage.pack) into one
// allocation of a pointer-free type, everything it points at either
// inside that allocation or outside Go's heap: the collector marks the
// allocation when a pointer reaches it, which keeps what is in it alive,
// and never reads it, which is safe because nothing it holds needs
// marking. An edge whose fields would point elsewhere (a time in a zone,
// an embedding outside the mapping: records of an older format) is left
// in a box of the collector's, as any other decode does.
//
// Edges are immutable once published (view), and nothing writes a
// pointer into a loaded edge but the view's namespace interning, whose
// strings are kept for good (pinNamespace).

// edgeStage holds an edge being decoded (decodeEdgeAs) until pack copies
// it out; a loader reuses one for every edge it decodes.
type edgeStage struct {
	e        Edge
	a        Assertion
	prov     []Provenance
	strs     []string // Audience, AllowRoles, DenyRoles and Contradicts, in turn
	steps    []int    // step indices past stepIndexes
	portable bool
	// The memory the edge's strings and embedding must lie in for pack
	// to take it: the snapshot's mapping.
	mappedMem
}

// mappedMem bounds a view snapshot's mapping (zero: none, or one in the
// heap, where nothing is packed).
type mappedMem struct{ lo, hi uintptr }

// mappedMemOf bounds mem, a view snapshot's mapping or one of
// anonMemory's (tests), where it is outside Go's heap (mappedOffHeap).
func mappedMemOf(mem []byte) mappedMem {
	if !mappedOffHeap || len(mem) == 0 {
		return mappedMem{}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	return mappedMem{lo, lo + uintptr(len(mem))}
}

// newEdgeStage returns a stage for the edges of mem, a view snapshot's
// mapping, or a mapping of anonMemory's (tests). Where the snapshot is
// read into the heap instead (mappedOffHeap false), it packs nothing.
func newEdgeStage(mem []byte) *edgeStage {
	// (Non-nil buffers: an empty list read into one stays non-nil.)
	return &edgeStage{prov: make([]Provenance, 0, MaxProvenance+1), strs: make([]string, 0, 16), steps: make([]int, 0, 8),
		mappedMem: mappedMemOf(mem)}
}

// box resets st for an edge of n provenance records and returns its
// edge and its assertion's place (decodeEdgeAs's boxFor).
func (st *edgeStage) box(n int) (*Edge, *Assertion) {
	if st == nil {
		return boxFor(n)
	}
	st.e, st.a = Edge{}, Assertion{}
	st.prov = append(st.prov[:0], make([]Provenance, n)...)
	st.e.Provenance = st.prov
	return &st.e, &st.a
}

// list reads a list of strings, into st's buffer when staging.
func (st *edgeStage) list(r *rd) []string {
	if st == nil {
		return r.strs()
	}
	n, isNil := r.count(1)
	if isNil {
		return nil
	}
	at := len(st.strs)
	for range n {
		st.strs = append(st.strs, r.str())
	}
	return st.strs[at:len(st.strs):len(st.strs)]
}

// begin empties st's lists before an edge's first is read.
func (st *edgeStage) begin() {
	if st != nil {
		st.strs, st.steps = st.strs[:0], st.steps[:0]
	}
}

// stepOf returns where a step index past stepIndexes lives: the i-th
// of steps, which a decode of n records allocates at its first (*steps
// nil), or st's buffer.
func (st *edgeStage) stepOf(step, i, n int, steps *[]int) *int {
	if st != nil {
		st.steps = append(st.steps, step)
		return &st.steps[len(st.steps)-1]
	}
	if *steps == nil {
		*steps = make([]int, n)
	}
	(*steps)[i] = step
	return &(*steps)[i]
}

// flag returns a pointer to v, st's when staging.
func (st *edgeStage) flag(v bool) *bool {
	if st == nil {
		return &v
	}
	st.portable = v
	return &st.portable
}

// packedLayout places an edge's parts in its allocation, after a
// packedEdge's edge and assertion, as a box (boxFor) places them: its
// assertion and provenance lie where they lie in a box.
type packedLayout struct {
	prov, strs, steps, flag, size uintptr
}

func layoutOf(e *Edge, steps int) packedLayout {
	var box packedEdge[[1]Provenance]
	var l packedLayout
	l.prov = unsafe.Offsetof(box.p)
	l.strs = l.prov + uintptr(len(e.Provenance))*unsafe.Sizeof(Provenance{})
	lists := len(e.Scope.Audience) + len(e.Policy.AllowRoles) + len(e.Policy.DenyRoles) + len(e.Contradicts)
	l.steps = l.strs + uintptr(lists)*unsafe.Sizeof("")
	l.flag = l.steps + uintptr(steps)*unsafe.Sizeof(0)
	l.size = l.flag
	if e.Policy.Portable != nil {
		l.size += unsafe.Sizeof(uintptr(0))
	}
	// (At least a packedEdge's size, tail padding included: pack
	// converts the allocation's address to one.)
	l.size = max(l.size, unsafe.Sizeof(packedEdge[[0]Provenance]{}))
	return l
}

// pack returns the staged edge copied into one allocation the collector
// does not scan, or false if a field of it would point into Go's heap
// outside that allocation (the caller then decodes it into a box).
func (st *edgeStage) pack() (*Edge, bool) {
	e := &st.e
	if !st.offHeap(e) {
		return nil, false
	}
	l := layoutOf(e, stepsPastTable(e))
	words := make([]uint64, (l.size+7)/8) // pointer-free: never scanned
	return placeEdge(unsafe.Pointer(unsafe.SliceData(words)), e, l), true
}

// stepsPastTable counts e's step indices that stepIndexes does not hold.
func stepsPastTable(e *Edge) int {
	n := 0
	for i := range e.Provenance {
		if p := e.Provenance[i].StepIndex; p != nil && stepIndex(*p) == nil {
			n++
		}
	}
	return n
}

// placeEdge copies e into the block at base laid out by l (layoutOf,
// with e's stepsPastTable): the edge, its assertion, provenance, lists,
// step indices and flag, the copy pointing at its own (a step index at
// stepIndexes where it holds one). Its strings and embedding are left
// where they are. It returns the copy.
func placeEdge(base unsafe.Pointer, e *Edge, l packedLayout) *Edge {
	box := (*packedEdge[[0]Provenance])(base)
	box.e = *e
	out := &box.e
	if e.Assertion != nil {
		box.a = *e.Assertion
		out.Assertion = &box.a
	}
	if e.Provenance != nil {
		out.Provenance = []Provenance{}
		if n := len(e.Provenance); n > 0 {
			out.Provenance = unsafe.Slice((*Provenance)(unsafe.Add(base, l.prov)), n)
			copy(out.Provenance, e.Provenance)
		}
	}
	moveLists(base, l.strs, &out.Scope.Audience, &out.Policy.AllowRoles, &out.Policy.DenyRoles, &out.Contradicts)
	at := l.steps
	for i := range out.Provenance {
		p := &out.Provenance[i]
		if p.StepIndex == nil {
			continue
		}
		if q := stepIndex(*p.StepIndex); q != nil {
			p.StepIndex = q
			continue
		}
		q := (*int)(unsafe.Add(base, at))
		*q = *p.StepIndex
		p.StepIndex = q
		at += unsafe.Sizeof(0)
	}
	if e.Policy.Portable != nil {
		q := (*bool)(unsafe.Add(base, l.flag))
		*q = *e.Policy.Portable
		out.Policy.Portable = q
	}
	return out
}

// offHeap reports whether e's strings and embedding lie in st's mapping
// (or are constants or empty) and its times carry no zone: what pack
// needs of the fields it does not copy.
func (st *edgeStage) offHeap(e *Edge) bool {
	if st.lo == 0 || !isEdgeTypeConstant(e.Type) && !st.mapped(string(e.Type)) {
		return false
	}
	if len(e.Embedding) > 0 && !st.inMapping(unsafe.Pointer(unsafe.SliceData(e.Embedding))) {
		return false
	}
	return st.mapped(e.ID) && st.mapped(e.Namespace) && st.holdsFields(e)
}

// holdsFields reports whether every string of e but its id, namespace
// and type lies in m (or is empty), and no time of e carries a zone
// (zonedEdge): what a packed edge (edgeStage.pack) needs of the fields
// it does not copy. A kept edge (keepEdge) copies its strings, and asks
// only zonedEdge.
func (m mappedMem) holdsFields(e *Edge) bool {
	for _, s := range [...]string{e.Source, e.Target, e.Scope.Location, e.Salience.DecayFn,
		string(e.Policy.Sensitivity), e.Policy.Subject, e.Policy.Origin, string(e.Status), e.SupersededBy} {
		if !m.mapped(s) {
			return false
		}
	}
	if e.Assertion != nil && !(m.mapped(e.Assertion.Predicate) && m.mapped(e.Assertion.Value)) {
		return false
	}
	for _, l := range [...][]string{e.Scope.Audience, e.Policy.AllowRoles, e.Policy.DenyRoles, e.Contradicts} {
		if !m.allMapped(l) {
			return false
		}
	}
	for i := range e.Provenance {
		p := &e.Provenance[i]
		if !m.mapped(p.EpisodeID) || !m.mapped(p.CMSSpanID) || !m.mapped(p.Agent) {
			return false
		}
	}
	return !zonedEdge(e)
}

// zonedEdge reports whether a time of e carries a location other than
// UTC, which points into the heap.
func zonedEdge(e *Edge) bool {
	for i := range e.Provenance {
		if zoned(e.Provenance[i].ObservedAt) {
			return true
		}
	}
	for _, t := range [...]time.Time{e.Scope.TimeRange.From, e.Scope.TimeRange.To, e.Belief.UpdatedAt, e.Salience.LastUpdated,
		e.ValidFrom, e.ValidTo, e.EndedAt, e.CreatedAt, e.UpdatedAt} {
		if zoned(t) {
			return true
		}
	}
	return false
}

// mapped reports whether s is empty or lies in the mapping.
func (m mappedMem) mapped(s string) bool {
	return len(s) == 0 || m.inMapping(unsafe.Pointer(unsafe.StringData(s)))
}

func (m mappedMem) inMapping(p unsafe.Pointer) bool {
	return uintptr(p) >= m.lo && uintptr(p) < m.hi
}

// allMapped reports whether every string of ss lies in the mapping.
func (m mappedMem) allMapped(ss []string) bool {
	for _, s := range ss {
		if !m.mapped(s) {
			return false
		}
	}
	return true
}

// packNode returns loaded node n copied with its lists into one
// allocation the collector does not scan, as pack does an edge, or n as
// it is when a field would point into the heap outside that allocation
// (a node with props, whose map is the heap's; a zoned time; a string
// or an embedding outside the mapping). A node's lists of episodes and
// spans grow with the fleet's history: their strings' headers were most
// of a loaded node's scanned bytes. Their arrays are exactly as long as
// the lists, so that a writer's clone that grows one copies it first.
func (m mappedMem) packNode(n *Node) *Node {
	a := &n.Attributes
	if m.lo == 0 || a.Props != nil || zoned(n.CreatedAt) || zoned(n.UpdatedAt) || zoned(n.Belief.UpdatedAt) ||
		len(n.Embedding) > 0 && !m.inMapping(unsafe.Pointer(unsafe.SliceData(n.Embedding))) ||
		!m.mapped(n.ID) || !m.mapped(n.Namespace) || !m.mapped(string(n.Type)) || !m.mapped(n.Name) ||
		!m.allMapped(n.Aliases) || !m.allMapped(a.Tags) || !m.allMapped(a.CMSSpanIDs) || !m.allMapped(a.RLDSEpisodeIDs) {
		return n
	}
	lists := len(n.Aliases) + len(a.Tags) + len(a.CMSSpanIDs) + len(a.RLDSEpisodeIDs)
	size := unsafe.Sizeof(Node{}) + uintptr(lists)*unsafe.Sizeof("")
	words := make([]uint64, (size+7)/8) // pointer-free: never scanned
	base := unsafe.Pointer(unsafe.SliceData(words))
	out := (*Node)(base)
	*out = *n
	oa := &out.Attributes
	moveLists(base, unsafe.Sizeof(Node{}), &out.Aliases, &oa.Tags, &oa.CMSSpanIDs, &oa.RLDSEpisodeIDs)
	return out
}

// moveLists copies each list into the allocation at base, one after the
// other from offset at on, and points the list at its copy; an empty
// list that is not nil becomes one outside the heap.
func moveLists(base unsafe.Pointer, at uintptr, lists ...*[]string) {
	for _, l := range lists {
		if len(*l) == 0 {
			if *l != nil {
				*l = []string{}
			}
			continue
		}
		dst := unsafe.Slice((*string)(unsafe.Add(base, at)), len(*l))
		copy(dst, *l)
		*l = dst
		at += uintptr(len(dst)) * unsafe.Sizeof("")
	}
}

// zoned reports whether t carries a location other than UTC, which
// points into the heap.
func zoned(t time.Time) bool { return t.Location() != time.UTC }

// isEdgeTypeConstant reports whether t is one of EdgeTypes' strings
// (internEdgeType's), constants outside the heap.
func isEdgeTypeConstant(t EdgeType) bool {
	for _, c := range EdgeTypes {
		if unsafe.StringData(string(c)) == unsafe.StringData(string(t)) && len(c) == len(t) {
			return true
		}
	}
	return false
}
