package particle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func openScratchStore(t testing.TB, dir string) *Store {
	t.Helper()
	o := DefaultOptions(dir)
	o.SyncWrites = false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeTestGraph stores an episode of two steps (one with an image blob)
// that saw a gripper act on a red block, a span and a session.
func writeTestGraph(t *testing.T, s *Store) {
	t.Helper()
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	_, err := s.Update(context.Background(), func(b *Batch) error {
		ns := DefaultNamespace
		ep := &Episode{ID: "ep-1", Namespace: ns, Agent: "ur5", StartTime: at, NodeID: EpisodeNodeID(ns, "ep-1"), Steps: 2}
		epNode := &Node{ID: ep.NodeID, Namespace: ns, Type: NodeEpisode, Name: "ep-1"}
		if err := b.PutNode(epNode); err != nil {
			return err
		}
		var ids []string
		for _, name := range []string{"red block", "gripper"} {
			n, _, err := b.Resolve(ns, NodeEntity, name)
			if err != nil {
				return err
			}
			n.Embedding = []float32{1, 0}
			if err := b.PutNode(n); err != nil {
				return err
			}
			ids = append(ids, n.ID)
		}
		for _, o := range []Observation{
			{Source: ids[1], Target: ids[0], Type: EdgeToolUse, Predicate: "acts_on"},
			{Source: ep.NodeID, Target: ids[0], Type: EdgeMembership, Predicate: "observed"},
			{Source: ids[0], Target: ids[1], Type: EdgeAssertion, Predicate: "held_by", Value: "yes"},
		} {
			o.Namespace, o.At = ns, at
			e, _, err := b.Observe(o)
			if err != nil {
				return err
			}
			ep.Edges = append(ep.Edges, e.ID)
		}
		ep.Nodes = append(ep.Nodes, ids...)
		if err := b.PutEpisode(ep); err != nil {
			return err
		}
		ref, err := b.PutBlob([]byte("jpeg bytes"))
		if err != nil {
			return err
		}
		for i := range 2 {
			raw := fmt.Sprintf(`{"index":%d,"observation":{"image":{"ref":%q}}}`, i, ref)
			if err := b.PutStep(ns, "ep-1", i, []byte(raw)); err != nil {
				return err
			}
		}
		if err := b.PutSpan(ns, "span-1", 1, []byte(`{"id":"span-1","level":1}`)); err != nil {
			return err
		}
		return b.PutSession(ns, "s-1", []byte(`{"id":"s-1"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func problemList(r *CheckReport) string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.Kind+": "+p.Detail)
	}
	return strings.Join(out, "\n")
}

func TestCheckCleanStore(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("clean store has problems:\n%s", problemList(r))
	}
	if r.Nodes != 3 || r.Edges != 3 || r.Episodes != 1 || r.Steps != 2 || r.Blobs != 1 || r.Spans != 1 || r.Sessions != 1 || r.Adjacency != 0 || r.Identities != 0 || r.Vectors != 2 {
		t.Errorf("counted %+v", r)
	}
	// And after a reopen (the view rebuilt from Badger).
	s.Close()
	s = openScratchStore(t, dir)
	if r, err := s.Check(context.Background()); err != nil || !r.OK() {
		t.Fatalf("after reopen: %v\n%s", err, problemList(r))
	}
}

// TestCheckFindsDamage damages one table at a time behind the store's
// back and expects Check to name what broke.
func TestCheckFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s *Store, txn *badger.Txn)
		want   string
	}{
		{"node removed under its edges", func(t *testing.T, s *Store, txn *badger.Txn) {
			n := s.v.aliases[aliasKey(DefaultNamespace, NodeEntity, "gripper")]
			mustOK(t, txn.Delete(nodeKey(DefaultNamespace, n)))
		}, "edge-endpoint"},
		{"alias of a deleted node", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Set(aliasDBKey(aliasKey(DefaultNamespace, NodeTool, "ghost")), []byte("no-such-node")))
		}, "alias"},
		{"orphan step", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Set(stepKey(DefaultNamespace, "ep-missing", 0), []byte(`{}`)))
		}, "step"},
		{"step past the episode end", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Set(stepKey(DefaultNamespace, "ep-1", 7), []byte(`{}`)))
		}, "step"},
		{"missing blob", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Set(stepKey(DefaultNamespace, "ep-1", 1), []byte(`"blob:`+strings.Repeat("ab", 32)+`"`)))
		}, "blob"},
		{"counts off", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Delete(spanKey(DefaultNamespace, "span-1")))
		}, "counts"},
		{"embedding stored apart lost", func(t *testing.T, s *Store, txn *badger.Txn) {
			n := s.v.aliases[aliasKey(DefaultNamespace, NodeEntity, "gripper")]
			mustOK(t, txn.Delete(vectorKey(nodeKey(DefaultNamespace, n))))
		}, "vector-missing"},
		{"embedding of the wrong length", func(t *testing.T, s *Store, txn *badger.Txn) {
			n := s.v.aliases[aliasKey(DefaultNamespace, NodeEntity, "gripper")]
			mustOK(t, txn.Set(vectorKey(nodeKey(DefaultNamespace, n)), []byte{1, 2, 3, 4}))
		}, "vector-length"},
		{"embedding without its record", func(t *testing.T, s *Store, txn *badger.Txn) {
			mustOK(t, txn.Set(vectorKey(nodeKey(DefaultNamespace, "no-such-node")), vectorValue([]float32{1, 0}, nil)))
		}, "vector-orphan"},
		{"undecodable edge", func(t *testing.T, s *Store, txn *badger.Txn) {
			for _, e := range edgesByID(s.v) {
				mustOK(t, txn.Set(edgeKey(e.Namespace, e.ID), []byte{9, 9}))
				return
			}
		}, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openScratchStore(t, t.TempDir())
			writeTestGraph(t, s)
			txn := s.db.NewTransaction(true)
			tc.damage(t, s, txn)
			mustOK(t, txn.Commit())
			r, err := s.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range r.Problems {
				found = found || p.Kind == tc.want
			}
			if !found {
				t.Errorf("want a %q problem, got:\n%s", tc.want, problemList(r))
			}
		})
	}
}

// TestLegacyAdjacencyAndIdentityEntries: a store written by an earlier
// version holds an identity and two adjacency entries per edge. It still
// checks clean and reopens, and deleting an edge deletes its entries.
func TestLegacyAdjacencyAndIdentityEntries(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	txn := s.db.NewTransaction(true)
	var victim *Edge
	for _, e := range edgesByID(s.v) {
		mustOK(t, txn.Set(adjKey(prefixOut, e.Namespace, e.Source, e.Type, e.ID), nil))
		mustOK(t, txn.Set(adjKey(prefixIn, e.Namespace, e.Target, e.Type, e.ID), nil))
		mustOK(t, txn.Set(identityDBKey(edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)), []byte(e.ID)))
		victim = e
	}
	mustOK(t, txn.Commit())
	s.Close()
	s = openScratchStore(t, dir)
	r, err := s.Check(context.Background())
	if err != nil || !r.OK() {
		t.Fatalf("legacy entries: %v\n%s", err, problemList(r))
	}
	if r.Adjacency != 6 || r.Identities != 3 {
		t.Fatalf("counted %d adjacency and %d identity entries, want 6 and 3", r.Adjacency, r.Identities)
	}
	if _, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteEdge(victim.ID) }); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Check(context.Background()); err != nil || !r.OK() {
		t.Fatalf("after the delete: %v\n%s", err, problemList(r))
	}
	if r.Adjacency != 4 || r.Identities != 2 {
		t.Errorf("after deleting an edge: %d adjacency and %d identity entries, want 4 and 2", r.Adjacency, r.Identities)
	}
}

func TestCheckComparesViewWithBadger(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	// A view that lost an adjacency entry (a bug in publishing) is
	// caught even though Badger is fine.
	s.mu.Lock()
	for id := range s.v.out {
		s.v.out[id] = nil
		break
	}
	s.mu.Unlock()
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problemList(r), "view-adjacency") {
		t.Errorf("want a view-adjacency problem, got:\n%s", problemList(r))
	}
	// So is one that lost an identity entry (a re-observation would
	// then make a duplicate edge).
	s.mu.Lock()
	for h := range s.v.identity.bySum {
		delete(s.v.identity.bySum, h)
		break
	}
	s.mu.Unlock()
	if r, err = s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problemList(r), "view-identity") {
		t.Errorf("want a view-identity problem, got:\n%s", problemList(r))
	}
}

// TestCheckComparesEachEdgeWithTheView: the check compares every edge
// it reads from Badger with the view's copy of it: an edge whose copy
// differs in a field, or in its embedding (stored apart, or inline as
// an earlier format keeps it), is named, and one missing from either
// side too.
func TestCheckComparesEachEdgeWithTheView(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline bool // the edges' records rewritten in format 2
		damage func(s *Store, e *Edge)
		want   string
	}{
		{"a field", false, func(_ *Store, e *Edge) { e.Confidence /= 2 }, "differs between the view and Badger"},
		{"an embedding stored apart", false, func(_ *Store, e *Edge) { e.Embedding = []float32{1, 2, 4} }, "differs between the view and Badger: its embedding"},
		{"an embedding held inline", true, func(_ *Store, e *Edge) { e.Embedding = []float32{1, 2, 4} }, "differs between the view and Badger"},
		{"missing from the view", false, func(s *Store, e *Edge) { s.v.edges.remove(e.ID) }, "is in Badger, not in the view"},
		{"missing from Badger", false, func(s *Store, e *Edge) {
			mustOK(t, s.db.Update(func(txn *badger.Txn) error {
				k := edgeKey(e.Namespace, e.ID)
				mustOK(t, txn.Delete(k))
				return txn.Delete(vectorKey(k))
			}))
		}, "is in the view, not in Badger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openScratchStore(t, dir)
			writeTestGraph(t, s)
			observeOn(t, s, "cup", "table")
			if tc.inline {
				rewriteInline(t, s, false)
				s.Close()
				s = openScratchStore(t, dir)
				s.IndexLoaded() // a load leaves the edges by id to be made
			}
			var victim *Edge
			for _, e := range edgesByID(s.v) {
				if len(e.Embedding) > 0 {
					victim = e
				}
			}
			if victim == nil {
				t.Fatal("no edge with an embedding")
			}
			// The two nodes' embeddings are stored apart, and the edge's
			// unless rewritten inline.
			if r, want := mustCheck(t, s), map[bool]int64{false: 3, true: 2}[tc.inline]; r.Vectors != want {
				t.Fatalf("%d embeddings stored apart, want %d", r.Vectors, want)
			}
			s.mu.Lock()
			tc.damage(s, victim)
			s.mu.Unlock()
			r, err := s.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range r.Problems {
				found = found || p.Kind == "view" && strings.Contains(p.Detail, victim.ID) && strings.HasSuffix(p.Detail, tc.want)
			}
			if !found {
				t.Errorf("want a view problem naming %s: %q, got:\n%s", victim.ID, tc.want, problemList(r))
			}
		})
	}
}

// TestCheckFindsStaleAdjacencyFacts damages the facts copy of one
// adjacency entry, then the order of a list: the check names each.
func TestCheckFindsStaleAdjacencyFacts(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	if r, err := s.Check(context.Background()); err != nil || !r.OK() {
		t.Fatalf("before the damage: %v\n%s", err, problemList(r))
	}
	s.mu.Lock()
	var node string
	for id, list := range s.v.in {
		if len(list) >= 2 {
			node = id
			list[0].facts.Confidence += 0.25
			break
		}
	}
	s.mu.Unlock()
	if node == "" {
		t.Fatal("the test graph has no node with two in-edges")
	}
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problemList(r), "holds facts other than the edge's") {
		t.Errorf("want a stale-facts problem, got:\n%s", problemList(r))
	}
	s.mu.Lock()
	list := s.v.in[node]
	list[0].facts.Confidence -= 0.25
	list[0], list[1] = list[1], list[0]
	s.mu.Unlock()
	if r, err = s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := problemList(r); !strings.Contains(p, "out of seq order") || strings.Contains(p, "holds facts other") {
		t.Errorf("want only an order problem, got:\n%s", p)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
