package particle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// testEntities is how many entities the tests' fleet workload has.
const testEntities = 400

// openSnapshots opens the store in dir, with or without view snapshots.
func openSnapshots(t *testing.T, dir string, snapshots bool) *Store {
	t.Helper()
	o := DefaultOptions(dir)
	o.ViewSnapshot = snapshots
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshotView copies what a reader sees: every edge and node, and each
// node's out-edges in adjacency order.
func snapshotView(s *Store) (edges map[string]*Edge, nodes map[string]*Node, out map[string][]string) {
	edges, nodes, out = map[string]*Edge{}, map[string]*Node{}, map[string][]string{}
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { edges[e.ID] = e; return true })
		r.Nodes(func(n *Node) bool {
			nodes[n.ID] = n
			r.Out(n.ID, func(e *Edge) bool { out[n.ID] = append(out[n.ID], e.ID); return true })
			return true
		})
	})
	return edges, nodes, out
}

// TestReopenLoadsEverythingInOrder writes more values than one load
// chunk holds, reopens, and finds the same view: the parallel load puts
// values in key order, as a serial scan did.
func TestReopenLoadsEverythingInOrder(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 3, testEntities, 3*benchEdgesPerTxn) // several chunks of each table
	edges, nodes, out := snapshotView(s)
	counts := s.Counts()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	edges2, nodes2, out2 := snapshotView(s)
	// A few observations repeat an edge (400 entities), reinforcing it.
	if len(edges2) != len(edges) || len(edges2) < 3*benchEdgesPerTxn-20 || len(nodes2) != testEntities {
		t.Fatalf("reopened with %d edges and %d nodes, want %d and %d", len(edges2), len(nodes2), len(edges), testEntities)
	}
	if !reflect.DeepEqual(edges2, edges) || !reflect.DeepEqual(nodes2, nodes) {
		t.Fatal("reopened nodes or edges differ from those written")
	}
	// A serial scan put edges in key order, which is id order within a
	// namespace (a live store lists them in commit order instead).
	for _, ids := range out {
		slices.Sort(ids)
	}
	if !reflect.DeepEqual(out2, out) {
		t.Fatal("reopened adjacency differs in content or key order")
	}
	if got := s.Counts(); !reflect.DeepEqual(got, counts) {
		t.Fatalf("counts = %+v, want %+v", got, counts)
	}
}

// TestReopenRefusesCorruptValue damages one edge value in the middle of
// the table, or one node (whose chunk then never reaches the view, while
// the scanners of edges wait for every node to): Open fails with
// ErrCorrupt, from the view snapshot and from Badger, and leaves nothing
// running.
func TestReopenRefusesCorruptValue(t *testing.T) {
	for _, node := range []bool{false, true} {
		t.Run(map[bool]string{false: "edge", true: "node"}[node], func(t *testing.T) {
			dir := t.TempDir()
			s := writeFleet(t, dir, 4, testEntities, benchEdgesPerTxn)
			var key []byte
			s.Read(func(r Reader) {
				if node {
					r.Nodes(func(n *Node) bool { key = nodeKey(n.Namespace, n.ID); return false })
					return
				}
				r.Edges(func(e *Edge) bool { key = edgeKey(e.Namespace, e.ID); return false })
			})
			kind := map[bool]byte{false: kindEdge, true: kindNode}[node]
			if err := s.db.Update(func(txn *badger.Txn) error {
				return txn.Set(key, []byte{formatV2, kind, 0xff})
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(DefaultOptions(dir)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			// The failed Open released Badger's directory lock: a second
			// Open gets as far as the damage again.
			if _, err := Open(DefaultOptions(dir)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("second Open = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestReopenFormat1Store opens a store whose values were written in
// format 1, as stores made before format 2 hold them.
func TestReopenFormat1Store(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	observeOn(t, s, "cup", "table")
	edges, nodes, out := snapshotView(s)
	// Rewrite every node and edge in format 1.
	if err := s.db.Update(func(txn *badger.Txn) error {
		for _, n := range nodes {
			c := *n
			c.Embedding = nil
			v, err := encodeValue(&c, n.Embedding)
			if err != nil {
				return err
			}
			if err := txn.Set(nodeKey(n.Namespace, n.ID), v); err != nil {
				return err
			}
		}
		for _, e := range edges {
			c := *e
			c.Embedding = nil
			v, err := encodeValue(&c, e.Embedding)
			if err != nil {
				return err
			}
			if err := txn.Set(edgeKey(e.Namespace, e.ID), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	edges2, nodes2, out2 := snapshotView(s)
	if len(edges2) != 1 || len(nodes2) != 2 || !reflect.DeepEqual(out2, out) {
		t.Fatalf("format-1 store reopened with %d edges, %d nodes, out %v", len(edges2), len(nodes2), out2)
	}
	for id, e := range edges {
		if !reflect.DeepEqual(edges2[id].Embedding, e.Embedding) || edges2[id].Seq != e.Seq || edges2[id].Assertion.Predicate != "on" {
			t.Fatalf("edge %s reopened as %+v, want %+v", id, edges2[id], e)
		}
	}
}

// TestLoadPartsKeepKeyOrder cuts the edge table into many key ranges,
// scanned in parallel: the view gets the edges in key order all the same.
func TestLoadPartsKeepKeyOrder(t *testing.T) {
	s := writeFleet(t, t.TempDir(), 5, testEntities, 2*benchEdgesPerTxn)
	defer s.Close()
	var keys [][]byte
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { keys = append(keys, edgeKey(e.Namespace, e.ID)); return true })
	})
	slices.SortFunc(keys, bytes.Compare)
	var parts []loadPart
	lo := []byte{byte(prefixEdge)}
	for i := 37; i < len(keys); i += 97 { // ranges of 97 edges, then one empty range
		parts = append(parts, loadPart{table: 1, lo: lo, hi: keys[i]})
		lo = keys[i]
	}
	parts = append(parts, loadPart{table: 1, lo: lo}, loadPart{table: 1, lo: []byte{byte(prefixEdge) + 1}})
	parts = append([]loadPart{{table: 0, lo: []byte{byte(prefixNode)}}}, parts...)
	parts = append(parts, loadPart{table: 2, lo: []byte{byte(prefixEpisode)}})
	v := newView()
	var counts loadCounts
	if err := s.db.View(func(txn *badger.Txn) error {
		var err error
		counts, err = loadPartsInto(txn, parts, 3, v, func() {})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	v.linkLoaded()
	v.awaitLinks()
	if got, want := counts.edges[EdgeAssertion], s.Counts().Edges[EdgeAssertion]; got != want {
		t.Fatalf("load counted %d assertion edges, want %d", got, want)
	}
	want, _, wantOut := snapshotView(s)
	for _, ids := range wantOut {
		slices.Sort(ids)
	}
	s.mu.Lock()
	s.v = v // read the loaded view through the store
	s.mu.Unlock()
	edges, _, out := snapshotView(s)
	if !reflect.DeepEqual(edges, want) || !reflect.DeepEqual(out, wantOut) {
		t.Fatalf("loaded %d edges (want %d), adjacency equal: %v", len(edges), len(want), reflect.DeepEqual(out, wantOut))
	}
}

// TestReopenListsEdgesOfMissingNodes removes an edge's target node from
// Badger behind the store's back: reopened, the edge is still in the
// adjacency of both its ends, as a live store lists it.
func TestReopenListsEdgesOfMissingNodes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	observeOn(t, s, "cup", "table")
	observeOn(t, s, "cup", "shelf")
	var gone *Node
	var src string
	s.Read(func(r Reader) {
		gone = r.Lookup(DefaultNamespace, NodeEntity, "table")
		src = r.Lookup(DefaultNamespace, NodeEntity, "cup").ID
	})
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(nodeKey(gone.Namespace, gone.ID)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, snap := range []bool{true, false} { // from the snapshot Close wrote, then from Badger
		s := openSnapshots(t, dir, snap)
		var out, in []string
		s.Read(func(r Reader) {
			r.Out(src, func(e *Edge) bool { out = append(out, e.Target); return true })
			r.In(gone.ID, func(e *Edge) bool { in = append(in, e.Source); return true })
		})
		if len(out) != 2 || !slices.Contains(out, gone.ID) || len(in) != 1 || in[0] != src {
			t.Fatalf("snapshot %v: out of cup %v, in of the missing node %v", snap, out, in)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReopenedStoreFindsItsEdgesByIdentity: Open leaves the loaded
// edges' maps by id and identity to the first read or write that needs
// them (or IndexLoaded). Observing known facts again after a reopen,
// from the view snapshot and from Badger, reinforces the edges they
// made instead of adding new ones, with IndexLoaded running beside the
// writes (for the race detector) or not at all.
func TestReopenedStoreFindsItsEdgesByIdentity(t *testing.T) {
	for _, c := range []struct {
		name     string
		snapshot bool
		index    bool
	}{{"snapshot", true, false}, {"badger", false, false}, {"snapshot, indexed beside", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSnapshots(t, dir, c.snapshot)
			pairs := [][2]string{{"cup", "table"}, {"bowl", "shelf"}, {"lid", "cup"}}
			for _, p := range pairs {
				observeOn(t, s, p[0], p[1])
			}
			edges, _, _ := snapshotView(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openSnapshots(t, dir, c.snapshot)
			defer s.Close()
			if s.LoadedFromSnapshot() != c.snapshot {
				t.Fatalf("loaded from the snapshot: %v, want %v", s.LoadedFromSnapshot(), c.snapshot)
			}
			var beside sync.WaitGroup
			if c.index {
				beside.Go(s.IndexLoaded)
			}
			for id := range edges { // a read by id, before any write
				if _, err := s.Edge(id); err != nil {
					t.Fatalf("after the reopen: %v", err)
				}
			}
			for _, p := range pairs {
				observeOn(t, s, p[0], p[1])
			}
			beside.Wait()
			again, _, _ := snapshotView(s)
			if len(again) != len(edges) {
				t.Fatalf("%d edges after observing the same facts again, want %d", len(again), len(edges))
			}
			for id, e := range again {
				if edges[id] == nil || e.Evidence <= edges[id].Evidence {
					t.Errorf("edge %s: evidence %d, was %v", id, e.Evidence, edges[id])
				}
			}
		})
	}
}

// TestReopenKeepsGraphRulesOfEdgesWithoutSeq: an edge without a seq (as
// stores older than seqs hold) is not in the view's facts by seq, which
// the policy's graph rules are read from when every edge is. After a
// reopen, from Badger and from the view snapshot, before anything has
// made the maps of the loaded edges, a policy edge without a seq still
// hides its target from the role it denies.
func TestReopenKeepsGraphRulesOfEdgesWithoutSeq(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		dir := t.TempDir()
		s := openSnapshots(t, dir, snapshot)
		var pe *Edge
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			pol, _, err := b.Resolve(DefaultNamespace, NodeEntity, "lab privacy")
			if err != nil {
				return err
			}
			target, _, err := b.Resolve(DefaultNamespace, NodeEntity, "calibration")
			if err != nil {
				return err
			}
			for _, n := range []*Node{pol, target} {
				if err := b.PutNode(n); err != nil {
					return err
				}
			}
			pe, _, err = b.Observe(Observation{Namespace: DefaultNamespace, Source: pol.ID, Target: target.ID,
				Type: EdgePolicy, Predicate: "restricts", Policy: Policy{DenyRoles: []string{"planner"}}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		c := *pe
		c.Seq = 0
		v, err := encodeEdgeV2(&c, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(edgeKey(c.Namespace, c.ID), v) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openSnapshots(t, dir, snapshot)
		if s.LoadedFromSnapshot() != snapshot {
			t.Fatalf("loaded from the snapshot: %v, want %v", s.LoadedFromSnapshot(), snapshot)
		}
		var denies bool
		for _, r := range s.Rules(RuleActive) {
			denies = denies || (r.Source == "graph" && r.Target.Node == pe.Target && slices.Contains(r.Roles, "planner"))
		}
		if !denies {
			t.Errorf("snapshot %v: the policy edge without a seq lost its rule: %+v", snapshot, s.Rules(RuleActive))
		}
		s.Close()
	}
}

// TestReopenedStoreReadsAdjacencyWhileLinking: Open returns with the
// loaded edges' adjacency still being built on a goroutine. Reads of it
// right after the reopen (newest facts first, out and in, on several
// goroutines), a write and WaitLinked beside them all see the whole
// adjacency, from the view snapshot and from Badger (run under -race:
// a read that did not wait would race with the building).
func TestReopenedStoreReadsAdjacencyWhileLinking(t *testing.T) {
	for _, snapshot := range []bool{true, false} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			dir := t.TempDir()
			s := writeFleet(t, dir, 3, testEntities, 3*benchEdgesPerTxn)
			_, nodes, out := snapshotView(s)
			in := map[string]int{}
			s.Read(func(r Reader) {
				for id := range nodes {
					r.In(id, func(*Edge) bool { in[id]++; return true })
				}
			})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openSnapshots(t, dir, snapshot)
			defer s.Close()
			if s.LoadedFromSnapshot() != snapshot {
				t.Fatalf("loaded from the snapshot: %v, want %v", s.LoadedFromSnapshot(), snapshot)
			}
			ids := slices.Sorted(maps.Keys(nodes))
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 3 {
				wg.Go(func() {
					s.Read(func(r Reader) {
						for i := w; i < len(ids); i += 3 {
							id := ids[i]
							nOut, nIn := 0, 0
							r.OutNewestFacts(id, func(uint64, *EdgeFacts, uint64) bool { nOut++; return true })
							r.InNewestFacts(id, func(uint64, *EdgeFacts, uint64) bool { nIn++; return true })
							if nOut != len(out[id]) || nIn != in[id] {
								errs <- fmt.Errorf("node %s: %d out and %d in right after the reopen, want %d and %d", id, nOut, nIn, len(out[id]), in[id])
								return
							}
						}
					})
				})
			}
			wg.Go(s.WaitLinked)
			wg.Go(func() {
				if _, err := s.Update(context.Background(), func(b *Batch) error {
					_, _, err := b.Resolve(DefaultNamespace, NodeEntity, "linking cup")
					return err
				}); err != nil {
					errs <- fmt.Errorf("a write beside the linking: %w", err)
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			_, _, again := snapshotView(s)
			for id, list := range out {
				if !slices.Equal(again[id], list) {
					t.Errorf("node %s: out %v after the reopen, want %v", id, again[id], list)
				}
			}
		})
	}
}

// TestWrittenCountsCommittedBytes: Store.Written counts each committed
// value's key and bytes in its table (an edge's embedding, stored apart,
// in the edges'), a failed batch nothing, and an edge observed again is
// written again without its unchanged embedding.
func TestWrittenCountsCommittedBytes(t *testing.T) {
	s, err := Open(DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w := s.Written(); w.Total() != 0 {
		t.Fatalf("a new store has written %+v", w)
	}
	observeOn(t, s, "cup", "table")
	w1 := s.Written()
	var edge *Edge
	s.Read(func(r Reader) { r.Edges(func(e *Edge) bool { edge = e; return false }) })
	edgeBytes := func(e *Edge) int64 {
		v, err := encodeEdgeV2(e, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(edgeKey(e.Namespace, e.ID)) + len(v))
	}
	vectorBytes := int64(len(vectorKey(edgeKey(edge.Namespace, edge.ID))) + 4*len(edge.Embedding))
	if want := edgeBytes(edge) + vectorBytes; len(edge.Embedding) != 3 || w1.Edges != want {
		t.Fatalf("edges: %d bytes written, want %d (its embedding: %v)", w1.Edges, want, edge.Embedding)
	}
	if w1.Nodes == 0 || w1.Other == 0 || w1.Episodes != 0 || w1.Steps != 0 {
		t.Fatalf("after one observation: %+v", w1)
	}
	failed := errors.New("no")
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		if _, _, err := b.Resolve(DefaultNamespace, NodeEntity, "lid"); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("Update: %v", err)
	}
	if w := s.Written(); w != w1 {
		t.Fatalf("a failed batch counted: %+v, was %+v", w, w1)
	}
	observeOn(t, s, "cup", "table")
	s.Read(func(r Reader) { edge = r.Edge(edge.ID) })
	if w2 := s.Written().Sub(w1); w2.Edges != edgeBytes(edge) || w2.Nodes == 0 {
		t.Fatalf("observed again: %+v written, want %d edge bytes; the first time %+v", w2, edgeBytes(edge), w1)
	}
}
