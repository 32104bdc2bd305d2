package keyword

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
)

const ns = particle.DefaultNamespace

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func openStore(t testing.TB) *particle.Store {
	t.Helper()
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func update(t testing.TB, s *particle.Store, fn func(b *particle.Batch) error) {
	t.Helper()
	if _, err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// setAliases gives the entity name of namespace ns the aliases given,
// in place of its own.
func setAliases(t testing.TB, s *particle.Store, name string, aliases ...string) {
	t.Helper()
	update(t, s, func(b *particle.Batch) error {
		n, _, err := b.Resolve(ns, particle.NodeEntity, name)
		if err != nil {
			return err
		}
		n.Aliases = aliases
		return b.PutNode(n)
	})
}

// fact writes subject -predicate-> object with a value in namespace n.
func fact(t testing.TB, s *particle.Store, n, subj, pred, obj, value string) {
	t.Helper()
	update(t, s, func(b *particle.Batch) error {
		a, _, err := b.Resolve(n, particle.NodeEntity, subj)
		if err != nil {
			return err
		}
		c, _, err := b.Resolve(n, particle.NodeEntity, obj)
		if err != nil {
			return err
		}
		if err := b.PutNode(a); err != nil {
			return err
		}
		if err := b.PutNode(c); err != nil {
			return err
		}
		_, _, err = b.Observe(particle.Observation{Namespace: n, Source: a.ID, Target: c.ID, Type: particle.EdgeAssertion,
			Predicate: pred, Value: value, At: t0, Provenance: particle.Provenance{EpisodeID: "ep-1"}})
		return err
	})
}

// fixture is a small graph with one of each kind of document.
func fixture(t testing.TB, s *particle.Store) {
	t.Helper()
	update(t, s, func(b *particle.Batch) error {
		n, _, err := b.Resolve(ns, particle.NodeEntity, "red block")
		if err != nil {
			return err
		}
		n.Aliases = append(n.Aliases, "crimson cube")
		if err := b.PutNode(n); err != nil {
			return err
		}
		ep, _, err := b.Resolve(ns, particle.NodeEpisode, "ep-alpha-0001")
		if err != nil {
			return err
		}
		if err := b.PutNode(ep); err != nil {
			return err
		}
		return b.PutEpisode(&particle.Episode{ID: "ep-alpha-0001", Agent: "ur5-alpha", StartTime: t0, NodeID: ep.ID,
			LanguageInstruction: "stack the wooden cylinder on the tray"})
	})
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "SN-4471-XQ")
	update(t, s, func(b *particle.Batch) error {
		a := &cms.Applier{}
		return a.Apply(context.Background(), b, &cms.Span{ID: "span-0200", Level: 2, EpisodeID: "ep-alpha-0001", Start: t0, End: t0.Add(time.Minute),
			Text: "peg insertion fails without the torque wrench", Concepts: []string{"peg insertion"}, Entities: []string{"peg"}})
	})
}

func search(t *testing.T, ix *Index, n, q string) []Hit {
	t.Helper()
	hits, err := ix.Search(n, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func hitIDs(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Kind.String()+":"+h.ID)
	}
	return out
}

func nodeID(s *particle.Store, t particle.NodeType, name string) string {
	var id string
	s.Read(func(r particle.Reader) {
		if n := r.Lookup(ns, t, name); n != nil {
			id = n.ID
		}
	})
	return id
}

func TestSearchFindsEveryKindOfText(t *testing.T) {
	s := openStore(t)
	fixture(t, s)
	ix, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()

	red := nodeID(s, particle.NodeEntity, "red block")
	for _, tc := range []struct {
		name, q string
		kind    Kind
		id      string
	}{
		{"node name", "red block", KindNode, red},
		{"alias", "crimson", KindNode, red},
		{"language instruction", "wooden cylinder", KindEpisode, "ep-alpha-0001"},
		{"span text", "torque wrench", KindSpan, "span-0200"},
		{"quoted phrase", `"torque wrench"`, KindSpan, "span-0200"},
		{"serial number whole", "SN-4471-XQ", KindEdge, ""},
		{"serial number, other case", "sn-4471-xq", KindEdge, ""},
		{"serial number part", "4471", KindEdge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := search(t, ix, ns, tc.q)
			if len(hits) == 0 || hits[0].Kind != tc.kind || (tc.id != "" && hits[0].ID != tc.id) {
				t.Fatalf("search %q = %v, want first %s %s", tc.q, hitIDs(hits), tc.kind, tc.id)
			}
			if hits[0].Score <= 0 {
				t.Errorf("score %v, want > 0", hits[0].Score)
			}
		})
	}
	// A span hit names the nodes the span touched.
	hits := search(t, ix, ns, "torque")
	if len(hits) == 0 || !slices.Contains(hits[0].Nodes, nodeID(s, particle.NodeConcept, "peg insertion")) {
		t.Errorf("span hit %+v, want the peg insertion concept among its nodes", hits)
	}
	// A quoted phrase must match as a phrase.
	if hits := search(t, ix, ns, `"wrench torque"`); len(hits) != 0 {
		t.Errorf(`"wrench torque" = %v, want nothing`, hitIDs(hits))
	}
	for _, q := range []string{"", "  ", `""`, "the of"} {
		if hits := search(t, ix, ns, q); len(hits) != 0 {
			t.Errorf("%q = %v, want nothing", q, hitIDs(hits))
		}
	}
}

func TestSearchIsPerNamespace(t *testing.T) {
	s := openStore(t)
	fact(t, s, "acme/lab", "gripper", "firmware", "controller", "FW-9.1.2")
	ix, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if hits := search(t, ix, ns, "FW-9.1.2"); len(hits) != 0 {
		t.Errorf("default namespace sees %v", hitIDs(hits))
	}
	if hits := search(t, ix, "acme/lab", "FW-9.1.2"); len(hits) != 1 || hits[0].Namespace != "acme/lab" {
		t.Errorf("acme/lab: %+v, want the firmware edge", hits)
	}
}

func TestIndexFollowsTheStore(t *testing.T) {
	s := openStore(t)
	ix, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Len() != 0 {
		t.Fatalf("empty store, %d docs", ix.Len())
	}
	fixture(t, s)
	if hits := search(t, ix, ns, "SN-4471-XQ"); len(hits) != 1 {
		t.Fatalf("after ingest: %v", hitIDs(hits))
	}
	if hits := search(t, ix, ns, "torque wrench"); len(hits) != 1 || hits[0].Kind != KindSpan {
		t.Fatalf("span indexed from the changes: %v", hitIDs(hits))
	}
	// A new value replaces the old one.
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "QT-9000-AB")
	if hits := search(t, ix, ns, "SN-4471-XQ"); len(hits) != 0 {
		t.Errorf("old value still found: %v", hitIDs(hits))
	}
	if hits := search(t, ix, ns, "QT-9000-AB"); len(hits) != 1 {
		t.Errorf("new value: %v", hitIDs(hits))
	}
	docs := ix.Len()
	// Reinforcing what is known writes nothing.
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "QT-9000-AB")
	if ix.Len() != docs {
		t.Errorf("docs %d -> %d on a reinforcement", docs, ix.Len())
	}
	ix.Close()
	if _, err := ix.Search(ns, "peg", 3); err != ErrClosed {
		t.Errorf("search after close: %v, want ErrClosed", err)
	}
	fact(t, s, ns, "after", "close", "is ignored", "XYZ-1") // the subscription is a no-op now
}

func TestReopenReusesACleanIndexAndRebuildsADirtyOne(t *testing.T) {
	dir := t.TempDir() + "/keyword"
	s := openStore(t)
	fixture(t, s)
	ix, err := Open(s, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := ix.Len()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// Clean: nothing to index, same answers.
	ix2, err := Open(s, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ix2.Len() != want || ix2.dirty {
		t.Errorf("clean reopen: %d docs (want %d), dirty %v", ix2.Len(), want, ix2.dirty)
	}
	if hits := search(t, ix2, ns, "SN-4471-XQ"); len(hits) != 1 {
		t.Errorf("after reopen: %v", hitIDs(hits))
	}
	// Writes clear the marker; a crash (bleve closed without Close)
	// leaves it cleared.
	fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
	ix2.sync() // indexed by the worker
	ix2.mu.RLock()
	dirty := ix2.dirty
	ix2.mu.RUnlock()
	if !dirty {
		t.Error("a write did not clear the clean marker")
	}
	ix2.mu.Lock()
	ix2.closed = true
	ix2.mu.Unlock()
	ix2.bl.Close()

	// The store moved on while the index was down.
	fact(t, s, ns, "gripper", "serial_number", "arm", "HX-7781")
	ix3, err := Open(s, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ix3.Close()
	if hits := search(t, ix3, ns, "HX-7781"); len(hits) != 1 {
		t.Errorf("after rebuild: %v", hitIDs(hits))
	}
	if hits := search(t, ix3, ns, "GR-0042"); len(hits) != 0 {
		t.Errorf("stale value after rebuild: %v", hitIDs(hits))
	}
}

func TestSavedDocumentsRoundTrip(t *testing.T) {
	in := &savedDocs{gen: &particle.Generation{Version: 1 << 40, Sum: 1<<63 + 5},
		texts: map[docKey]document{
			nodeKey("n-1"):                   {ns, "red block\ncrimson cube"},
			spanKey("acme/lab", "span-0200"): {"acme/lab", "peg insertion fails"},
			edgeKey(""):                      {"", ""},
		},
		spanNodes: map[docKey][]string{spanKey("acme/lab", "span-0200"): {"n-1", "n-2"}, spanKey(ns, "s"): {}},
	}
	b := encodeDocs(in)
	out, err := decodeDocs(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if !sameGeneration(out.gen, in.gen) || len(out.texts) != len(in.texts) || len(out.spanNodes) != len(in.spanNodes) {
		t.Fatalf("round trip: %+v", out)
	}
	for k, d := range in.texts {
		if out.texts[k] != d {
			t.Errorf("%+v: %+v != %+v", k, out.texts[k], d)
		}
	}
	for k, nodes := range in.spanNodes {
		if !slices.Equal(out.spanNodes[k], nodes) {
			t.Errorf("%+v: %v != %v", k, out.spanNodes[k], nodes)
		}
	}
	noGen, err := decodeDocs(string(encodeDocs(&savedDocs{})))
	if err != nil || noGen.gen != nil || len(noGen.texts) != 0 {
		t.Errorf("empty, no generation: %+v %v", noGen, err)
	}
	// Every truncation, a trailing byte, another version or flag fails.
	for n := range len(b) {
		if _, err := decodeDocs(string(b[:n])); err == nil {
			t.Errorf("decode of the first %d of %d bytes: no error", n, len(b))
		}
	}
	for _, bad := range [][]byte{append(slices.Clone(b), 0), append([]byte{2}, b[1:]...), append([]byte{docsV1, 3}, b[2:]...)} {
		if _, err := decodeDocs(string(bad)); err == nil {
			t.Errorf("decode %x: no error", bad)
		}
	}
}

// rewriteSaved replaces the documents a closed index in dir saved with
// what edit makes of them, as a damaged or hand-edited index would hold
// (saved as the index saves them: a new file, its stamp persisted).
func rewriteSaved(t *testing.T, dir string, edit func(*savedDocs)) {
	t.Helper()
	bl, err := bleve.OpenUsing(dir, diskConfig)
	if err != nil {
		t.Fatal(err)
	}
	saved, _, err := readSaved(bl, dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(saved)
	ix := &Index{bl: bl, opts: Options{Dir: dir}, log: slog.New(slog.DiscardHandler)}
	if err := ix.saveDocs(context.Background(), "rewrite", encodeDocs(saved), func(*bleve.Batch) {}); err != nil {
		t.Fatal(err)
	}
	if err := bl.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReopenTakesTheSavedDocumentsOfTheStoresGeneration: an index closed
// cleanly and reopened on a store nobody wrote to since takes its saved
// documents as they are (shown by a document removed from them behind
// its back staying unknown); once the store is written, even with text
// the index already holds, the next reopen reconciles, finds what
// changed while it was closed and saves the new generation.
func TestReopenTakesTheSavedDocumentsOfTheStoresGeneration(t *testing.T) {
	dir := t.TempDir() + "/keyword"
	s := openStore(t)
	fixture(t, s)
	open := func() *Index {
		t.Helper()
		ix, err := Open(s, Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	closeIndex := func(ix *Index) {
		t.Helper()
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ix := open()
	want := ix.Len()
	closeIndex(ix)
	rewriteSaved(t, dir, func(d *savedDocs) {
		for k := range d.texts {
			if k.kind == 'p' {
				delete(d.texts, k)
			}
		}
	})
	ix = open()
	if got := ix.Len(); got != want-1 {
		t.Fatalf("reopen at the same generation: %d docs, want the %d saved", got, want-1)
	}
	if hits := search(t, ix, ns, "SN-4471-XQ"); len(hits) != 1 {
		t.Errorf("saved documents searchable: %v", hitIDs(hits))
	}
	closeIndex(ix)

	// Written while the index is closed: the value changes, and a
	// reinforcement leaves the documents as they were.
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "QT-9000-AB")
	ix = open()
	if got := ix.Len(); got != want {
		t.Errorf("reconciled: %d docs, want %d (the episode restored)", got, want)
	}
	if hits := search(t, ix, ns, "QT-9000-AB"); len(hits) != 1 {
		t.Errorf("value written while closed: %v", hitIDs(hits))
	}
	if hits := search(t, ix, ns, "SN-4471-XQ"); len(hits) != 0 {
		t.Errorf("old value still found: %v", hitIDs(hits))
	}
	closeIndex(ix)
	fact(t, s, ns, "fixture", "serial_number", "calibration rig", "QT-9000-AB")
	ix = open()
	if ix.dirty {
		t.Error("a reconcile that changed nothing wrote to the index")
	}
	closeIndex(ix)
	gen, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	rewriteSaved(t, dir, func(d *savedDocs) {
		if !sameGeneration(d.gen, &gen) {
			t.Errorf("saved at generation %+v, the store is at %+v", d.gen, gen)
		}
	})
}

// crashIndex stops ix as a run that dies does once scorch has written
// its batches (their segments and the cleared marker): its worker
// indexes what it was given, a last batch is waited for until written
// (scorch writes batches in order), and bleve closes, but no clean
// marker or saved documents are written.
func crashIndex(t *testing.T, ix *Index) {
	t.Helper()
	ix.sync()
	b := ix.bl.NewBatch()
	b.SetInternal([]byte("ctxgraph.test"), []byte("written"))
	done := make(chan error, 1)
	b.SetPersistedCallback(func(err error) { done <- err })
	if err := ix.bl.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ix.mu.Lock()
	ix.closed = true
	ix.mu.Unlock()
	if err := ix.bl.Close(); err != nil {
		t.Fatal(err)
	}
}

// edgeWithValue is the id of the edge whose value is v.
func edgeWithValue(s *particle.Store, v string) string {
	var id string
	s.Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if edgeText(e) == v {
				id = e.ID
			}
			return id == ""
		})
	})
	return id
}

// fixtureWithCleanIndex opens a store in dir/graph with the fixture,
// and builds and closes cleanly a keyword index over it in dir/keyword.
func fixtureWithCleanIndex(t *testing.T, dir string) *particle.Store {
	t.Helper()
	s, err := particle.Open(particle.DefaultOptions(dir + "/graph"))
	if err != nil {
		t.Fatal(err)
	}
	fixture(t, s)
	ix, err := Open(s, Options{Dir: dir + "/keyword"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReopenAfterACrashCatchesUp: an index on disk closed cleanly, then
// written (new values; an edge saved with it deleted) by a run that
// dies, while the store also moves on after the death (a new value; an
// edge the dead run indexed deleted). Reopened on the same boot it is caught up with the
// store, not rebuilt: it finds what the store holds and nothing else.
// Marked as left on another boot, it is rebuilt, with the same answers.
func TestReopenAfterACrashCatchesUp(t *testing.T) {
	for _, sameBoot := range []bool{true, false} {
		dir := t.TempDir()
		s := fixtureWithCleanIndex(t, dir)
		ix2, err := Open(s, Options{Dir: dir + "/keyword"})
		if err != nil {
			t.Fatal(err)
		}
		fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
		fact(t, s, ns, "probe", "serial_number", "bench", "TMP-0001")
		deleteValue := func(v string) {
			id := edgeWithValue(s, v)
			update(t, s, func(b *particle.Batch) error { return b.DeleteEdge(id) })
		}
		deleteValue("SN-4471-XQ")
		if !sameBoot {
			ix2.sync()
			if err := ix2.bl.SetInternal(keyBoot, []byte("a boot before this one")); err != nil {
				t.Fatal(err)
			}
		}
		crashIndex(t, ix2)
		// While the index is down: a new value, and one the dead run
		// indexed deleted (bleve holds it, the saved documents do not).
		fact(t, s, ns, "arm", "serial_number", "base", "HX-7781")
		deleteValue("TMP-0001")

		var logs bytes.Buffer
		ix3, err := Open(s, Options{Dir: dir + "/keyword", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if caught := strings.Contains(logs.String(), "caught_up=true after_a_crash=true"); caught != sameBoot {
			t.Errorf("same boot %v: caught up %v; logs:\n%s", sameBoot, caught, logs.String())
		}
		want, _, err := documents(s)
		if err != nil {
			t.Fatal(err)
		}
		n, err := ix3.bl.DocCount()
		if err != nil || int(n) != len(want) || ix3.Len() != len(want) {
			t.Errorf("same boot %v: bleve holds %d documents (%v), the index %d, the store calls for %d", sameBoot, n, err, ix3.Len(), len(want))
		}
		for _, v := range []string{"GR-0042", "HX-7781"} {
			if hits := search(t, ix3, ns, v); len(hits) != 1 {
				t.Errorf("same boot %v: %s: %v", sameBoot, v, hitIDs(hits))
			}
		}
		for _, v := range []string{"SN-4471-XQ", "TMP-0001"} {
			if hits := search(t, ix3, ns, v); len(hits) != 0 {
				t.Errorf("same boot %v: deleted %s found: %v", sameBoot, v, hitIDs(hits))
			}
		}
		if err := ix3.Close(); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

// TestBuildLeavesTheLoadedEdgesToBeIndexedByID: a build over a store
// loaded from its files walks the edges by seq, so the maps of the
// loaded edges by id, which a daemon has made after it serves, are not
// made on its start's path (at 1M edges they took 2.8 s of a start
// after a crash), and still finds every edge's text.
func TestBuildLeavesTheLoadedEdgesToBeIndexedByID(t *testing.T) {
	dir := t.TempDir()
	s, err := particle.Open(particle.DefaultOptions(dir + "/graph"))
	if err != nil {
		t.Fatal(err)
	}
	fixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = particle.Open(particle.DefaultOptions(dir + "/graph"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.EdgesIndexedByID() {
		t.Fatal("the reopened store loaded no edges to index by id")
	}
	ix, err := Open(s, Options{Dir: dir + "/keyword"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if s.EdgesIndexedByID() {
		t.Error("the build indexed the loaded edges by id")
	}
	if hits := search(t, ix, ns, "SN-4471-XQ"); len(hits) != 1 || hits[0].Kind != KindEdge {
		t.Errorf("the edge's value: %v", hitIDs(hits))
	}
}

// TestReopenOfACleanIndexTheStoreMovedOnFromCatchesUp: an index closed
// cleanly, then a store written without it (a new value, a deleted
// edge, a renamed alias, a new CMS span): the next open catches up with
// what was written and deleted since its saved documents, not every
// record, and answers as a full build would, the new span with its
// nodes.
func TestReopenOfACleanIndexTheStoreMovedOnFromCatchesUp(t *testing.T) {
	dir := t.TempDir()
	s := fixtureWithCleanIndex(t, dir)
	defer s.Close()
	fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
	id := edgeWithValue(s, "SN-4471-XQ")
	update(t, s, func(b *particle.Batch) error { return b.DeleteEdge(id) })
	setAliases(t, s, "red block", "scarlet brick")
	update(t, s, func(b *particle.Batch) error {
		a := &cms.Applier{}
		return a.Apply(context.Background(), b, &cms.Span{ID: "span-0300", Level: 1, EpisodeID: "ep-alpha-0001", Start: t0, End: t0.Add(time.Minute),
			Text: "the suction cup slips on wet glass", Concepts: []string{"suction grasp"}})
	})

	var logs bytes.Buffer
	ix2, err := Open(s, Options{Dir: dir + "/keyword", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	if !strings.Contains(logs.String(), "caught_up=true after_a_crash=false") {
		t.Errorf("not caught up; logs:\n%s", logs.String())
	}
	want, _, err := documents(s)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ix2.bl.DocCount()
	if err != nil || int(n) != len(want) || ix2.Len() != len(want) {
		t.Errorf("bleve holds %d documents (%v), the index %d, the store calls for %d", n, err, ix2.Len(), len(want))
	}
	for q, want := range map[string]int{"GR-0042": 1, "SN-4471-XQ": 0, "scarlet brick": 1, "crimson cube": 0} {
		if hits := search(t, ix2, ns, q); len(hits) != want {
			t.Errorf("%s: %v, want %d hits", q, hitIDs(hits), want)
		}
	}
	hits := search(t, ix2, ns, "wet glass")
	if len(hits) != 1 || hits[0].ID != "span-0300" || !slices.Contains(hits[0].Nodes, nodeID(s, particle.NodeConcept, "suction grasp")) {
		t.Errorf("the new span: %+v, want it with the suction grasp concept among its nodes", hits)
	}
}
