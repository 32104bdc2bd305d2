package particle

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// stringsOf appends the plain strings of v (not those of a map, not the
// top level's ID, nor a node's Namespace or the default one, which is a
// constant, not named string types such as EdgeType) to out, following
// pointers and slices. An edge's other namespace is packed with its
// strings.
func stringsOf(v reflect.Value, top bool, out *[]string) {
	switch v.Kind() {
	case reflect.String:
		if t := v.Type(); t == reflect.TypeFor[string]() || t == reflect.TypeFor[Status]() || t == reflect.TypeFor[Sensitivity]() {
			*out = append(*out, v.String())
		}
	case reflect.Pointer:
		if !v.IsNil() {
			stringsOf(v.Elem(), false, out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			stringsOf(v.Index(i), false, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if top && (name == "ID" || name == "Namespace" && (v.Type() == reflect.TypeFor[Node]() || v.Field(i).String() == DefaultNamespace)) {
				continue
			}
			stringsOf(v.Field(i), false, out)
		}
	}
}

// checkPacked fails unless the strings of rec (stringsOf) fill one
// stretch of memory with nothing else in it: one buffer, each string
// its own bytes.
func checkPacked(t *testing.T, what string, rec any) {
	t.Helper()
	var ss []string
	stringsOf(reflect.ValueOf(rec).Elem(), true, &ss)
	lo, hi, total, n := ^uintptr(0), uintptr(0), uintptr(0), 0
	for _, s := range ss {
		if s == "" {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		lo, hi = min(lo, p), max(hi, p+uintptr(len(s)))
		total += uintptr(len(s))
		n++
	}
	if n < 2 {
		t.Fatalf("%s: %d strings to check, want at least two", what, n)
	}
	if hi-lo != total {
		t.Fatalf("%s: %d strings of %d bytes span %d bytes: not packed in one buffer", what, n, total, hi-lo)
	}
}

// dataOf is the address of every string of rec (stringsOf), in order.
func dataOf(rec any) []*byte {
	var ss []string
	stringsOf(reflect.ValueOf(rec).Elem(), true, &ss)
	var out []*byte
	for _, s := range ss {
		out = append(out, unsafe.StringData(s))
	}
	return out
}

// TestPackEveryField packs a node and an edge with every field set:
// their values stay the same, their strings end up in one buffer, and a
// record sharing their slices (as a batch's copy shares them with the
// version readers see) is not written to.
func TestPackEveryField(t *testing.T) {
	for _, c := range codecCases[:2] {
		t.Run(c.name, func(t *testing.T) {
			rec := c.fresh()
			(&filler{t: t}).fill(reflect.ValueOf(rec).Elem(), c.name)
			if e, ok := rec.(*Edge); ok {
				// The first step index is one stepIndexes holds, the
				// others are past it.
				e.Provenance = append(e.Provenance, e.Provenance[len(e.Provenance)-1])
				for i := range e.Provenance {
					step := len(stepIndexes) + i
					if i == 0 {
						step = 7
					}
					e.Provenance[i].StepIndex = &step
				}
			}
			b, err := c.encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			var shared any
			switch r := rec.(type) {
			case *Node:
				s := *r
				shared = &s
				packNode(r, nil)
			case *Edge:
				s := *r
				shared = &s
				before := dataOf(shared)
				r = packEdge(r)
				rec = r
				if !reflect.DeepEqual(dataOf(shared), before) {
					t.Fatal("packing wrote into arrays another version of the edge shares")
				}
				// The edge, its assertion and its provenance are one
				// allocation, in that order.
				base := uintptr(unsafe.Pointer(r))
				var box packedEdge[[1]Provenance]
				if uintptr(unsafe.Pointer(r.Assertion))-base != unsafe.Offsetof(box.a) ||
					uintptr(unsafe.Pointer(&r.Provenance[0]))-base != unsafe.Offsetof(box.p) {
					t.Fatal("the packed edge, its assertion and its provenance are not one allocation")
				}
				p := r.Provenance
				if len(p) < 3 {
					t.Fatalf("%d provenance records, want at least 3", len(p))
				}
				// A step index stepIndexes holds points there; the others
				// are copied into one array ...
				if p[0].StepIndex != &stepIndexes[7] {
					t.Fatal("the step index 7 does not point into stepIndexes")
				}
				last := len(p) - 1
				for i := 1; i < len(p); i++ {
					if inStepIndexes(p[i].StepIndex) || p[i].StepIndex == shared.(*Edge).Provenance[i].StepIndex ||
						i > 1 && uintptr(unsafe.Pointer(p[i].StepIndex)) != uintptr(unsafe.Pointer(p[i-1].StepIndex))+unsafe.Sizeof(0) {
						t.Fatal("the step indices past stepIndexes are not copied into one array")
					}
				}
				// ... which lies right ahead of the strings, in their
				// buffer.
				first := ^uintptr(0)
				for _, d := range dataOf(r) {
					if d != nil {
						first = min(first, uintptr(unsafe.Pointer(d)))
					}
				}
				if end := uintptr(unsafe.Pointer(p[last].StepIndex)) + unsafe.Sizeof(0); end != first {
					t.Fatalf("the step indices end at %#x, the strings start at %#x: not one buffer", end, first)
				}
			}
			runtime.GC() // the buffer holds no pointers: still there, untouched
			if !reflect.DeepEqual(rec, want) {
				t.Fatalf("packing changed the value:\n got %+v\nwant %+v", rec, want)
			}
			checkPacked(t, c.name, rec)
		})
	}
}

// TestCommittedRecordsArePacked: the nodes and edges a commit gives the
// view are packed.
func TestCommittedRecordsArePacked(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 3, testEmbedding)
	var tagged string
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		n, _, err := b.Resolve(DefaultNamespace, NodeEntity, "tagged thing")
		if err != nil {
			return err
		}
		n.Aliases = append(n.Aliases, "the thing")
		n.Attributes.Tags = append(n.Attributes.Tags, "red", "small")
		tagged = n.ID
		return b.PutNode(n)
	}); err != nil {
		t.Fatal(err)
	}
	s.Read(func(r Reader) {
		n := 0
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			checkPacked(t, "edge "+e.ID, e)
			n++
			return true
		})
		if n != 3 {
			t.Fatalf("%d edges in the view, want 3", n)
		}
		checkPacked(t, "node "+tagged, r.Node(tagged))
	})
}

// TestBoxEdgeEveryLength copies edges of every provenance length the
// boxes hold, none, and more than a window: the copy equals the edge
// (a nil provenance stays nil, an empty one empty), shares no array or
// assertion with it, and from one to MaxProvenance entries lies in the
// edge's allocation.
func TestBoxEdgeEveryLength(t *testing.T) {
	step := 7
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12} {
		e := &Edge{ID: "e", Source: "a", Target: "b", Assertion: &Assertion{Predicate: "on", Value: "table"}}
		if n >= 0 {
			e.Provenance = make([]Provenance, n)
		}
		for i := range max(n, 0) {
			e.Provenance[i] = Provenance{EpisodeID: "ep", StepIndex: &step, Agent: "robot", ObservedAt: time.Date(2026, 3, 1, 9, 0, i, 0, time.UTC)}
		}
		c := boxEdge(e)
		if !reflect.DeepEqual(c, e) || (c.Provenance == nil) != (e.Provenance == nil) {
			t.Fatalf("%d entries: the box's copy %+v differs from %+v", n, c, e)
		}
		if c.Assertion == e.Assertion || n > 0 && &c.Provenance[0] == &e.Provenance[0] {
			t.Fatalf("%d entries: the copy shares its assertion or provenance with the edge", n)
		}
		var box packedEdge[[1]Provenance]
		inBox := n > 0 && uintptr(unsafe.Pointer(&c.Provenance[0]))-uintptr(unsafe.Pointer(c)) == unsafe.Offsetof(box.p)
		if inBox != (n >= 1 && n <= MaxProvenance) {
			t.Fatalf("%d entries: provenance in the edge's allocation %v", n, inBox)
		}
	}
}

// TestNewEdgesAreFoundByTheirIdentityHash commits new edges, by Observe
// and by PutEdge: the view's identity index holds each by the hash of
// its identity (the one edgeIdentity makes), none by a key of its own,
// and finds each by that key; a later version of an edge keeps its
// entry.
func TestNewEdgesAreFoundByTheirIdentityHash(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 3, testEmbedding)
	observeEdges(t, s.Store, 3, testEmbedding) // the same edges again
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		ids, err := putThings(b, DefaultNamespace, 2)
		if err != nil {
			return err
		}
		return b.PutEdge(&Edge{Source: ids[0], Target: ids[1], Type: EdgeCausal, Confidence: 0.5})
	}); err != nil {
		t.Fatal(err)
	}
	s.Read(func(r Reader) {
		v := s.v
		if len(v.identity.bySum) != 4 || len(v.identity.byKey) != 0 || v.edges.len() != 4 {
			t.Fatalf("%d identities by hash, %d by key, %d edges; want 4, 0, 4", len(v.identity.bySum), len(v.identity.byKey), v.edges.len())
		}
		for id, e := range edgesByID(v) {
			ik := edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)
			if got := v.identity.find(v, []byte(ik)); got != e {
				t.Fatalf("identity %q finds %v, want edge %s", ik, got, id)
			}
		}
	})
}

// An embedder may use the batch, whose scratch key held the new edge's
// identity: the edge Observe creates still gets its own identity, so a
// second sighting finds it.
func TestObserveIdentityOutlivesAnEmbedderUsingTheBatch(t *testing.T) {
	s := openFactsStore(t)
	observe := func(b *Batch, ids []string) (bool, error) {
		_, created, err := b.Observe(Observation{Namespace: DefaultNamespace, Source: ids[0], Target: ids[1], Type: EdgeCausal,
			Embed: func() ([]float32, error) {
				b.FindEdge(DefaultNamespace, "elsewhere", EdgeCausal, "", "nowhere") // writes the scratch key
				return testEmbedding(0), nil
			}})
		return created, err
	}
	var ids []string
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		var err error
		if ids, err = putThings(b, DefaultNamespace, 2); err != nil {
			return err
		}
		_, err = observe(b, ids)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		created, err := observe(b, ids)
		if err == nil && created {
			t.Error("the second sighting created another edge")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Read(func(r Reader) {
		for ik, id := range identities(s.v) {
			e := s.v.edges.get(s.v, id)
			if want := edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target); ik != want {
				t.Fatalf("identity %q, want %q", ik, want)
			}
		}
	})
}

// TestPackedEdgeKeepsNoStringOfItsMessage: a packed edge's type and
// default namespace are the package's constants, not the strings its
// message was decoded into (one heap object each, per edge or per
// message, for every collection to mark), and another namespace lies in
// the edge's one buffer.
func TestPackedEdgeKeepsNoStringOfItsMessage(t *testing.T) {
	fresh := func(s string) string { return string([]byte(s)) } // as a decoder makes it
	at := func(s string) *byte { return unsafe.StringData(s) }
	e := &Edge{ID: "e1", Namespace: fresh(DefaultNamespace), Source: "a", Target: "b", Type: EdgeType(fresh(string(EdgeAssertion))),
		Provenance: []Provenance{{EpisodeID: "ep", Agent: "robot"}}}
	if ns := Namespace("", ""); at(ns) != at(DefaultNamespace) {
		t.Errorf("Namespace of no tenant and no project at %p: not the constant at %p", at(ns), at(DefaultNamespace))
	}
	p := packEdge(e)
	if p.Type != EdgeAssertion || at(string(p.Type)) != at(string(EdgeAssertion)) {
		t.Errorf("type %q at %p: not the constant at %p", p.Type, at(string(p.Type)), at(string(EdgeAssertion)))
	}
	if p.Namespace != DefaultNamespace || at(p.Namespace) != at(DefaultNamespace) {
		t.Errorf("namespace %q at %p: not the constant at %p", p.Namespace, at(p.Namespace), at(DefaultNamespace))
	}
	other := &Edge{ID: "e2", Namespace: fresh("acme/arm"), Source: "a", Target: "b", Type: EdgeCausal}
	q := packEdge(other)
	if q.Namespace != "acme/arm" || at(q.Namespace) == at(other.Namespace) {
		t.Errorf("namespace %q at %p: not copied out of the decoded string at %p", q.Namespace, at(q.Namespace), at(other.Namespace))
	}
	if lo, n := uintptr(unsafe.Pointer(at(q.Namespace))), uintptr(unsafe.Pointer(at(q.Source))); n != lo+uintptr(len(q.Namespace)) {
		t.Errorf("namespace at %#x, source at %#x: not one buffer", lo, n)
	}
}

// TestBatchCopyOfAnEdgeIsCommitted: the copy Batch.Edge gives a batch
// (cloneEdge), packed where it lies, is copied once into a kept box
// (keepEdge) as the view's next version, with its assertion and
// provenance, whether the batch reinforced it in place, replaced its
// assertion or grew its provenance past the copy's room, and every
// version equals what it was given. A reader's version never changes.
func TestBatchCopyOfAnEdgeIsCommitted(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 3, testEmbedding)
	var ids []string
	var held []Edge // the versions a reader holds, by value
	var heldAt []*Edge
	s.Read(func(r Reader) {
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			ids = append(ids, e.ID)
			held = append(held, *e)
			heldAt = append(heldAt, e)
			return true
		})
	})
	if len(ids) != 3 {
		t.Fatalf("%d edges, want 3", len(ids))
	}
	step := 4
	sighting := Provenance{EpisodeID: "ep-2", StepIndex: &step, Agent: "ur5-beta", ObservedAt: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}
	var copies [3]*Edge
	var want [3]Edge
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		for i, id := range ids {
			c := b.Edge(id)
			switch i {
			case 0: // reinforced in place, as Observe does
				c.Provenance = append(c.Provenance, sighting)
				c.Evidence++
			case 1: // a new assertion
				c.Assertion = &Assertion{Predicate: "under", Value: "shelf"}
			case 2: // a provenance regrown past the copy's room
				c.Provenance = append(c.Provenance, sighting, sighting, sighting)
			}
			copies[i], want[i] = c, *c
			want[i].Provenance = slices.Clone(c.Provenance)
			if c.Assertion != nil {
				a := *c.Assertion
				want[i].Assertion = &a
			}
			if err := b.PutEdge(c); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Read(func(r Reader) {
		for i, id := range ids {
			got := r.Edge(id)
			if got == copies[i] {
				t.Errorf("edge %d: committed the batch's copy itself, want it kept (keepEdge)", i)
			}
			if !inOwnBox(got) {
				t.Errorf("edge %d: its assertion or provenance lies outside its allocation", i)
			}
			if got.Evidence != want[i].Evidence || !reflect.DeepEqual(got.Assertion, want[i].Assertion) || !reflect.DeepEqual(got.Provenance, want[i].Provenance) {
				t.Errorf("edge %d: committed %+v / %+v / %d, want %+v / %+v / %d", i, got.Assertion, got.Provenance, got.Evidence,
					want[i].Assertion, want[i].Provenance, want[i].Evidence)
			}
		}
	})
	for i := range held {
		if !reflect.DeepEqual(*heldAt[i], held[i]) {
			t.Errorf("edge %d: the version a reader held changed", i)
		}
	}
}

// TestNewEdgeIsCommitted: an edge Observe creates is built in its box
// and committed in a kept box (keepEdge), as is one seen again in the
// same batch (its provenance regrown past the box), with both
// sightings; their strings are packed.
func TestNewEdgeIsCommitted(t *testing.T) {
	s := openFactsStore(t)
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var once, twice *Edge
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		ids, err := putThings(b, DefaultNamespace, 3)
		if err != nil {
			return err
		}
		obs := func(i int, at time.Time) (*Edge, error) {
			e, _, err := b.Observe(Observation{Namespace: DefaultNamespace, Source: ids[i], Target: ids[i+1], Type: EdgeAssertion,
				Predicate: "near", Confidence: 0.5, At: at, Provenance: Provenance{EpisodeID: "ep-1", Agent: "ur5-alpha", ObservedAt: at}})
			return e, err
		}
		if once, err = obs(0, t0); err != nil {
			return err
		}
		if twice, err = obs(1, t0); err != nil {
			return err
		}
		_, err = obs(1, t0.Add(time.Minute))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Read(func(r Reader) {
		for _, c := range []struct {
			e    *Edge
			seen int
		}{{once, 1}, {twice, 2}} {
			got := r.Edge(c.e.ID)
			if got == nil {
				t.Fatalf("edge %s not committed", c.e.ID)
			}
			if got == c.e || !inOwnBox(got) {
				t.Errorf("edge %s: committed Observe's edge itself %v (want it kept: keepEdge), in its own box %v", c.e.ID, got == c.e, inOwnBox(got))
			}
			if len(got.Provenance) != c.seen || got.Assertion == nil || got.Assertion.Predicate != "near" {
				t.Errorf("edge %s: %d sightings, assertion %+v; want %d, near", c.e.ID, len(got.Provenance), got.Assertion, c.seen)
			}
			checkPacked(t, "edge "+got.ID, got)
		}
	})
}

// TestDecodedEdgeIsOneBox decodes edges as a load does (strings in
// place): each is one allocation with its assertion and provenance, its
// step indices in stepIndexes, and a step index past it in one array of
// its own; the values are those encoded.
func TestDecodedEdgeIsOneBox(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  []int
		allocs float64
	}{
		{"steps held", []int{0, 17, len(stepIndexes) - 1}, 1},
		{"a step past them", []int{3, len(stepIndexes)}, 2},
		{"no provenance", nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, e, _ := ingestValues()
			e.Embedding, e.Policy.DenyRoles = nil, nil // no array of their own
			e.Provenance = e.Provenance[:len(c.steps)]
			for i := range c.steps {
				e.Provenance[i].StepIndex = &c.steps[i]
			}
			if c.steps == nil {
				e.Provenance = nil
			}
			b, err := encodeEdge(e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeEdgeAt(b, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("decoded\n %+v\nwant %+v", got, e)
			}
			base := uintptr(unsafe.Pointer(got))
			var box packedEdge[[1]Provenance]
			if uintptr(unsafe.Pointer(got.Assertion))-base != unsafe.Offsetof(box.a) {
				t.Fatal("the assertion is not in the edge's box")
			}
			if len(got.Provenance) > 0 && uintptr(unsafe.Pointer(&got.Provenance[0]))-base != unsafe.Offsetof(box.p) {
				t.Fatal("the provenance is not in the edge's box")
			}
			for i, p := range got.Provenance {
				if held := c.steps[i] < len(stepIndexes); inStepIndexes(p.StepIndex) != held {
					t.Fatalf("step index %d: in stepIndexes %v, want %v", c.steps[i], !held, held)
				}
			}
			if n := testing.AllocsPerRun(100, func() { _, _ = decodeEdgeAt(b, nil, true) }); n != c.allocs {
				t.Fatalf("a decode allocates %v times, want %v", n, c.allocs)
			}
		})
	}
}

// TestStepIndexesOutsideTheHeap checks the step index table: it holds
// each index at its own place, and it is in the program's data, not Go's
// heap, where every pointer into it would be one more for a collection
// to mark. No API says where the heap is, so the table's address is
// compared with another package variable's and a fresh allocation's:
// the program's data and the heap's arenas lie far apart.
func TestStepIndexesOutsideTheHeap(t *testing.T) {
	for i, want := range []int{0, 1, 7, len(stepIndexes) - 1} {
		if p := stepIndex(want); p == nil || *p != want || !inStepIndexes(p) {
			t.Fatalf("case %d: stepIndex(%d) = %v", i, want, p)
		}
	}
	if stepIndex(len(stepIndexes)) != nil || stepIndex(-1) != nil {
		t.Fatal("stepIndex gives an index the table does not hold")
	}
	heap := new([1 << 14]int)
	dist := func(a, b unsafe.Pointer) uintptr {
		if uintptr(a) > uintptr(b) {
			return uintptr(a) - uintptr(b)
		}
		return uintptr(b) - uintptr(a)
	}
	table, global := unsafe.Pointer(&stepIndexes), unsafe.Pointer(&chunkFacts)
	if dist(table, global) > 64<<20 || dist(table, unsafe.Pointer(heap)) < dist(table, global) {
		t.Fatalf("the table at %p lies nearer the heap (%p) than the program's data (%p)", table, heap, global)
	}
	runtime.KeepAlive(heap)
}

// inOwnBox reports whether e's assertion and provenance (when it has
// them) lie in e's own allocation, where a box (boxFor) put
// them: a change that replaced either (a new assertion, a provenance
// regrown past its room) leaves them elsewhere.
func inOwnBox(e *Edge) bool {
	var box packedEdge[[1]Provenance] // every box's assertion and provenance lie at these offsets
	base := unsafe.Pointer(e)
	if e.Assertion != nil && unsafe.Pointer(e.Assertion) != unsafe.Add(base, unsafe.Offsetof(box.a)) {
		return false
	}
	return cap(e.Provenance) == 0 || unsafe.Pointer(unsafe.SliceData(e.Provenance)) == unsafe.Add(base, unsafe.Offsetof(box.p))
}
