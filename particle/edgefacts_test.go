package particle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// checkFacts asserts that every edge's facts are EdgeFactsOf(edge) and that
// no seq without an edge has facts.
func checkFacts(t *testing.T, s *Store, when string) {
	t.Helper()
	s.Read(func(r Reader) {
		live := map[uint64]bool{}
		r.Edges(func(e *Edge) bool {
			live[e.Seq] = true
			f := r.EdgeFactsBySeq(e.Seq)
			if f == nil || *f != EdgeFactsOf(e) {
				t.Fatalf("%s: edge %s (seq %d): facts %+v, want %+v", when, e.ID, e.Seq, f, EdgeFactsOf(e))
			}
			return true
		})
		for seq := range uint64(len(r.v.edgeFacts)) {
			if !live[seq] && r.EdgeFactsBySeq(seq) != nil {
				t.Fatalf("%s: seq %d has facts and no edge", when, seq)
			}
		}
		// The walk sees each edge once per direction, with its facts.
		for id := range r.v.nodes {
			n := 0
			r.OutNewestFacts(id, func(seq uint64, f *EdgeFacts) bool {
				if e := r.EdgeBySeq(seq); e == nil || e.Source != id || *f != EdgeFactsOf(e) {
					t.Fatalf("%s: out of %s: seq %d", when, id, seq)
				}
				n++
				return true
			})
			r.InNewestFacts(id, func(seq uint64, f *EdgeFacts) bool {
				if e := r.EdgeBySeq(seq); e == nil || e.Target != id || *f != EdgeFactsOf(e) {
					t.Fatalf("%s: in of %s: seq %d", when, id, seq)
				}
				n++
				return true
			})
			if n != len(r.v.out[id])+len(r.v.in[id]) {
				t.Fatalf("%s: node %s: %d edges walked, %d in the adjacency", when, id, n, len(r.v.out[id])+len(r.v.in[id]))
			}
		}
	})
}

// TestEdgeFactsFollowTheEdges keeps edge facts current through what
// changes an edge: re-observation (confidence, provenance of several
// agents, a wider scope), supersession, deletion, a node merge, and a
// reopen from disk.
func TestEdgeFactsFollowTheEdges(t *testing.T) {
	dir := t.TempDir()
	o := DefaultOptions(dir)
	o.SyncWrites = false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := DefaultNamespace
	if _, err := s.ConfigurePredicate(ctx, Predicate{Name: "located_in", Scope: ns, Cardinality: Single, Status: PredicateActive}, "test", "test"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var ids []string
	var doomed string
	observe := func(i int, agent, pred, place string, conf float64) {
		_, err := s.Update(ctx, func(b *Batch) error {
			if ids == nil {
				for k := range 6 {
					n, _, err := b.Resolve(ns, NodeEntity, fmt.Sprintf("thing %d", k))
					if err != nil {
						return err
					}
					if err := b.PutNode(n); err != nil {
						return err
					}
					ids = append(ids, n.ID)
				}
			}
			e, _, err := b.Observe(Observation{Namespace: ns, Source: ids[i%3], Target: ids[3+(i/3)%3], Type: EdgeAssertion, Predicate: pred,
				Confidence: conf, At: t0.Add(time.Duration(i) * time.Minute), Location: place, Decay: wave.DecayExp, HalfLife: time.Hour,
				Provenance: Provenance{EpisodeID: "ep-1", Agent: agent, ObservedAt: t0.Add(time.Duration(i) * time.Minute)}})
			if err == nil && pred == "doomed" {
				doomed = e.ID
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		observe(i, "ur5-alpha", fmt.Sprintf("near %d", i%4), "kitchen lab", 0.4)
	}
	checkFacts(t, s, "created")
	for i := range 12 {
		observe(i, "spot-1", fmt.Sprintf("near %d", i%4), "Kitchen Lab", 0.9) // several agents, more confident
	}
	observe(1, "ur5-alpha", "located_in", "", 0.8)
	observe(4, "ur5-alpha", "located_in", "", 0.8) // supersedes the first
	observe(2, "ur5-beta", "doomed", "warehouse", 0.7)
	checkFacts(t, s, "re-observed and superseded")
	if _, err := s.Update(ctx, func(b *Batch) error { return b.DeleteEdge(doomed) }); err != nil {
		t.Fatal(err)
	}
	checkFacts(t, s, "deleted")
	if _, err := s.MergeNodes(ctx, ids[0], ids[1], "test", "same thing"); err != nil {
		t.Fatal(err)
	}
	checkFacts(t, s, "merged")
	superseded := 0
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool {
			if f := r.EdgeFactsBySeq(e.Seq); f.Flags&FactSuperseded != 0 {
				superseded++
			}
			return true
		})
	})
	if superseded == 0 {
		t.Fatal("no superseded edge: the test does not exercise supersession")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkFacts(t, s, "reopened")
}

// TestFactTime checks which times the facts hold exactly.
func TestFactTime(t *testing.T) {
	for _, c := range []struct {
		t  time.Time
		ok bool
	}{
		{time.Time{}, true}, {time.Unix(0, 0), false}, {time.Unix(0, 1), true}, {time.Unix(-1, 0), true},
		{time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), false}, {time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), true},
	} {
		ns, ok := FactTime(c.t)
		if ok != c.ok || (ok && !c.t.IsZero() && ns != c.t.UnixNano()) || (c.t.IsZero() && ns != 0) {
			t.Errorf("FactTime(%v) = %d, %v; want ok %v", c.t, ns, ok, c.ok)
		}
	}
}
