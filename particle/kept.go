package particle

import (
	"unsafe"
)

// A committed edge is kept where a collection reads one cache line of it
// instead of all of them. A box (boxFor) has pointer words in each of its
// ten to twenty cache lines, and while a fleet streams in, the view's
// edges are most of the heap every mark phase scans: a longer phase
// slows the commit chain for longer (the visibility tail lies inside
// the mark phases). Once packed (packEdge), an edge points at its own
// assertion, provenance and lists, at its packed strings, at its id and
// embedding (shared with its other versions) and at constants. So
// keepEdge copies it, with its assertion, provenance and lists, into
// the body of a keptBox, a region whose words the collector does not
// read, and points the box's few pointer words (keep) at what it holds
// outside itself: the collector marks those through keep, and everything
// else the edge points at lies in the box, which any pointer to the edge
// keeps alive. Edges are immutable once published (view); the only
// pointer written into one after is its interned namespace, kept for
// good (pinNamespace).

// keptWords is how many pointers a kept box holds for the collector:
// the edge's id, packed strings, embedding and type.
const keptWords = 4

// keptBox is a committed edge's allocation: keep, which the collector
// scans, and body (B, an array of uint64), which it does not, holding
// the edge laid out as a box (packedEdge) and then its lists.
type keptBox[B any] struct {
	keep [keptWords]unsafe.Pointer
	body B
}

// newKeptBox returns an allocation whose body holds at least size bytes
// (zeroed), its keep words and its body, or nil if none is that large.
// The bodies' sizes fill Go's size classes from 768 to 3,072 bytes with
// the allocation's 8-byte header.
func newKeptBox(size uintptr) (keep *[keptWords]unsafe.Pointer, body unsafe.Pointer) {
	words := (size + 7) / 8
	switch {
	case words <= 91:
		return keptBody[[91]uint64]()
	case words <= 107:
		return keptBody[[107]uint64]()
	case words <= 123:
		return keptBody[[123]uint64]()
	case words <= 139:
		return keptBody[[139]uint64]()
	case words <= 155:
		return keptBody[[155]uint64]()
	case words <= 171:
		return keptBody[[171]uint64]()
	case words <= 187:
		return keptBody[[187]uint64]()
	case words <= 219:
		return keptBody[[219]uint64]()
	case words <= 251:
		return keptBody[[251]uint64]()
	case words <= 283:
		return keptBody[[283]uint64]()
	case words <= 331:
		return keptBody[[331]uint64]()
	case words <= 379:
		return keptBody[[379]uint64]()
	}
	return nil, nil
}

func keptBody[B any]() (*[keptWords]unsafe.Pointer, unsafe.Pointer) {
	k := new(keptBox[B])
	return &k.keep, unsafe.Pointer(&k.body)
}

// keepEdge returns packed edge e (packEdge), whose strings but its id,
// type and namespace lie in strs, copied into a kept box, or e itself
// when it cannot be: a field would point at the heap outside the box
// and what keep holds (a time in a zone, a string outside strs), or it
// is too large for any box.
func keepEdge(e *Edge, strs []byte) *Edge {
	if !keepable(e, strs) {
		return e
	}
	steps := 0 // (in strs: see packEdge)
	l := layoutOf(e, steps)
	keep, base := newKeptBox(l.size)
	if keep == nil {
		return e
	}
	keep[0] = unsafe.Pointer(unsafe.StringData(e.ID))
	keep[1] = unsafe.Pointer(unsafe.SliceData(strs))
	keep[2] = unsafe.Pointer(unsafe.SliceData(e.Embedding))
	if !isEdgeTypeConstant(e.Type) {
		keep[3] = unsafe.Pointer(unsafe.StringData(string(e.Type)))
	}
	// The body is not typed for the collector: its words are copied as
	// they are, without write barriers, which it needs for none of them.
	out := (*Edge)(base)
	rawCopy(base, unsafe.Pointer(e), unsafe.Sizeof(Edge{}))
	if e.Assertion != nil {
		a := (*Assertion)(unsafe.Add(base, unsafe.Offsetof(packedEdge[[1]Provenance]{}.a)))
		rawCopy(unsafe.Pointer(a), unsafe.Pointer(e.Assertion), unsafe.Sizeof(Assertion{}))
		rawSetPointer(unsafe.Pointer(&out.Assertion), unsafe.Pointer(a))
	}
	if n := len(e.Provenance); n > 0 {
		p := unsafe.Add(base, l.prov)
		rawCopy(p, unsafe.Pointer(unsafe.SliceData(e.Provenance)), uintptr(n)*unsafe.Sizeof(Provenance{}))
		rawSetSlice(unsafe.Pointer(&out.Provenance), p, n)
	} else if e.Provenance != nil {
		rawSetSlice(unsafe.Pointer(&out.Provenance), unsafe.Pointer(unsafe.SliceData([]Provenance{})), 0)
	}
	at := l.strs
	for _, s := range [...]*[]string{&out.Scope.Audience, &out.Policy.AllowRoles, &out.Policy.DenyRoles, &out.Contradicts} {
		n := len(*s)
		if n == 0 {
			if *s != nil {
				rawSetSlice(unsafe.Pointer(s), unsafe.Pointer(unsafe.SliceData([]string{})), 0)
			}
			continue
		}
		dst := unsafe.Add(base, at)
		rawCopy(dst, unsafe.Pointer(unsafe.SliceData(*s)), uintptr(n)*unsafe.Sizeof(""))
		rawSetSlice(unsafe.Pointer(s), dst, n)
		at += uintptr(n) * unsafe.Sizeof("")
	}
	if e.Policy.Portable != nil {
		q := unsafe.Add(base, l.flag)
		*(*bool)(q) = *e.Policy.Portable
		rawSetPointer(unsafe.Pointer(&out.Policy.Portable), q)
	}
	return out
}

// keepable reports whether keepEdge can keep e: no time of it carries a
// zone, and every string but its id and type lies in strs (its
// namespace may be the default one, a constant), as do its step indices
// past stepIndexes.
func keepable(e *Edge, strs []byte) bool {
	if len(strs) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(strs)))
	in := mappedMem{lo, lo + uintptr(len(strs))}
	if !in.mapped(e.Namespace) && unsafe.StringData(e.Namespace) != unsafe.StringData(DefaultNamespace) {
		return false
	}
	for i := range e.Provenance {
		if p := e.Provenance[i].StepIndex; p != nil && !inStepIndexes(p) && !in.inMapping(unsafe.Pointer(p)) {
			return false
		}
	}
	return in.holdsFields(e)
}

// rawCopy copies n bytes from src to dst without write barriers: dst is
// memory the collector does not scan.
func rawCopy(dst, src unsafe.Pointer, n uintptr) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// rawSetPointer writes p at dst, a pointer word the collector does not
// scan, without a write barrier.
func rawSetPointer(dst, p unsafe.Pointer) { *(*uintptr)(dst) = uintptr(p) }

// rawSetSlice points the slice header at dst, in memory the collector
// does not scan, at n elements from p, without a write barrier.
func rawSetSlice(dst, p unsafe.Pointer, n int) {
	w := (*[3]uintptr)(dst)
	w[0], w[1], w[2] = uintptr(p), uintptr(n), uintptr(n)
}
