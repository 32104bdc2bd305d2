package particle

import (
	"unsafe"
)

// A committed edge is kept where a collection reads one cache line of it
// instead of all of them, in one allocation with everything it holds. A
// box (boxFor) has pointer words in each of its ten to twenty cache
// lines, and while a fleet streams in, the view's edges are most of the
// heap every mark phase scans. A committed edge needs, outside itself,
// only its id and embedding (shared with its other versions, and the
// vector index's indexer compares the embedding by address) and, when it
// is not one of EdgeTypes, its type. So a commit copies the batch's edge
// into the body of a keptBox, a region whose words the collector does
// not read, with its assertion, provenance, lists, step indices past
// stepIndexes and strings, and points the box's few pointer words (keep)
// at the rest: the collector marks those through keep, and everything
// else the edge points at lies in the box, which any pointer to the edge
// keeps alive. Edges are immutable once published (view); the only
// pointer written into one after is its interned namespace, kept for
// good (pinNamespace).

// keptWords is how many pointers a kept box holds for the collector:
// the edge's id, embedding and type.
const keptWords = 3

// keptBox is a committed edge's allocation: keep, which the collector
// scans, and body (B, an array of uint64), which it does not, holding
// the edge laid out as a box (packedEdge), then its lists, step indices
// and flag (layoutOf), then its strings.
type keptBox[B any] struct {
	keep [keptWords]unsafe.Pointer
	body B
}

// newKeptBox returns an allocation whose body holds at least size bytes
// (zeroed), its keep words and its body, or nil if none is that large.
// Each box fills one of Go's size classes from 768 to 3,072 bytes
// exactly, with the allocation's 8-byte header (boxWords): the
// collector reads an allocation as an array of its type, and a type
// shorter than its slot would have it read the slot's tail as a second
// element's keep words.
func newKeptBox(size uintptr) (keep *[keptWords]unsafe.Pointer, body unsafe.Pointer) {
	switch words := (size + 7) / 8; {
	case words <= 768/8-boxWords:
		return keptBody[[768/8 - boxWords]uint64]()
	case words <= 896/8-boxWords:
		return keptBody[[896/8 - boxWords]uint64]()
	case words <= 1024/8-boxWords:
		return keptBody[[1024/8 - boxWords]uint64]()
	case words <= 1152/8-boxWords:
		return keptBody[[1152/8 - boxWords]uint64]()
	case words <= 1280/8-boxWords:
		return keptBody[[1280/8 - boxWords]uint64]()
	case words <= 1408/8-boxWords:
		return keptBody[[1408/8 - boxWords]uint64]()
	case words <= 1536/8-boxWords:
		return keptBody[[1536/8 - boxWords]uint64]()
	case words <= 1792/8-boxWords:
		return keptBody[[1792/8 - boxWords]uint64]()
	case words <= 2048/8-boxWords:
		return keptBody[[2048/8 - boxWords]uint64]()
	case words <= 2304/8-boxWords:
		return keptBody[[2304/8 - boxWords]uint64]()
	case words <= 2688/8-boxWords:
		return keptBody[[2688/8 - boxWords]uint64]()
	case words <= 3072/8-boxWords:
		return keptBody[[3072/8 - boxWords]uint64]()
	}
	return nil, nil
}

// boxWords is what a size class of class/8 words holds beside a kept
// box's body: the allocation's header (mallocHeader) and the keep words.
const boxWords = mallocHeader/8 + keptWords

// mallocHeader is the header Go's allocator puts before an object with
// pointers larger than 512 bytes (its type).
const mallocHeader = 8

func keptBody[B any]() (*[keptWords]unsafe.Pointer, unsafe.Pointer) {
	k := new(keptBox[B])
	return &k.keep, unsafe.Pointer(&k.body)
}

// commitEdge returns the view's version of e, a batch's edge: kept
// (keepEdge) or, where it cannot be, packed (packEdge).
func commitEdge(e *Edge) *Edge {
	if k := keepEdge(e); k != nil {
		return k
	}
	return packEdge(e)
}

// keepEdge returns a copy of e in a kept box, or nil when a time of it
// carries a zone (a location of the heap's) or it is too large for any
// box. e is left as it is.
func keepEdge(e *Edge) *Edge {
	if zonedEdge(e) {
		return nil
	}
	packNS := e.Namespace != DefaultNamespace
	var p packer
	eachPackedString(e, packNS, p.size)
	l := layoutOf(e, stepsPastTable(e))
	keep, base := newKeptBox(l.size + uintptr(p.n))
	if keep == nil {
		return nil
	}
	typ := internEdgeType(e.Type)
	keep[0] = unsafe.Pointer(unsafe.StringData(e.ID))
	keep[1] = unsafe.Pointer(unsafe.SliceData(e.Embedding))
	if !isEdgeTypeConstant(typ) {
		keep[2] = unsafe.Pointer(unsafe.StringData(string(typ)))
	}
	out := placeEdge(base, e, l)
	out.Type = typ
	if !packNS {
		out.Namespace = DefaultNamespace
	}
	// The strings last, after everything that holds them is in the box.
	if p.n > 0 {
		p.buf = unsafe.Slice((*byte)(unsafe.Add(base, l.size)), p.n)[:0]
		eachPackedString(out, packNS, p.pack)
	}
	return out
}
