package particle

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// crash stops s as a run that dies does: its goroutines end and Badger
// closes (its files hold every commit, as after a crash once Badger's
// logs are replayed), but nothing of Close runs: no view snapshot is
// written, the one loaded stays set aside, no marker is dropped.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closeOnce.Do(func() {
		s.stopEmbeddingsCheck()
		s.awaitReadAhead()
		s.v.awaitLinks()
		s.stopCoder()
		if err := s.db.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// copyDir copies the files of dir (a closed store) into a new directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// loadFromBadger opens a copy of the closed store in dir with view
// snapshots off, so that its view is read from Badger alone, and returns
// the view and counts.
func loadFromBadger(t *testing.T, dir string) (*view, Counts) {
	t.Helper()
	o := DefaultOptions(copyDir(t, dir))
	o.ViewSnapshot = false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.v.awaitLinks()
	s.v.indexLoaded()
	return s.v, s.Counts()
}

// sameGraph fails unless views a and b hold the same graph: the same
// records, by id and by seq, with the same facts, salience, agents,
// identities, aliases, adjacency, end nodes and embeddings stored apart.
// (How each got there may differ: the slices by seq may be longer in
// one, holding nothing past the last item, and a node whose edges went
// keeps an empty list where a load has none.)
func sameGraph(t *testing.T, a, b *view) {
	t.Helper()
	for _, m := range []struct {
		name string
		a, b any
	}{
		{"nodes", a.nodes, b.nodes}, {"edges", edgesByID(a), edgesByID(b)}, {"episodes", a.episodes, b.episodes},
		{"aliases", a.aliases, b.aliases}, {"identity", identities(a), identities(b)},
		{"out", nonEmpty(a.out), nonEmpty(b.out)}, {"in", nonEmpty(a.in), nonEmpty(b.in)},
	} {
		if !reflect.DeepEqual(m.a, m.b) {
			t.Errorf("the views' %s differ", m.name)
			if adj, ok := m.a.(map[string][]adjEdge); ok {
				other := m.b.(map[string][]adjEdge)
				for id, l := range adj {
					if !reflect.DeepEqual(l, other[id]) {
						t.Errorf("%s of %s: %+v, against %+v", m.name, id, l, other[id])
						break
					}
				}
				for id := range other {
					if _, ok := adj[id]; !ok {
						t.Errorf("%s of %s: none, against %+v", m.name, id, other[id])
						break
					}
				}
			}
		}
	}
	bySeq := func(name string, n int, same func(seq int) bool) {
		for seq := range n {
			if !same(seq) {
				t.Errorf("the views' %s differ at seq %d", name, seq)
				return
			}
		}
	}
	at := func(s []*Edge, i int) *Edge {
		if i < len(s) {
			return s[i]
		}
		return nil
	}
	n := max(len(a.edgeSeq), len(b.edgeSeq))
	bySeq("edges by seq", n, func(i int) bool { return reflect.DeepEqual(at(a.edgeSeq, i), at(b.edgeSeq, i)) })
	bySeq("edge facts", n, func(i int) bool {
		if at(a.edgeSeq, i) == nil {
			return true
		}
		return reflect.DeepEqual(
			[]any{elem(a.edgeFacts, i), elem(a.edgeSal, i), elem(a.edgeAgents, i), elem(a.ends, i), a.apart.has(uint64(i))},
			[]any{elem(b.edgeFacts, i), elem(b.edgeSal, i), elem(b.edgeAgents, i), elem(b.ends, i), b.apart.has(uint64(i))})
	})
	nodeAt := func(s []*Node, i int) *Node {
		if i < len(s) {
			return s[i]
		}
		return nil
	}
	n = max(len(a.nodeSeq), len(b.nodeSeq))
	bySeq("nodes by seq", n, func(i int) bool {
		x, y := nodeAt(a.nodeSeq, i), nodeAt(b.nodeSeq, i)
		return reflect.DeepEqual(x, y) && (x == nil || a.apart.has(uint64(i)) == b.apart.has(uint64(i)))
	})
}

// TestCrashedRunCatchesUp: a run loads the view snapshot, writes (new
// nodes and edges, edges seen again, an episode's edge list grown past a
// chunk, a node's embedding replaced, an edge and a node deleted) and
// dies. The next start loads the snapshot that run set aside and reads
// only what Badger holds written since: its view is the one a load of
// every record from Badger gives. A second run dies the same way and the
// next start catches up from the same snapshot; a clean Close then
// writes a new snapshot and drops the markers.
func TestCrashedRunCatchesUp(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 21, testEntities, benchEdgesPerTxn)
	growEpisode(t, s, "ep-long", 0, episodeEdgeChunk+7, 40)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, _ = openLogged(t, dir)
	if !s.LoadedFromSnapshot() {
		t.Fatal("the clean snapshot was not loaded")
	}
	var someEdge, someNode, reNode string
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { someEdge = e.ID; return false })
		// A node with edges of its own, apart from someEdge's ends.
		r.Nodes(func(n *Node) bool {
			degree := 0
			r.Out(n.ID, func(*Edge) bool { degree++; return false })
			if degree == 0 || n.ID == r.Edge(someEdge).Source || n.ID == r.Edge(someEdge).Target {
				return true
			}
			someNode = n.ID
			return false
		})
	})
	observeOn(t, s, "a cup never seen", "a table never seen")
	observeOn(t, s, "a cup never seen", "a shelf never seen")
	observeOn(t, s, "a cup never seen", "a table never seen") // seen again: rewritten
	growEpisode(t, s, "ep-long", episodeEdgeChunk+7, episodeEdgeChunk, 40)
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		r, _, err := b.Resolve(DefaultNamespace, NodeEntity, "a cup never seen")
		if err != nil {
			return err
		}
		reNode = r.ID
		c := cloneNode(r)
		c.Embedding = []float32{0.5, 0.25, 0.125}
		if err := b.PutNode(c); err != nil {
			return err
		}
		if err := b.DeleteEdge(someEdge); err != nil {
			return err
		}
		shelf, _, err := b.Resolve(DefaultNamespace, NodeEntity, "a shelf never seen")
		if err != nil {
			return err
		}
		if err := b.DeleteNode(shelf.ID); err != nil { // written since the snapshot: nothing to remove
			return err
		}
		return b.DeleteNode(someNode)
	}); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	want, wantCounts := loadFromBadger(t, dir)
	if want.edges.get(want, someEdge) != nil || want.nodes[someNode] != nil || want.nodes[reNode] == nil {
		t.Fatal("the deletions or the writes did not reach Badger")
	}

	s, logs := openLogged(t, dir)
	cu, behind := s.CaughtUp()
	if !s.LoadedFromSnapshot() || !behind {
		t.Fatalf("loaded from the snapshot %v, caught up %v; logs:\n%s", s.LoadedFromSnapshot(), behind, logs)
	}
	if cu.Nodes != 2 || cu.Edges == 0 || cu.Episodes != 1 || cu.Removed < 3 {
		t.Fatalf("caught up with %+v", cu)
	}
	if !strings.Contains(logs.String(), "read_beside_the_load=true") {
		t.Errorf("what was written since not read beside the load; logs:\n%s", logs)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)
	if got := s.Counts(); !reflect.DeepEqual(got.Nodes, wantCounts.Nodes) || !reflect.DeepEqual(got.Edges, wantCounts.Edges) {
		t.Fatalf("counts %v %v, want %v %v", got.Nodes, got.Edges, wantCounts.Nodes, wantCounts.Edges)
	}
	if got := len(s.v.episodes[DefaultNamespace+"\x00ep-long"].Edges); got != 2*episodeEdgeChunk+7 {
		t.Fatalf("the grown episode lists %d edges", got)
	}

	// Another run dies: the next start catches up from the same snapshot.
	observeOn(t, s, "a cup never seen", "a drawer never seen")
	crash(t, s)
	want, _ = loadFromBadger(t, dir)
	s, _ = openLogged(t, dir)
	if cu2, behind := s.CaughtUp(); !behind || cu2.Since != cu.Since || cu2.Edges <= cu.Edges {
		t.Fatalf("second catch-up %+v (behind %v), first %+v", cu2, behind, cu)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)

	// A clean Close writes a snapshot of the caught-up view (not the one
	// set aside, put back) and drops the markers.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openLogged(t, dir)
	defer s.Close()
	if _, behind := s.CaughtUp(); !s.LoadedFromSnapshot() || behind {
		t.Fatalf("after a clean Close: from the snapshot %v, behind %v", s.LoadedFromSnapshot(), behind)
	}
	s.v.awaitLinks()
	s.v.indexLoaded()
	sameGraph(t, s.v, want)
	markers := 0
	if err := s.db.View(func(txn *badger.Txn) error {
		return scanPrefix(txn, append(key(prefixRecord, recordGone), 0), func(k, v []byte) error {
			markers++
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if markers != 0 {
		t.Fatalf("%d deletion markers left after a clean Close", markers)
	}
}

// TestCatchUpPastDroppedMarkersLoadsFromBadger puts back a snapshot
// taken before an edge's deletion whose marker a clean Close has since
// dropped: the catch-up cannot know the deletion, and Open loads from
// Badger instead, without the edge.
func TestCatchUpPastDroppedMarkersLoadsFromBadger(t *testing.T) {
	var gone string
	s, logs := reopenWithOldSnapshot(t, 22, func(s *Store) {
		s.Read(func(r Reader) {
			r.Edges(func(e *Edge) bool { gone = e.ID; return false })
		})
		if _, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteEdge(gone) }); err != nil {
			t.Fatal(err)
		}
	})
	defer s.Close()
	if !strings.Contains(logs.String(), "cannot catch up with the store") {
		t.Fatalf("the disagreement was not reported; logs:\n%s", logs)
	}
	if _, behind := s.CaughtUp(); behind || s.LoadedFromSnapshot() {
		t.Fatal("the view that could not catch up was kept")
	}
	if s.v.edge(gone) != nil {
		t.Fatal("the deleted edge is in the view")
	}
}

// reopenWithOldSnapshot writes a fleet (seed) and closes it, then opens
// it, has change write to it and closes it again, puts the first
// snapshot back and opens the store once more.
func reopenWithOldSnapshot(t *testing.T, seed uint64, change func(s *Store)) (*Store, *lockedBuffer) {
	t.Helper()
	dir := t.TempDir()
	s := writeFleet(t, dir, seed, testEntities, benchEdgesPerTxn)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(ViewSnapshotPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	s, _ = openLogged(t, dir)
	change(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ViewSnapshotPath(dir), old, 0o644); err != nil {
		t.Fatal(err)
	}
	return openLogged(t, dir)
}

// elem is s[i], or the zero value past s's end.
func elem[T any](s []T, i int) T {
	var zero T
	if i < len(s) {
		return s[i]
	}
	return zero
}

// nonEmpty is adjacency m without its empty lists.
func nonEmpty(m map[string][]adjEdge) map[string][]adjEdge {
	out := make(map[string][]adjEdge, len(m))
	for id, l := range m {
		if len(l) > 0 {
			out[id] = l
		}
	}
	return out
}

// TestDeletionsBeforeACleanCloseLeaveTheCatchUpPossible: a run deletes
// an edge and closes cleanly, which drops the deletion's marker; the
// next run writes and dies. Catching up from the snapshots that Close
// wrote (the view's, and an index saved at its generation) needs no
// dropped marker, and is not refused.
func TestDeletionsBeforeACleanCloseLeaveTheCatchUpPossible(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 23, testEntities, benchEdgesPerTxn)
	var gone string
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { gone = e.ID; return false })
	})
	if _, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteEdge(gone) }); err != nil {
		t.Fatal(err)
	}
	gen, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openLogged(t, dir)
	observeOn(t, s, "a cup never seen", "a table never seen")
	crash(t, s)
	s, logs := openLogged(t, dir)
	defer s.Close()
	if _, behind := s.CaughtUp(); !behind {
		t.Fatalf("the view did not catch up; logs:\n%s", logs)
	}
	d, err := s.ChangedSince(gen.Version)
	if err != nil || len(d.Records) == 0 {
		t.Fatalf("changed since the clean close's generation: %d records, %v", len(d.Records), err)
	}
	if s.v.edge(gone) != nil {
		t.Fatal("the edge deleted before the clean close is back")
	}
}

// TestChangedSinceServesALaterVersion: asked first since an older
// version, ChangedSince answers a later one from what it read, and the
// answer is the one a read since the later version gives: records
// written after it (one written before and after in it once), a node
// deleted after it and one deleted before it and written again after,
// an embedding replaced after it, spans left out when older.
func TestChangedSinceServesALaterVersion(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 29, testEntities, benchEdgesPerTxn)
	defer s.Close()
	gen := func() uint64 {
		g, err := s.Generation()
		if err != nil {
			t.Fatal(err)
		}
		return g.Version
	}
	update := func(fn func(b *Batch) error) {
		t.Helper()
		if _, err := s.Update(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(b *Batch, name string) *Node {
		n, _, err := b.Resolve(DefaultNamespace, NodeEntity, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	v1 := gen()
	observeOn(t, s, "a cup before", "a table before")
	observeOn(t, s, "a lamp before", "a desk before")
	update(func(b *Batch) error { return b.DeleteNode(resolve(b, "a desk before").ID) })
	v2 := gen()
	observeOn(t, s, "a cup before", "a shelf after")  // the cup written again
	observeOn(t, s, "a desk before", "a floor after") // deleted before v2, written again after
	update(func(b *Batch) error {
		n := cloneNode(resolve(b, "a table before"))
		n.Embedding = []float32{0.25, 0.5, 0.125}
		return b.PutNode(n)
	})
	update(func(b *Batch) error { return b.DeleteNode(resolve(b, "a lamp before").ID) })

	older, err := s.ChangedSince(v1)
	if err != nil {
		t.Fatal(err)
	}
	later, err := s.ChangedSince(v2)
	if err != nil {
		t.Fatal(err)
	}
	if s.changedSince.reads != 1 {
		t.Fatalf("%d reads of Badger for the two answers, want 1", s.changedSince.reads)
	}
	direct, err := s.changedSinceRead(v2)
	if err != nil {
		t.Fatal(err)
	}
	if len(later.Records) == 0 || len(later.Removed) == 0 || len(later.Records) >= len(older.Records) {
		t.Fatalf("since v2: %d records, %d removed; since v1: %d records", len(later.Records), len(later.Removed), len(older.Records))
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{{"records", later.Records, direct.Records}, {"removed", later.Removed, direct.Removed}, {"spans", later.Spans, direct.Spans}} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s since v2 from the answer since v1: %+v, read since v2: %+v", c.name, c.got, c.want)
		}
	}
	names := map[string]bool{}
	for _, r := range later.Records {
		names[r.ID] = true
	}
	for _, n := range []string{"a table before", "a shelf after", "a floor after", "a desk before"} {
		if !names[EntityID(DefaultNamespace, NodeEntity, n)] {
			t.Errorf("%q is not among the records written since v2", n)
		}
	}
	if names[EntityID(DefaultNamespace, NodeEntity, "a lamp before")] {
		t.Error("the lamp deleted since v2 is among the records written")
	}
}

// TestReadChangedSinceAhead: a store opened after a crash with
// ReadChangedSince reads what changed since that version beside its
// view's load, and the owner's ChangedSince then gives that answer
// without reading Badger again, equal to a direct read; a commit after
// it drops the answer, and the next ask reads. A version the store is
// not past reads nothing ahead.
func TestReadChangedSinceAhead(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 31, testEntities, benchEdgesPerTxn)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(dir)
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	observeOn(t, s, "a cup", "a table")
	observeOn(t, s, "a lamp", "a desk")
	crash(t, s)

	o.ReadChangedSince = g.Version
	s, err = Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.awaitReadAhead()
	if s.changedSince.reads != 1 {
		t.Fatalf("%d reads of Badger by Open, want 1: the one beside the load", s.changedSince.reads)
	}
	got, err := s.ChangedSince(g.Version)
	if err != nil {
		t.Fatal(err)
	}
	if s.changedSince.reads != 1 {
		t.Fatalf("%d reads of Badger, want 1: the one beside the load", s.changedSince.reads)
	}
	direct, err := s.changedSinceRead(g.Version)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) < 4 || !reflect.DeepEqual(got.Records, direct.Records) || !reflect.DeepEqual(got.Removed, direct.Removed) {
		t.Fatalf("read ahead: %d records %+v; read now: %d records %+v", len(got.Records), got.Records, len(direct.Records), direct.Records)
	}
	observeOn(t, s, "a cup", "a shelf")
	if _, err := s.ChangedSince(g.Version); err != nil || s.changedSince.reads != 2 {
		t.Fatalf("after a commit: %d reads (want 2), %v", s.changedSince.reads, err)
	}
	s.Close()

	now, err := func() (Generation, error) {
		s, err := Open(DefaultOptions(dir))
		if err != nil {
			return Generation{}, err
		}
		defer s.Close()
		return s.Generation()
	}()
	if err != nil {
		t.Fatal(err)
	}
	o.ReadChangedSince = now.Version + 1<<40 // a stamp of another history
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.readAhead != nil || s.changedSince.reads != 0 {
		t.Errorf("a version ahead of the store was read ahead (%d reads)", s.changedSince.reads)
	}
}
