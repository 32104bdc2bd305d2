package particle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// assert states subject -pred-> object at time at, from an episode step.
func assert(t *testing.T, s *particle.Store, subject, pred, object string, step int, at time.Time, conf float64) *particle.Edge {
	t.Helper()
	var out *particle.Edge
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		var err error
		out, err = fact(b, subject, pred, object, &step, at, conf)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fact states subject -pred-> object in batch b at time at, from the
// episode step step (nil: none), with confidence conf.
func fact(b *particle.Batch, subject, pred, object string, step *int, at time.Time, conf float64) (*particle.Edge, error) {
	return sight(b, subject, object, particle.Observation{Type: particle.EdgeAssertion, Predicate: pred, At: at, Confidence: conf,
		Provenance: particle.Provenance{EpisodeID: "ep-facts", StepIndex: step, ObservedAt: at}})
}

func edgeByID(t *testing.T, s *particle.Store, id string) *particle.Edge {
	t.Helper()
	e, err := s.Edge(id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func configure(t *testing.T, s *particle.Store, name string, card particle.Cardinality, status particle.PredicateStatus, aliases ...string) {
	t.Helper()
	_, err := s.ConfigurePredicate(context.Background(), particle.Predicate{
		Name: name, Scope: particle.DefaultNamespace, Cardinality: card, Status: status, Aliases: aliases,
	}, "operator:ana", "test")
	if err != nil {
		t.Fatal(err)
	}
}

func TestUnknownPredicateRegistersPendingMulti(t *testing.T) {
	s := openStore(t, t.TempDir())
	assert(t, s, "mug", "Located  ON", "table", 0, t0, 0.9)
	var p *particle.Predicate
	s.Read(func(r particle.Reader) { p = r.Predicate(particle.DefaultNamespace, "located on") })
	if p == nil || p.Status != particle.PredicatePending || p.Cardinality != particle.Multi || p.Scope != particle.DefaultNamespace {
		t.Fatalf("registered predicate = %+v, want pending/multi in default/default", p)
	}
	// Multi: a second object is another fact, nothing superseded.
	a := assert(t, s, "mug", "located on", "shelf", 1, t0.Add(time.Minute), 0.9)
	if a.Status != particle.StatusActive {
		t.Errorf("multi-cardinality fact status %s, want active", a.Status)
	}
}

func TestScopePrecedence(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := context.Background()
	for _, p := range []particle.Predicate{
		{Name: "holds", Scope: "", Cardinality: particle.Multi, Status: particle.PredicateActive},
		{Name: "holds", Scope: "default", Cardinality: particle.Single, Status: particle.PredicatePending},
		{Name: "holds", Scope: "default/default", Cardinality: particle.Single, Status: particle.PredicateActive},
	} {
		if _, err := s.ConfigurePredicate(ctx, p, "op", "scopes"); err != nil {
			t.Fatal(err)
		}
	}
	s.Read(func(r particle.Reader) {
		if p := r.Predicate("default/default", "holds"); p.Scope != "default/default" || p.Status != particle.PredicateActive {
			t.Errorf("tenant:project scope should win: %+v", p)
		}
		if p := r.Predicate("acme/default", "holds"); p.Scope != "default" {
			t.Errorf("project scope should apply to another tenant's same project: %+v", p)
		}
		if p := r.Predicate("acme/robots", "holds"); p.Scope != "" {
			t.Errorf("global scope should apply elsewhere: %+v", p)
		}
	})
}

func TestSingleActivePredicateSupersedes(t *testing.T) {
	s := openStore(t, t.TempDir())
	configure(t, s, "located_in", particle.Single, particle.PredicateActive, "is in")
	first := assert(t, s, "red block", "located_in", "bin a", 0, t0, 0.9)
	second := assert(t, s, "red block", "is in", "bin b", 1, t0.Add(time.Hour), 0.8) // alias resolves
	third := assert(t, s, "red block", "located_in", "bin c", 2, t0.Add(2*time.Hour), 0.7)

	f1, f2, f3 := edgeByID(t, s, first.ID), edgeByID(t, s, second.ID), edgeByID(t, s, third.ID)
	if f1.Status != particle.StatusSuperseded || !f1.ValidTo.Equal(f2.ValidFrom) || f1.SupersededBy != f2.ID {
		t.Errorf("first fact: status %s valid_to %v superseded_by %s", f1.Status, f1.ValidTo, f1.SupersededBy)
	}
	if f2.Status != particle.StatusSuperseded || !f2.ValidTo.Equal(f3.ValidFrom) {
		t.Errorf("second fact: status %s valid_to %v", f2.Status, f2.ValidTo)
	}
	if f3.Status != particle.StatusActive || !f3.ValidTo.IsZero() {
		t.Errorf("third fact should be the one open fact: %s %v", f3.Status, f3.ValidTo)
	}
	if f2.Assertion.Predicate != "located_in" {
		t.Errorf("alias not resolved: predicate %q", f2.Assertion.Predicate)
	}
	recs, err := s.Supersessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Old != f1.ID || recs[0].New != f2.ID || recs[0].Provenance.StepIndex == nil || *recs[0].Provenance.StepIndex != 1 {
		t.Fatalf("supersession records = %+v", recs)
	}
	// Re-ingesting the open fact appends evidence, no duplicate.
	again := assert(t, s, "red block", "located_in", "bin c", 3, t0.Add(3*time.Hour), 0.9)
	if again.ID != f3.ID || again.Evidence != 2 || len(again.Provenance) != 2 {
		t.Errorf("re-ingest: id %s evidence %d, want %s and 2", again.ID, again.Evidence, f3.ID)
	}
	// Late evidence of an earlier fact becomes history, not the open fact.
	late := assert(t, s, "red block", "located_in", "bin z", 9, t0.Add(30*time.Minute), 0.6)
	if late.Status != particle.StatusSuperseded || !late.ValidTo.Equal(f3.ValidFrom) {
		t.Errorf("late fact: %s valid_to %v, want superseded at %v", late.Status, late.ValidTo, f3.ValidFrom)
	}
	if f3 = edgeByID(t, s, third.ID); f3.Status != particle.StatusActive {
		t.Errorf("late evidence must not end the open fact: %s", f3.Status)
	}
}

// observeIn is fact with no step, at confidence 0.9.
func observeIn(b *particle.Batch, subject, pred, object string, at time.Time) (*particle.Edge, error) {
	return fact(b, subject, pred, object, nil, at, 0.9)
}

// TestFactsOfOneBatchSettleAmongThemselves: facts created in the same
// batch supersede one another as facts of separate batches do, among
// the many other edges the batch creates, and a fact deleted in the
// batch is not one of them.
func TestFactsOfOneBatchSettleAmongThemselves(t *testing.T) {
	s := openStore(t, t.TempDir())
	configure(t, s, "located_in", particle.Single, particle.PredicateActive)
	var first, gone, last, other *particle.Edge
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		var err error
		for i := range 50 { // other subjects' facts and plain edges, created first
			if _, err = observeIn(b, fmt.Sprintf("cup %d", i), "located_in", "shelf", t0); err != nil {
				return err
			}
			if _, err = observeIn(b, "red block", fmt.Sprintf("near %d", i), "thing", t0); err != nil {
				return err
			}
		}
		if gone, err = observeIn(b, "red block", "located_in", "bin x", t0.Add(-time.Hour)); err != nil {
			return err
		}
		if err = b.DeleteEdge(gone.ID); err != nil {
			return err
		}
		if first, err = observeIn(b, "red block", "located_in", "bin a", t0); err != nil {
			return err
		}
		if last, err = observeIn(b, "red block", "located_in", "bin b", t0.Add(time.Hour)); err != nil {
			return err
		}
		other, err = observeIn(b, "cup 7", "located_in", "bin c", t0.Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f1, f2 := edgeByID(t, s, first.ID), edgeByID(t, s, last.ID)
	if f2.Status != particle.StatusActive || f1.Status != particle.StatusSuperseded || f1.SupersededBy != f2.ID {
		t.Errorf("red block: first %s superseded by %q, last %s; want the first superseded by the last", f1.Status, f1.SupersededBy, f2.Status)
	}
	if e, err := s.Edge(gone.ID); err == nil && e != nil {
		t.Errorf("the fact deleted in the batch was stored: %+v", e)
	}
	recs, err := s.Supersessions()
	if err != nil {
		t.Fatal(err)
	}
	news := map[string]bool{}
	for _, r := range recs {
		news[r.New] = true
		if r.New == gone.ID || r.Old == gone.ID {
			t.Errorf("a supersession names the fact deleted in the batch: %+v", r)
		}
	}
	if !news[last.ID] || !news[other.ID] || len(recs) != 2 {
		t.Errorf("supersessions %+v, want the red block's and cup 7's", recs)
	}
}

func TestConflictWithoutSupersessionIsAContradiction(t *testing.T) {
	s := openStore(t, t.TempDir())
	configure(t, s, "color", particle.Single, particle.PredicatePending)
	a := assert(t, s, "cube", "color", "red", 0, t0, 0.9)
	b := assert(t, s, "cube", "color", "green", 1, t0.Add(time.Minute), 0.4)
	ea, eb := edgeByID(t, s, a.ID), edgeByID(t, s, b.ID)
	if ea.Status != particle.StatusContradicted || eb.Status != particle.StatusContradicted {
		t.Fatalf("statuses %s %s, want both contradicted", ea.Status, eb.Status)
	}
	if len(ea.Contradicts) != 1 || ea.Contradicts[0] != eb.ID || !ea.ValidTo.IsZero() || !eb.ValidTo.IsZero() {
		t.Errorf("both facts must be kept open and point at each other: %+v %+v", ea.Contradicts, eb.Contradicts)
	}
	recs, err := s.Contradictions()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ConfidenceA != ea.Confidence || recs[0].ConfidenceB != eb.Confidence || len(recs[0].Provenance) != 2 {
		t.Errorf("contradiction record = %+v", recs)
	}
}

func TestAliasResolutionAndMerge(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := context.Background()
	assert(t, s, "coffee mug", "located_on", "table", 0, t0, 0.9)
	assert(t, s, "Mug #2", "located_on", "table", 1, t0.Add(time.Minute), 0.7)
	assert(t, s, "mug #2", "color", "blue", 2, t0.Add(2*time.Minute), 0.7)
	var mug, mug2, table *particle.Node
	s.Read(func(r particle.Reader) {
		mug = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "Coffee  Mug")
		mug2 = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "mug #2")
		table = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "table")
	})
	if mug == nil || mug2 == nil {
		t.Fatal("lookup by canonical name failed")
	}
	if _, err := s.AddAlias(ctx, mug.ID, "my cup"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddAlias(ctx, mug2.ID, "my cup"); err == nil {
		t.Error("an alias naming another node must be refused")
	}
	rec, err := s.MergeNodes(ctx, mug.ID, mug2.ID, "operator:ana", "same physical mug")
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *particle.Store) {
		t.Helper()
		s.Read(func(r particle.Reader) {
			for _, name := range []string{"my cup", "mug #2", "COFFEE MUG"} {
				if n := r.Lookup(particle.DefaultNamespace, particle.NodeEntity, name); n == nil || n.ID != mug.ID {
					t.Errorf("%q does not resolve to the survivor", name)
				}
			}
			if r.Resolve(mug2.ID) != mug.ID || r.Node(mug2.ID) != nil {
				t.Error("merged id must redirect to the survivor and be gone itself")
			}
			var on []*particle.Edge
			r.Out(mug.ID, func(e *particle.Edge) bool { on = append(on, e); return true })
			if len(on) != 2 {
				t.Fatalf("survivor has %d edges, want 2 (located_on folded, color moved)", len(on))
			}
			for _, e := range on {
				if e.Target == table.ID && (e.Evidence != 2 || len(e.Provenance) != 2) {
					t.Errorf("folded edge evidence %d provenance %d, want 2 and 2", e.Evidence, len(e.Provenance))
				}
			}
		})
	}
	check(s)
	if rec.Who != "operator:ana" || rec.Why == "" || len(rec.Edges) != 2 {
		t.Errorf("merge record = %+v", rec)
	}
	s.Close()
	s2 := openStore(t, dir)
	check(s2)
	if n, err := s2.ResolveNode(mug2.ID); err != nil || n.ID != mug.ID {
		t.Errorf("ResolveNode(merged) = %v, %v", n, err)
	}
	merges, err := s2.Merges()
	if err != nil || len(merges) != 1 || merges[0].Merged != mug2.ID {
		t.Errorf("merges = %+v, %v", merges, err)
	}
}

// BenchmarkSettleBesideNewEdges times a new single-cardinality fact's
// settle in a batch that has created others=N plain edges first (as a
// bulk pull does): openFacts looks at its subject's new edges, so a
// fact's cost does not grow with the batch. hub=4000: facts about a
// subject that has 4,000 stored edges, of which openFacts reads only
// the open assertions of the fact's predicate.
//
//	go test ./particle -run '^$' -bench SettleBesideNewEdges
func BenchmarkSettleBesideNewEdges(b *testing.B) {
	for _, c := range []struct {
		name           string
		stored, others int // the hub's edges stored first; plain edges each batch creates before its facts
		facts          int
		subject        func(i int) string
	}{
		{"others=0", 0, 0, 200, func(i int) string { return fmt.Sprintf("cup %d", i) }},
		{"others=4000", 0, 4000, 200, func(i int) string { return fmt.Sprintf("cup %d", i) }},
		{"hub=4000", 4000, 0, 20, func(int) string { return "hub robot" }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := openStore(b, b.TempDir())
			if _, err := s.ConfigurePredicate(context.Background(), particle.Predicate{
				Name: "located_in", Scope: particle.DefaultNamespace, Cardinality: particle.Single, Status: particle.PredicateActive,
			}, "operator:ana", "bench"); err != nil {
				b.Fatal(err)
			}
			// plain creates n new edges subject(i) -saw-> thing i of round.
			plain := func(bt *particle.Batch, n, round int, subject func(int) string) error {
				for i := range n {
					if _, err := observeIn(bt, subject(i), "saw", fmt.Sprintf("thing %d of %d", i, round), t0); err != nil {
						return err
					}
				}
				return nil
			}
			if _, err := s.Update(context.Background(), func(bt *particle.Batch) error {
				return plain(bt, c.stored, -1, func(int) string { return "hub robot" })
			}); err != nil {
				b.Fatal(err)
			}
			var settle time.Duration
			batches := 0
			for b.Loop() {
				_, err := s.Update(context.Background(), func(bt *particle.Batch) error {
					if err := plain(bt, c.others, batches, func(i int) string { return fmt.Sprintf("robot %d", i%50) }); err != nil {
						return err
					}
					t := time.Now()
					for i := range c.facts {
						n := batches*c.facts + i
						if _, err := observeIn(bt, c.subject(i), "located_in", fmt.Sprintf("bin %d", n), t0.Add(time.Duration(n)*time.Minute)); err != nil {
							return err
						}
					}
					settle += time.Since(t)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				batches++
			}
			b.ReportMetric(float64(settle.Microseconds())/float64(batches*c.facts), "µs/fact")
		})
	}
}
