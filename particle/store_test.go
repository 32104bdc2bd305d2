package particle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

func openStore(t testing.TB, dir string) *particle.Store {
	t.Helper()
	o := particle.DefaultOptions(dir)
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  Red   Block ", "red block"},
		{"red\tblock\n", "red block"},
		{"ÉCLAIR", "éclair"},
		{"", ""},
	} {
		if got := particle.Canonical(tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if particle.EntityID("default/default", particle.NodeEntity, "Red  Block") != particle.EntityID("default/default", particle.NodeEntity, "red block") {
		t.Error("entity ids of the same canonical name differ")
	}
	if particle.EntityID("a/b", particle.NodeEntity, "red block") == particle.EntityID("default/default", particle.NodeEntity, "red block") {
		t.Error("entity ids must differ across namespaces")
	}
}

// observe records one sighting of src -pred-> dst of type t at step.
func observe(t *testing.T, s *particle.Store, typ particle.EdgeType, src, pred, dst string, step int, at time.Time) {
	t.Helper()
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		_, err := sight(b, src, dst, particle.Observation{Type: typ, Predicate: pred, At: at,
			Provenance: particle.Provenance{EpisodeID: "ep", StepIndex: &step}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sight resolves and puts the entities named src and dst in batch b and
// observes o between them (its source and target set to theirs, its
// salience decaying exponentially with an hour's half-life, reinforced
// by 0.2), and returns the edge.
func sight(b *particle.Batch, src, dst string, o particle.Observation) (*particle.Edge, error) {
	a, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, src)
	if err != nil {
		return nil, err
	}
	c, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, dst)
	if err != nil {
		return nil, err
	}
	if err := b.PutNode(a); err != nil {
		return nil, err
	}
	if err := b.PutNode(c); err != nil {
		return nil, err
	}
	o.Source, o.Target = a.ID, c.ID
	o.Decay, o.HalfLife, o.Reinforce = wave.DecayExp, time.Hour, 0.2
	e, _, err := b.Observe(o)
	return e, err
}

func TestObserveReinforcesInsteadOfDuplicating(t *testing.T) {
	for _, typ := range []particle.EdgeType{particle.EdgeToolUse, particle.EdgeAssertion, particle.EdgeCausal} {
		t.Run(string(typ), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := 0; i < 5; i++ {
				observe(t, s, typ, "Gripper", "acts_on", "red block", i, t0.Add(time.Duration(i)*time.Second))
			}
			var edges []*particle.Edge
			s.Read(func(r particle.Reader) {
				r.Edges(func(e *particle.Edge) bool { edges = append(edges, e); return true })
			})
			if len(edges) != 1 {
				t.Fatalf("%d edges after 5 sightings, want 1", len(edges))
			}
			e := edges[0]
			if e.Evidence != 5 || len(e.Provenance) != 5 || *e.Provenance[4].StepIndex != 4 {
				t.Errorf("evidence %d provenance %d, want 5 and 5 ending at step 4", e.Evidence, len(e.Provenance))
			}
			if e.Salience.Score <= 0.2 || e.Salience.Score > 1 {
				t.Errorf("salience %v: five sightings should reinforce above one (0.2)", e.Salience.Score)
			}
			if !e.Scope.TimeRange.From.Equal(t0) || !e.Scope.TimeRange.To.Equal(t0.Add(4*time.Second)) {
				t.Errorf("time range %+v, want the five sightings' span", e.Scope.TimeRange)
			}
			// A different predicate of an assertion is another fact;
			// for other types the label does not split the edge.
			observe(t, s, typ, "gripper", "touches", "RED BLOCK", 5, t0.Add(5*time.Second))
			n := 0
			s.Read(func(r particle.Reader) { r.Edges(func(*particle.Edge) bool { n++; return true }) })
			want := 1
			if typ == particle.EdgeAssertion {
				want = 2
			}
			if n != want {
				t.Errorf("%d edges, want %d", n, want)
			}
			// Reopen: the same graph, and reinforcement continues on the
			// same edge (the identity index is rebuilt).
			s.Close()
			s2 := openStore(t, dir)
			observe(t, s2, typ, "gripper", "acts_on", "red block", 6, t0.Add(6*time.Second))
			m := 0
			s2.Read(func(r particle.Reader) { r.Edges(func(*particle.Edge) bool { m++; return true }) })
			if m != want {
				t.Errorf("after reopen %d edges, want %d", m, want)
			}
			if got := s2.Counts().Nodes[particle.NodeEntity]; got != 2 {
				t.Errorf("entity count %d, want 2", got)
			}
		})
	}
}

func TestUpdateIsAllOrNothing(t *testing.T) {
	s := openStore(t, t.TempDir())
	boom := errors.New("boom")
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		if _, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeTool, "wrench"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if n := s.Counts().Nodes[particle.NodeTool]; n != 0 {
		t.Errorf("a failed batch left %d nodes", n)
	}
	var found bool
	s.Read(func(r particle.Reader) {
		found = r.Lookup(particle.DefaultNamespace, particle.NodeTool, "wrench") != nil
	})
	if found {
		t.Error("a failed batch is visible in the view")
	}
}

func TestEdgeVisible(t *testing.T) {
	s := openStore(t, t.TempDir())
	e := &particle.Edge{Policy: particle.Policy{AllowRoles: []string{"operator", "planner"}, DenyRoles: []string{"visitor"}}}
	for _, tc := range []struct {
		roles []string
		want  bool
	}{
		{[]string{"operator"}, true},
		{[]string{"visitor"}, false},
		{[]string{"visitor", "operator"}, false}, // deny beats allow
		{[]string{"guest"}, false},               // not in a non-empty allow list
		{nil, false},
	} {
		if got := s.EdgeVisible(e, particle.Principal{Roles: tc.roles}); got != tc.want {
			t.Errorf("roles %v: visible %v, want %v", tc.roles, got, tc.want)
		}
	}
	aud := &particle.Edge{Scope: particle.Scope{Audience: []string{"ur5-alpha", "lab-staff"}}}
	if !s.EdgeVisible(aud, particle.Principal{Agent: "ur5-alpha"}) || !s.EdgeVisible(aud, particle.Principal{Roles: []string{"lab-staff"}}) {
		t.Error("audience members must see the edge")
	}
	if s.EdgeVisible(aud, particle.Principal{Roles: []string{"visitor"}}) {
		t.Error("outside the audience must not see the edge")
	}
}

func TestDeleteNodeRemovesItsEdgesEverywhere(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	observe(t, s, particle.EdgeAssertion, "mug", "located_on", "table", 0, t0)
	observe(t, s, particle.EdgeAssertion, "table", "in", "kitchen", 1, t0)
	var removed particle.Changes
	s.Subscribe(func(ch particle.Changes) { removed = ch })
	var mugID string
	s.Read(func(r particle.Reader) { mugID = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "mug").ID })
	if _, err := s.Update(context.Background(), func(b *particle.Batch) error { return b.DeleteNode(mugID) }); err != nil {
		t.Fatal(err)
	}
	if len(removed.RemovedNodes) != 1 || len(removed.RemovedEdges) != 1 {
		t.Fatalf("changes removed %d nodes %d edges, want 1 and 1", len(removed.RemovedNodes), len(removed.RemovedEdges))
	}
	check := func(s *particle.Store) {
		t.Helper()
		s.Read(func(r particle.Reader) {
			if r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "mug") != nil || r.Node(mugID) != nil {
				t.Error("deleted node still resolvable")
			}
			n := 0
			r.Edges(func(*particle.Edge) bool { n++; return true })
			if n != 1 {
				t.Errorf("%d edges, want 1 (table in kitchen)", n)
			}
			tbl := r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "table")
			deg := 0
			r.In(tbl.ID, func(*particle.Edge) bool { deg++; return true })
			if deg != 0 {
				t.Errorf("table still has %d incoming edges", deg)
			}
		})
		c := s.Counts()
		if c.Nodes[particle.NodeEntity] != 2 || c.Edges[particle.EdgeAssertion] != 1 {
			t.Errorf("counts %+v", c)
		}
	}
	check(s)
	s.Close()
	s2 := openStore(t, dir)
	check(s2)
	// Nothing on disk names the deleted edge: the reopened view, derived
	// from Badger alone, agrees with it.
	if r, err := s2.Check(context.Background()); err != nil || !r.OK() {
		t.Fatalf("check after reopen: %v %+v", err, r)
	}
	// Re-observing the mug creates it afresh.
	observe(t, s2, particle.EdgeAssertion, "mug", "located_on", "table", 2, t0)
}

func TestBeliefFollowsTheEvidence(t *testing.T) {
	var b particle.Belief
	b.Score = 0.5
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 50; i++ {
		b.Observe(0.9, at.Add(time.Duration(i)*time.Second))
	}
	if b.Score < 0.85 || b.Score > 0.9 || b.Evidence != 50 {
		t.Errorf("after 50 sightings at 0.9: score %v evidence %v", b.Score, b.Evidence)
	}
	weak := particle.Belief{Score: 0.5}
	weak.Observe(0.1, at)
	if weak.Score >= 0.5 {
		t.Errorf("a low-confidence sighting should lower belief: %v", weak.Score)
	}
	merged := b
	merged.Merge(weak)
	if merged.Score >= b.Score || merged.Evidence != 51 {
		t.Errorf("merge: score %v (from %v) evidence %v", merged.Score, b.Score, merged.Evidence)
	}
}
