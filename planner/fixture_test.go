package planner

import (
	"context"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
	"github.com/ctxgraph/ctxgraph/wave"
)

const testNS = particle.DefaultNamespace

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

// fixture is a store, its vector and keyword indexes and a planner, in
// memory, filled through the same particle and cms calls ingest uses.
type fixture struct {
	t     testing.TB
	store *particle.Store
	emb   embed.Embedder
	vec   *Indexer
	kw    *keyword.Index
	p     *Planner
	step  int
}

func newFixture(t testing.TB, withKeyword bool) *fixture {
	t.Helper()
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, store: s, emb: embed.NewHashing(384)}
	idx := wave.NewFlat(384)
	if f.vec, err = NewIndexer(s, idx, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.vec.Close)
	o := Options{Now: func() time.Time { return t0.Add(24 * time.Hour) }}
	if withKeyword {
		f.kw, err = keyword.Open(s, keyword.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.kw.Close() })
		o.Keyword = f.kw
	}
	f.p = New(s, idx, f.emb, nil, o)
	return f
}

func (f *fixture) embed(text string) []float32 {
	v, err := f.emb.Embed(context.Background(), text)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// write commits fn in one batch and waits for the vector index to take
// it in.
func (f *fixture) write(fn func(b *particle.Batch) error) {
	f.t.Helper()
	if _, err := f.store.Update(context.Background(), fn); err != nil {
		f.t.Fatal(err)
	}
	if err := f.vec.Sync(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// entity puts entity node id, named and embedded name, in b.
func (f *fixture) entity(b *particle.Batch, id, name string) error {
	return b.PutNode(&particle.Node{ID: id, Namespace: testNS, Type: particle.NodeEntity, Name: name, Embedding: f.embed(name)})
}

// fact records subject -pred-> object (entities) as an edge of type typ,
// observed at at by agent in episode ep-1.
func (f *fixture) fact(typ particle.EdgeType, subj, pred, obj, value string, at time.Time, conf float64, opts ...func(*particle.Observation)) *particle.Edge {
	f.t.Helper()
	f.step++
	step := f.step
	var out *particle.Edge
	_, err := f.store.Update(context.Background(), func(b *particle.Batch) error {
		resolve := func(name string) (*particle.Node, error) {
			n, created, err := b.Resolve(testNS, particle.NodeEntity, name)
			if err != nil {
				return nil, err
			}
			if created {
				n.Embedding = f.embed(n.Name)
			}
			return n, b.PutNode(n)
		}
		a, err := resolve(subj)
		if err != nil {
			return err
		}
		o, err := resolve(obj)
		if err != nil {
			return err
		}
		obs := particle.Observation{
			Namespace: testNS, Source: a.ID, Target: o.ID, Type: typ, Predicate: pred, Value: value, Confidence: conf,
			At: at, Provenance: particle.Provenance{EpisodeID: "ep-1", StepIndex: &step, Agent: "ur5-alpha", ObservedAt: at},
			Decay: wave.DecayExp, HalfLife: 24 * time.Hour, Reinforce: 0.5,
			Embed: func() ([]float32, error) { return f.embed(a.Name + " " + pred + " " + o.Name + " " + value), nil },
		}
		for _, o := range opts {
			o(&obs)
		}
		out, _, err = b.Observe(obs)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) configure(name string, card particle.Cardinality, status particle.PredicateStatus) {
	f.t.Helper()
	_, err := f.store.ConfigurePredicate(context.Background(), particle.Predicate{
		Name: name, Scope: testNS, Cardinality: card, Status: status,
	}, "operator:test", "fixture")
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) span(s *cms.Span) {
	f.t.Helper()
	a := &cms.Applier{Embedder: f.emb}
	if _, err := f.store.Update(context.Background(), func(b *particle.Batch) error {
		return a.Apply(context.Background(), b, s)
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) plan(req Request) *Answer {
	f.t.Helper()
	if err := f.vec.Sync(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	a, err := f.p.Plan(context.Background(), &req)
	if err != nil {
		f.t.Fatalf("plan %+v: %v", req, err)
	}
	return a
}

// lab is a small lab: a block that moved twice (located_in is single
// and active: each move supersedes), a contested colour (single but
// pending: a contradiction), a gripper that slips, a conveyor with a
// speed value, a CMS span naming a fixture's serial number, and a few
// unrelated facts.
func lab(t testing.TB, withKeyword bool) *fixture {
	f := newFixture(t, withKeyword)
	f.configure("located_in", particle.Single, particle.PredicateActive)
	f.configure("color", particle.Single, particle.PredicatePending)
	f.fact(particle.EdgeAssertion, "red block", "located_in", "blue bowl", "", t0, 0.9)
	f.fact(particle.EdgeAssertion, "red block", "located_in", "shelf", "", t0.Add(time.Hour), 0.8)
	f.fact(particle.EdgeAssertion, "red block", "located_in", "tray", "", t0.Add(2*time.Hour), 0.85)
	f.fact(particle.EdgeAssertion, "red block", "color", "red", "", t0, 0.7)
	f.fact(particle.EdgeAssertion, "red block", "color", "orange", "", t0.Add(time.Minute), 0.6)
	f.fact(particle.EdgeCausal, "gripper", "causes", "grip slippage", "", t0, 0.8)
	f.fact(particle.EdgeAssertion, "conveyor", "speed", "belt", "0.5 m/s", t0, 0.9)
	f.fact(particle.EdgeAssertion, "camera", "mounted_on", "wrist", "", t0, 0.9)
	f.fact(particle.EdgeAssertion, "table", "supports", "bowl rack", "", t0, 0.9)
	f.fact(particle.EdgeAssertion, "lamp", "lights", "workbench", "", t0, 0.9)
	f.fact(particle.EdgeAssertion, "safe", "combination", "vault door", "KX-3319-PIN", t0, 0.9, func(o *particle.Observation) {
		o.Policy = particle.Policy{DenyRoles: []string{"visitor"}}
	})
	f.span(&cms.Span{ID: "span-7", Level: 1, Start: t0, End: t0.Add(10 * time.Minute),
		Text:     "calibration fixture SN-4471-XQ drifted 2 mm after the night shift",
		Concepts: []string{"fixture drift"}, Entities: []string{"calibration fixture"}, UpdateSize: 0.5})
	return f
}

func nodeNames(a *Answer) map[string]bool {
	out := map[string]bool{}
	for _, n := range a.Nodes {
		out[n.Name] = true
	}
	return out
}
