package particle

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// keptEdge is an edge with every field set (a type of its own, two
// provenance records, one step index past stepIndexes), packed and kept
// as a commit does, beside a copy of what it was.
func keptEdge(t *testing.T) (kept *Edge, strs []byte, want Edge) {
	t.Helper()
	e := &Edge{}
	(&filler{t: t}).fill(reflect.ValueOf(e).Elem(), "edge")
	small, large := 7, len(stepIndexes)+3
	e.Provenance[0].StepIndex, e.Provenance[1].StepIndex = &small, &large
	want = deepCopyEdge(e)
	packed, strs := packEdge(e, false)
	return keepEdge(packed, strs), strs, want
}

// keepOf is the keep words of kept edge e's box.
func keepOf(e *Edge) *[keptWords]unsafe.Pointer {
	return (*[keptWords]unsafe.Pointer)(unsafe.Add(unsafe.Pointer(e), -int(unsafe.Offsetof(keptBox[[1]uint64]{}.body))))
}

// TestKeptEdgePointsOnlyAtItselfAndWhatItKeeps keeps an edge with every
// field set: it equals what it was, and every pointer it holds, followed
// through strings, slices and pointers, lies in its box's body, in its
// packed strings or in stepIndexes, or is its id, embedding or type,
// which its keep words hold for the collector. A field added to Edge
// that keepEdge leaves pointing at the heap outside these fails here.
func TestKeptEdgePointsOnlyAtItselfAndWhatItKeeps(t *testing.T) {
	got, strs, want := keptEdge(t)
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("kept edge differs:\n%+v\nwant\n%+v", *got, want)
	}
	keep := keepOf(got)
	if keep[0] != unsafe.Pointer(unsafe.StringData(got.ID)) || keep[1] != unsafe.Pointer(unsafe.SliceData(strs)) ||
		keep[2] != unsafe.Pointer(unsafe.SliceData(got.Embedding)) || keep[3] != unsafe.Pointer(unsafe.StringData(string(got.Type))) {
		t.Fatal("the keep words do not hold the edge's id, strings, embedding and type")
	}
	base := uintptr(unsafe.Pointer(got))
	end := base + layoutOf(got, 0).size
	within := func(p uintptr, data unsafe.Pointer, n uintptr) bool {
		return p >= uintptr(data) && p < uintptr(data)+n
	}
	count := 0
	pointersOf(reflect.ValueOf(got).Elem(), "edge", func(path string, p unsafe.Pointer) {
		count++
		a := uintptr(p)
		switch {
		case a >= base && a < end, within(a, unsafe.Pointer(unsafe.SliceData(strs)), uintptr(len(strs))), inStepIndexes((*int)(p)),
			within(a, keep[0], uintptr(len(got.ID))), within(a, keep[2], uintptr(4*len(got.Embedding))), within(a, keep[3], uintptr(len(got.Type))):
		default:
			t.Errorf("%s points at %#x: outside the kept box [%#x, %#x), its strings and what it keeps", path, a, base, end)
		}
	})
	if count < 30 {
		t.Fatalf("checked %d pointers, want every field's", count)
	}
}

// TestEdgeWithHeapFieldsIsNotKept: keepEdge leaves as it is an edge with
// a field pointing into the heap outside its packed strings and what a
// box keeps (a zoned time, a string set after packing), or without
// packed strings.
func TestEdgeWithHeapFieldsIsNotKept(t *testing.T) {
	for name, spoil := range map[string]func(e *Edge){
		"zoned time":  func(e *Edge) { e.CreatedAt = e.CreatedAt.In(time.FixedZone("X", 3600)) },
		"provenance":  func(e *Edge) { e.Provenance[0].ObservedAt = e.Provenance[0].ObservedAt.In(time.FixedZone("X", 60)) },
		"string":      func(e *Edge) { e.Policy.Subject = fmt.Sprint("heap ", len(e.ID)) },
		"list string": func(e *Edge) { e.Scope.Audience[0] = fmt.Sprint("heap ", len(e.ID)) },
		"namespace":   func(e *Edge) { e.Namespace = fmt.Sprint("heap ", len(e.ID)) },
		"step index":  func(e *Edge) { step := 1 << 20; e.Provenance[1].StepIndex = &step },
	} {
		e := &Edge{}
		(&filler{t: t}).fill(reflect.ValueOf(e).Elem(), "edge")
		packed, strs := packEdge(e, false)
		spoil(packed)
		if got := keepEdge(packed, strs); got != packed {
			t.Errorf("%s: kept", name)
		}
	}
	e := &Edge{ID: "e", Namespace: DefaultNamespace, Type: EdgeCausal}
	if got := keepEdge(e, nil); got != e {
		t.Error("an edge without packed strings was kept")
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
