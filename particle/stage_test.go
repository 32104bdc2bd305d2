package particle

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
	"unsafe"
)

// stagedEdge is an edge with every field set (two provenance records,
// one step index stepIndexes holds and one past it), encoded, with its
// record copied into memory outside Go's heap as a view snapshot's
// mapping holds it.
func stagedEdge(t *testing.T) (want *Edge, rec []byte) {
	t.Helper()
	skipUnlessOffHeap(t)
	e := &Edge{}
	(&filler{t: t}).fill(reflect.ValueOf(e).Elem(), "edge")
	small, large := 7, len(stepIndexes)+3
	e.Provenance[0].StepIndex, e.Provenance[1].StepIndex = &small, &large
	e.Embedding = nil
	mem := mappedRecord(t)(encodeEdgeV2(e, nil, false))
	want, _, err := decodeEdgeV2(mem, false)
	if err != nil {
		t.Fatal(err)
	}
	return want, mem
}

// mappedRecord returns a function that copies an encoded record (or
// fails the test with the encoder's error) into memory outside Go's
// heap, as a view snapshot's mapping holds it, freed when the test ends.
func mappedRecord(t *testing.T) func(b []byte, err error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		mem, free := anonMemory(len(b))
		if mem == nil {
			t.Fatal("no memory outside the heap")
		}
		t.Cleanup(free)
		copy(mem, b)
		return mem
	}
}

// pointersOf calls fn with every pointer v holds, directly or in what it
// points at (a string's bytes, a slice's array, a time's location),
// named by its path.
func pointersOf(v reflect.Value, path string, fn func(path string, p unsafe.Pointer)) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			fn(path, unsafe.Pointer(unsafe.StringData(v.String())))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			fn(path, v.UnsafePointer())
			pointersOf(v.Elem(), path, fn)
		}
	case reflect.Slice:
		if v.Cap() > 0 {
			fn(path, v.UnsafePointer())
		}
		for i := range v.Len() {
			pointersOf(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				// A time's location: its only pointer.
				if f.Kind() == reflect.Pointer && !f.IsNil() {
					fn(path+"."+v.Type().Field(i).Name, f.UnsafePointer())
				}
				continue
			}
			pointersOf(f, path+"."+v.Type().Field(i).Name, fn)
		}
	case reflect.Map:
		if !v.IsNil() {
			fn(path, v.UnsafePointer()) // (a packed record has none)
		}
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		panic(path + ": a kind of field the packed record's check does not know: teach it")
	}
}

// TestStagedEdgePointsOnlyAtItselfAndTheMapping decodes an edge with every
// field set from memory outside the heap, as a view snapshot's load
// does, and packs it: it equals the edge decoded into a box, and every
// pointer it holds, followed through strings, slices and pointers, lies
// in its own allocation (which the collector does not scan), in the
// record's memory or in stepIndexes. A field added to Edge that pack
// leaves pointing at the stage or the heap fails here.
func TestStagedEdgePointsOnlyAtItselfAndTheMapping(t *testing.T) {
	want, rec := stagedEdge(t)
	st := newEdgeStage(rec)
	if _, _, err := decodeEdgeAs(rec, true, st); err != nil {
		t.Fatal(err)
	}
	got, ok := st.pack()
	if !ok {
		t.Fatal("an edge whose strings all lie in the mapping was not packed")
	}
	// The stage is reused: what it held must not show through.
	if _, _, err := decodeEdgeAs(rec, true, st); err != nil {
		t.Fatal(err)
	}
	st.e.ID, st.prov[0].EpisodeID, st.strs[0] = "scribbled", "scribbled", "scribbled"
	st.steps[0] = 99
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("packed edge differs from the decoded one:\n%+v\n%+v", got, want)
	}
	base := uintptr(unsafe.Pointer(got))
	steps := 0
	for _, p := range got.Provenance {
		if !inStepIndexes(p.StepIndex) {
			steps++
		}
	}
	end := base + layoutOf(got, steps).size
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
	hi := lo + uintptr(len(rec))
	n := 0
	pointersOf(reflect.ValueOf(got).Elem(), "edge", func(path string, p unsafe.Pointer) {
		n++
		switch a := uintptr(p); {
		case a >= base && a < end, a >= lo && a < hi, inStepIndexes((*int)(p)):
		default:
			t.Errorf("%s points at %#x, outside the edge's allocation [%#x, %#x) and the mapping", path, a, base, end)
		}
	})
	if n < 30 {
		t.Fatalf("checked %d pointers, want every field's", n)
	}
}

// TestStagedEdgeOfNoListsPacked packs an edge with nothing past its
// assertion (no provenance, lists, step indices nor flag) and one whose
// lists are empty but not nil: equal to the decoded ones.
func TestStagedEdgeOfNoListsPacked(t *testing.T) {
	skipUnlessOffHeap(t)
	for _, e := range []*Edge{
		{ID: "e1", Namespace: "n", Source: "a", Target: "b", Type: EdgeCausal},
		{ID: "e2", Namespace: "n", Source: "a", Target: "b", Type: "custom", Provenance: []Provenance{},
			Scope: Scope{Audience: []string{}}, Contradicts: []string{}, Policy: Policy{AllowRoles: []string{}}},
	} {
		mem := mappedRecord(t)(encodeEdgeV2(e, nil, false))
		want, _, err := decodeEdgeV2(mem, false)
		if err != nil {
			t.Fatal(err)
		}
		st := newEdgeStage(mem)
		if _, _, err := decodeEdgeAs(mem, true, st); err != nil {
			t.Fatal(err)
		}
		got, ok := st.pack()
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: packed %v as\n%+v\nwant\n%+v", e.ID, ok, got, want)
		}
	}
}

// TestStagedEdgeWithHeapFieldsIsNotPacked: pack refuses an edge with a
// field pointing into the heap outside what it copies (a zoned time's
// location, an embedding outside the mapping, a string outside it).
func TestStagedEdgeWithHeapFieldsIsNotPacked(t *testing.T) {
	_, rec := stagedEdge(t)
	for name, spoil := range map[string]func(e *Edge){
		"zoned time":  func(e *Edge) { e.ValidTo = e.ValidTo.In(time.FixedZone("X", 3600)) },
		"provenance":  func(e *Edge) { e.Provenance[1].ObservedAt = e.Provenance[1].ObservedAt.In(time.FixedZone("X", 60)) },
		"embedding":   func(e *Edge) { e.Embedding = make([]float32, 4) },
		"string":      func(e *Edge) { e.SupersededBy = fmt.Sprint("heap ", len(rec)) },
		"list string": func(e *Edge) { e.Contradicts[1] = fmt.Sprint("heap ", len(rec)) },
		"edge type":   func(e *Edge) { e.Type = EdgeType(fmt.Sprint("heap ", len(rec))) },
	} {
		st := newEdgeStage(rec)
		if _, _, err := decodeEdgeAs(rec, true, st); err != nil {
			t.Fatal(err)
		}
		spoil(&st.e)
		if _, ok := st.pack(); ok {
			t.Errorf("%s: packed", name)
		}
	}
	// Outside a mapping (no bounds) nothing is packed.
	st := newEdgeStage(nil)
	if _, _, err := decodeEdgeAs(rec, true, st); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.pack(); ok {
		t.Error("packed without a mapping")
	}
}

func skipUnlessOffHeap(t *testing.T) {
	if !mappedOffHeap {
		t.Skip("the view snapshot is read into the heap on this system: its edges are not packed")
	}
}

// reuseFreedMemory collects, then allocates garbage that reuses what
// the collection freed, filled with a pattern, and collects again: memory
// the collector wrongly freed then reads as the pattern. Keep what it
// returns alive until the reads are done.
func reuseFreedMemory() [][]byte {
	runtime.GC()
	junk := make([][]byte, 0, 1<<12)
	for i := range cap(junk) {
		junk = append(junk, make([]byte, 64+i%2048))
		for j := range junk[i] {
			junk[i][j] = 0xa5
		}
	}
	runtime.GC()
	return junk
}

// checkScannedGrowth fails unless the heap a collection scans grew from
// before by at most most bytes an edge of edges.
func checkScannedGrowth(t *testing.T, before uint64, edges, most int64, what string) {
	t.Helper()
	perEdge := (int64(scannableHeap()) - int64(before)) / edges
	if perEdge > most {
		t.Errorf("the scanned heap grew by %d bytes an edge %s, want at most %d", perEdge, what, most)
		return
	}
	t.Logf("the scanned heap grew by %d bytes an edge %s", perEdge, what)
}

// scannableHeap is the heap the collector scans, after a collection.
func scannableHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestLoadedEdgesAreNotScanned reopens a store from its view snapshot:
// its edges are read back equal after collections that would have freed
// anything only they kept, and the heap a collection scans grows by
// at most 320 bytes an edge: the maps and lists that reach it, not its
// box (768 bytes and more; 8,192 edges grew it by about 1,000 bytes an
// edge when the boxes were scanned).
func TestLoadedEdgesAreNotScanned(t *testing.T) {
	skipUnlessOffHeap(t)
	dir := t.TempDir()
	const edges = 16 * benchEdgesPerTxn
	s := writeFleet(t, dir, 11, testEntities, edges)
	want := map[string]Edge{}
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { want[e.ID] = deepCopyEdge(e); return true })
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := scannableHeap()
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.v.awaitLinks()
	s.v.indexLoaded()
	checkScannedGrowth(t, before, edges, 320, "loaded")
	junk := reuseFreedMemory()
	got := 0
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool {
			got++
			if w, ok := want[e.ID]; !ok || !reflect.DeepEqual(deepCopyEdge(e), w) {
				t.Fatalf("edge %s read back as\n%+v\nwant\n%+v", e.ID, *e, w)
			}
			return true
		})
	})
	if got != len(want) {
		t.Fatalf("%d edges read back, want %d", got, len(want))
	}
	runtime.KeepAlive(junk)
}

// deepCopyEdge copies e and everything it points at into the heap.
func deepCopyEdge(e *Edge) Edge {
	b, err := encodeEdgeV2(e, nil, false)
	if err != nil {
		panic(err)
	}
	c, _, err := decodeEdgeV2(b, false)
	if err != nil {
		panic(err)
	}
	return *c
}

// TestLoadedNodePointsOnlyAtItselfAndTheMapping packs a node with every
// field set but its props, decoded from memory outside the heap as a
// view snapshot's load does: it equals the decoded node and every
// pointer it holds lies in its own allocation or the record's memory.
// A node with props, or with a zoned time, is left as it is.
func TestLoadedNodePointsOnlyAtItselfAndTheMapping(t *testing.T) {
	skipUnlessOffHeap(t)
	n := &Node{}
	(&filler{t: t}).fill(reflect.ValueOf(n).Elem(), "node")
	n.Attributes.Props, n.Embedding = nil, nil
	mem := mappedRecord(t)(encodeNodeV2(n, nil, false))
	m := mappedMemOf(mem)
	decode := func() *Node {
		got, _, err := decodeNodeV2(mem, true)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := decode()
	got := m.packNode(decode())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("packed node differs from the decoded one:\n%+v\n%+v", got, want)
	}
	a := &got.Attributes
	base := uintptr(unsafe.Pointer(got))
	end := base + unsafe.Sizeof(Node{}) + uintptr(len(got.Aliases)+len(a.Tags)+len(a.CMSSpanIDs)+len(a.RLDSEpisodeIDs))*unsafe.Sizeof("")
	count := 0
	pointersOf(reflect.ValueOf(got).Elem(), "node", func(path string, p unsafe.Pointer) {
		count++
		if a := uintptr(p); !(a >= base && a < end) && !m.inMapping(p) {
			t.Errorf("%s points at %#x, outside the node's allocation [%#x, %#x) and the mapping", path, a, base, end)
		}
	})
	if count < 12 {
		t.Fatalf("checked %d pointers, want every field's", count)
	}
	if cap(got.Aliases) != len(got.Aliases) {
		t.Fatal("a packed list has room to grow into")
	}
	withProps := decode()
	withProps.Attributes.Props = map[string]string{"k": "v"}
	zonedNode := decode()
	zonedNode.UpdatedAt = zonedNode.UpdatedAt.In(time.FixedZone("X", 7200))
	for _, n := range []*Node{withProps, zonedNode} {
		if m.packNode(n) != n {
			t.Errorf("a node with props or a zoned time was packed")
		}
	}
}
