package particle

import (
	"slices"
	"unsafe"
)

// A record written by a batch is packed before the view takes it: its
// strings, and its provenance's step indices ahead of them, are copied
// into one allocation. A record decoded from its stored bytes (a load,
// the view snapshot) lies this way already; one built by an ingest
// holds strings made one by one, from many messages, scattered over the
// heap. Readers that walk a record's strings, such as the planner's
// answer encoders, then touch a few adjacent cache lines instead of a
// line per string: on the medium bench store, encoding an answer after
// an ingest took as long as after a reopen once packed, where it took
// about 1.6 times as long before.
//
// The id stays as it is. It is the key of the view's maps, which keep
// the string they were first given; packing it would have every key
// hold on to its record's first packed strings after later versions
// replace them.

// packer copies strings into one buffer sized beforehand.
type packer struct {
	n   int
	buf []byte
}

func (p *packer) size(s *string) { p.n += len(*s) }

func (p *packer) pack(s *string) {
	if len(*s) == 0 {
		return
	}
	at := len(p.buf)
	p.buf = append(p.buf, *s...)
	*s = unsafe.String(&p.buf[at], len(*s))
}

// PackStrings copies the strings visit hands its callback into one
// allocation, each string then a view of its part: one object for the
// collector where there were as many as strings. visit is called twice
// and must hand over the same strings both times.
func PackStrings(visit func(each func(*string))) { packStrings(0, visit) }

// packStrings calls visit twice, to size the buffer and then to fill
// it; visit must hand its callback the same strings both times. The
// buffer starts with head bytes for the caller, 8-byte aligned (its
// size is then a multiple of 8, which the allocator aligns so even for
// the smallest); it is returned (nil when empty).
func packStrings(head int, visit func(each func(*string))) []byte {
	var p packer
	visit(p.size)
	n := head + p.n
	if n == 0 {
		return nil
	}
	if head > 0 {
		n = (n + 7) &^ 7
	}
	p.buf = make([]byte, head, n)
	visit(p.pack)
	return p.buf
}

// packEdge packs e's strings and step indices, and returns the packed
// edge: a copy of e sharing one allocation with its assertion and its
// provenance (boxEdge). The other slices that hold strings are copied
// first: a batch's edge may share arrays with the version readers see,
// or with other edges of its step. A commit packs an edge it cannot keep
// (commitEdge).
func packEdge(e *Edge) *Edge {
	e = boxEdge(e)
	steps := 0 // the step indices past stepIndexes, packed ahead of the strings
	for i := range e.Provenance {
		if p := &e.Provenance[i]; p.StepIndex != nil {
			if at := stepIndex(*p.StepIndex); at != nil {
				p.StepIndex = at
			} else {
				steps++
			}
		}
	}
	e.Scope.Audience = slices.Clone(e.Scope.Audience)
	e.Policy.AllowRoles = slices.Clone(e.Policy.AllowRoles)
	e.Policy.DenyRoles = slices.Clone(e.Policy.DenyRoles)
	e.Contradicts = slices.Clone(e.Contradicts)
	// The type and the usual namespace are constants, in no heap object;
	// as decoded from a message each was a string of its own (the type
	// one per edge, the namespace one per message), kept by the edge
	// for the collector to mark. Any other namespace is packed.
	e.Type = internEdgeType(e.Type)
	packNS := e.Namespace != DefaultNamespace
	if !packNS {
		e.Namespace = DefaultNamespace
	}
	buf := packStrings(steps*int(unsafe.Sizeof(0)), func(each func(*string)) { eachPackedString(e, packNS, each) })
	if steps > 0 {
		// The step indices lie ahead of the strings, in the same
		// allocation: no pointers in either, so the collector marks it
		// without scanning it, one object where there were two.
		ints := unsafe.Slice((*int)(unsafe.Pointer(unsafe.SliceData(buf))), steps)
		j := 0
		for i := range e.Provenance {
			if p := &e.Provenance[i]; p.StepIndex != nil && !inStepIndexes(p.StepIndex) {
				ints[j] = *p.StepIndex
				p.StepIndex = &ints[j]
				j++
			}
		}
	}
	return e
}

// stepIndexes holds the step indices 0, 1, …: the StepIndex of a
// committed or loaded provenance record points into it (stepIndex),
// where each pointed at an int of its own, one more allocation per
// loaded edge, or 8 bytes of its packed strings. It is not in Go's
// heap, so a collection does not mark what points into it. Nothing
// writes through a StepIndex.
//
// A package variable is in the program's data rather than Go's heap (a
// composite made in a function would be on the heap). It is filled by
// its initializer, not an init function, so that a package variable
// whose initializer decodes an edge (through stepIndex) is initialized
// after it.
var stepIndexes = func() (t [1 << 14]int) {
	for i := range t {
		t[i] = i
	}
	return t
}()

// stepIndex returns the address of i in stepIndexes, or nil when it
// holds no such index.
func stepIndex(i int) *int {
	if uint(i) < uint(len(stepIndexes)) {
		return &stepIndexes[i]
	}
	return nil
}

// inStepIndexes reports whether p points into stepIndexes.
func inStepIndexes(p *int) bool {
	at := uintptr(unsafe.Pointer(p)) - uintptr(unsafe.Pointer(&stepIndexes))
	return at < unsafe.Sizeof(stepIndexes)
}

// packedEdge is a committed edge, its assertion and its provenance (A:
// an array of as many Provenance) in one allocation.
type packedEdge[A any] struct {
	e Edge
	a Assertion
	p A
}

// emptyBox returns a zero edge in a packedEdge[A] and its assertion's
// place there (unset); its provenance is the first n of the box's
// entries (A is [m]Provenance, m >= n), non-nil.
func emptyBox[A any](n int) (*Edge, *Assertion) {
	b := new(packedEdge[A])
	if m := int(unsafe.Sizeof(b.p) / unsafe.Sizeof(Provenance{})); m > 0 {
		b.e.Provenance = unsafe.Slice((*Provenance)(unsafe.Pointer(&b.p)), m)[:n]
	} else {
		b.e.Provenance = []Provenance{} // (no entry to point at: a zero-size array)
	}
	return &b.e, &b.a
}

// boxFor returns a zero edge in a box with room for an assertion, whose
// place it returns (unset), and with n zero provenance entries: in the
// box up to MaxProvenance+1 (without room for more), else in an array
// of their own. A decoded edge is read into it.
func boxFor(n int) (*Edge, *Assertion) {
	switch n {
	case 0:
		return emptyBox[[0]Provenance](0)
	case 1:
		return emptyBox[[1]Provenance](1)
	case 2:
		return emptyBox[[2]Provenance](2)
	case 3:
		return emptyBox[[3]Provenance](3)
	case 4:
		return emptyBox[[4]Provenance](4)
	case 5:
		return emptyBox[[5]Provenance](5)
	case 6:
		return emptyBox[[6]Provenance](6)
	case 7:
		return emptyBox[[7]Provenance](7)
	case 8:
		return emptyBox[[8]Provenance](8)
	case MaxProvenance + 1:
		return emptyBox[[MaxProvenance + 1]Provenance](MaxProvenance + 1)
	default:
		e, a := emptyBox[[0]Provenance](0)
		e.Provenance = make([]Provenance, n)
		return e, a
	}
}

// newBoxedEdge returns a zero edge whose provenance is p, in a box with
// room for an assertion, and that assertion's place (unset): a new edge,
// built in one allocation until its batch commits a copy (commitEdge).
func newBoxedEdge(p Provenance) (*Edge, *Assertion) {
	e, a := boxFor(1)
	e.Provenance[0] = p
	return e, a
}

// boxRoom is boxEdge with room for one more provenance entry than e
// holds: a batch's copy of a committed edge (cloneEdge).
func boxRoom(e *Edge) *Edge { return boxWith(e, 1) }

// boxEdge returns a copy of e that shares one allocation with its
// assertion and its provenance: a committed edge is one object for the
// collector to mark where it was up to three. The provenance is a
// window of at most MaxProvenance sightings; a longer one keeps an array
// of its own.
func boxEdge(e *Edge) *Edge { return boxWith(e, 0) }

// boxWith is boxEdge with room in the box for room (0 or 1) more
// provenance entries. A nil provenance stays nil, an empty one empty.
func boxWith(e *Edge, room int) *Edge {
	n := len(e.Provenance)
	var c *Edge
	var a *Assertion
	var p []Provenance
	if e.Provenance == nil || n > MaxProvenance {
		c, a = boxFor(0)
		if n > 0 {
			p = append(make([]Provenance, 0, n+room), e.Provenance...)
		} else {
			p = e.Provenance
		}
	} else {
		c, a = boxFor(n + room)
		p = c.Provenance[:n]
		copy(p, e.Provenance)
	}
	*c = *e
	c.Provenance = p
	if e.Assertion != nil {
		*a = *e.Assertion
		c.Assertion = a
	}
	return c
}

// eachPackedString calls each with every string of e that a packed
// edge holds in its own memory: all but its id, its type (a constant
// when known) and, unless packNS, its namespace (the default one, a
// constant).
func eachPackedString(e *Edge, packNS bool, each func(*string)) {
	if packNS {
		each(&e.Namespace)
	}
	each(&e.Source)
	each(&e.Target)
	if e.Assertion != nil {
		each(&e.Assertion.Predicate)
		each(&e.Assertion.Value)
	}
	for i := range e.Provenance {
		p := &e.Provenance[i]
		each(&p.EpisodeID)
		each(&p.CMSSpanID)
		each(&p.Agent)
	}
	each(&e.Scope.Location)
	eachString(e.Scope.Audience, each)
	each(&e.Salience.DecayFn)
	eachString(e.Policy.AllowRoles, each)
	eachString(e.Policy.DenyRoles, each)
	each((*string)(&e.Policy.Sensitivity))
	each(&e.Policy.Subject)
	each(&e.Policy.Origin)
	each((*string)(&e.Status))
	each(&e.SupersededBy)
	eachString(e.Contradicts, each)
}

// packNode packs n's strings, its props aside (a map keeps its own).
// The slices that hold them are copied first, as packEdge's. When old,
// the view's node of the same id, holds the same name and lists (a node
// touched again, its lists shared by cloneNode and not grown), they are
// packed already and n is left as it is.
func packNode(n, old *Node) {
	a := &n.Attributes
	if old != nil && n.Name == old.Name && sameList(n.Aliases, old.Aliases) && sameList(a.Tags, old.Attributes.Tags) &&
		sameList(a.CMSSpanIDs, old.Attributes.CMSSpanIDs) && sameList(a.RLDSEpisodeIDs, old.Attributes.RLDSEpisodeIDs) {
		return
	}
	n.Aliases = slices.Clone(n.Aliases)
	a.Tags = slices.Clone(a.Tags)
	a.CMSSpanIDs = slices.Clone(a.CMSSpanIDs)
	a.RLDSEpisodeIDs = slices.Clone(a.RLDSEpisodeIDs)
	packStrings(0, func(each func(*string)) {
		each(&n.Name)
		eachString(n.Aliases, each)
		eachString(a.Tags, each)
		eachString(a.RLDSEpisodeIDs, each)
		eachString(a.CMSSpanIDs, each)
	})
}

func eachString(ss []string, each func(*string)) {
	for i := range ss {
		each(&ss[i])
	}
}

// sameList reports whether a and b are one list: the same length over
// the same array.
func sameList(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
