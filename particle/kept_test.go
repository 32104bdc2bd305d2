package particle

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// keptEdge is an edge with every field set (a type of its own, two
// provenance records, one step index past stepIndexes), kept as a commit
// does, beside a copy of what it was.
func keptEdge(t *testing.T) (kept *Edge, want Edge) {
	t.Helper()
	e := &Edge{}
	(&filler{t: t}).fill(reflect.ValueOf(e).Elem(), "edge")
	small, large := 7, len(stepIndexes)+3
	e.Provenance[0].StepIndex, e.Provenance[1].StepIndex = &small, &large
	want = deepCopyEdge(e)
	kept = keepEdge(e)
	if kept == nil {
		t.Fatal("not kept")
	}
	if !reflect.DeepEqual(*e, want) {
		t.Fatal("keeping an edge changed it")
	}
	return kept, want
}

// keepOf is the keep words of kept edge e's box.
func keepOf(e *Edge) *[keptWords]unsafe.Pointer {
	return (*[keptWords]unsafe.Pointer)(unsafe.Add(unsafe.Pointer(e), -int(unsafe.Offsetof(keptBox[[1]uint64]{}.body))))
}

// TestKeptEdgePointsOnlyAtItselfAndWhatItKeeps keeps an edge with every
// field set: it equals what it was, and every pointer it holds, followed
// through strings, slices and pointers, lies in its box's body or in
// stepIndexes, or is its id, embedding or type, which its keep words
// hold for the collector. A field added to Edge that keepEdge leaves
// pointing at the heap outside these fails here.
func TestKeptEdgePointsOnlyAtItselfAndWhatItKeeps(t *testing.T) {
	got, want := keptEdge(t)
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("kept edge differs:\n%+v\nwant\n%+v", *got, want)
	}
	keep := keepOf(got)
	if keep[0] != unsafe.Pointer(unsafe.StringData(got.ID)) || keep[1] != unsafe.Pointer(unsafe.SliceData(got.Embedding)) ||
		keep[2] != unsafe.Pointer(unsafe.StringData(string(got.Type))) {
		t.Fatal("the keep words do not hold the edge's id, embedding and type")
	}
	base := uintptr(unsafe.Pointer(got))
	end := base + layoutOf(got, 1).size
	var strs uintptr
	eachPackedString(got, true, func(s *string) { strs += uintptr(len(*s)) })
	within := func(p uintptr, data unsafe.Pointer, n uintptr) bool {
		return p >= uintptr(data) && p < uintptr(data)+n
	}
	count := 0
	pointersOf(reflect.ValueOf(got).Elem(), "edge", func(path string, p unsafe.Pointer) {
		count++
		a := uintptr(p)
		switch {
		case a >= base && a < end+strs, inStepIndexes((*int)(p)),
			within(a, keep[0], uintptr(len(got.ID))), within(a, keep[1], uintptr(4*len(got.Embedding))), within(a, keep[2], uintptr(len(got.Type))):
		default:
			t.Errorf("%s points at %#x: outside the kept box [%#x, %#x) and what it keeps", path, a, base, end+strs)
		}
	})
	if count < 30 {
		t.Fatalf("checked %d pointers, want every field's", count)
	}
	// Its strings lie in one stretch of the box, each its own bytes.
	checkPacked(t, "kept edge", got)
}

// TestEdgeWithZonedTimeIsNotKept: keepEdge leaves an edge with a time in
// a zone (whose location is the heap's) to packEdge, which commitEdge
// then calls; an edge of the default namespace and a known type keeps
// neither string (constants).
func TestEdgeWithZonedTimeIsNotKept(t *testing.T) {
	for name, spoil := range map[string]func(e *Edge){
		"zoned time": func(e *Edge) { e.CreatedAt = e.CreatedAt.In(time.FixedZone("X", 3600)) },
		"provenance": func(e *Edge) { e.Provenance[0].ObservedAt = e.Provenance[0].ObservedAt.In(time.FixedZone("X", 60)) },
	} {
		e := &Edge{}
		(&filler{t: t}).fill(reflect.ValueOf(e).Elem(), "edge")
		spoil(e)
		if keepEdge(e) != nil {
			t.Errorf("%s: kept", name)
		}
		if c := commitEdge(e); c == nil || !inOwnBox(c) || c.CreatedAt != e.CreatedAt {
			t.Errorf("%s: not committed in a box", name)
		}
	}
	e := &Edge{ID: "e", Namespace: string([]byte(DefaultNamespace)), Type: EdgeType([]byte(EdgeCausal)), Source: "a", Target: "b"}
	k := keepEdge(e)
	if k == nil || unsafe.StringData(k.Namespace) != unsafe.StringData(DefaultNamespace) ||
		unsafe.StringData(string(k.Type)) != unsafe.StringData(string(EdgeCausal)) || keepOf(k)[2] != nil {
		t.Error("the default namespace or a known type was not the constant")
	}
}

// TestCommittedEdgesAreKept commits a fleet's edges through batches:
// the heap a collection scans grows by far less than their boxes (about
// 1,000 bytes an edge when they were scanned whole), and after
// collections and garbage reusing what they freed, Check finds every
// edge of the view equal to what Badger holds.
func TestCommittedEdgesAreKept(t *testing.T) {
	before := scannableHeap()
	const edges = 16 * benchEdgesPerTxn
	s := writeFleet(t, t.TempDir(), 13, testEntities, edges)
	defer s.Close()
	checkScannedGrowth(t, before, edges, 400, "committed")
	junk := reuseFreedMemory()
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Edges < edges*9/10 {
		t.Fatalf("check of %d edges: %+v", r.Edges, r.Problems)
	}
	runtime.KeepAlive(junk)
}

// TestKeptBoxScansOnlyItsKeepWords allocates kept boxes of every size
// newKeptBox gives: a collection scans their keep words and none of
// their bodies (a box shorter than its size class's slot would have it
// read the slot's tail as another box's keep words, and count the slot).
func TestKeptBoxScansOnlyItsKeepWords(t *testing.T) {
	const boxes = 4096
	for size := uintptr(1); ; size += 64 {
		keep, _ := newKeptBox(size)
		if keep == nil {
			if size < 2048 {
				t.Fatalf("no kept box of %d bytes", size)
			}
			break
		}
		before := scannableHeap()
		hold := make([]*[keptWords]unsafe.Pointer, boxes)
		for i := range hold {
			hold[i], _ = newKeptBox(size)
		}
		// (hold's own array adds 8 bytes a box.)
		if per := (int64(scannableHeap()) - int64(before)) / boxes; per > 8*keptWords+8+8 {
			t.Fatalf("a kept box of %d bytes: the scanned heap grew by %d bytes a box, want its keep words", size, per)
		}
		runtime.KeepAlive(hold)
	}
}
