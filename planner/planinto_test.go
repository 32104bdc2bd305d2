package planner

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/particle"
)

// An answer planned over a reused one, whatever that one held before, is
// the answer Plan gives; and Reset leaves nothing of the graph in it.
func TestPlanIntoAReusedAnswerIsPlansAnswer(t *testing.T) {
	f := newFixture(t, false)
	recordsGraph(t, f, 7)
	if err := f.vec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := []Request{
		{Query: "thing 3", K: 10, Hops: 2, Budget: 256},
		{Query: "thing 5", K: 2, Hops: 1, Budget: 8},
		{Query: "thing 1 fact", K: 5, Hops: 1, Budget: 64, Roles: []string{"visitor"}},
		{Query: "thing 8", K: 1, Hops: 1, Budget: 2},
	}
	reused := new(Answer)
	for round := range 2 {
		for i, req := range reqs {
			want := f.plan(reqs[i])
			if err := f.p.PlanInto(context.Background(), &req, reused); err != nil {
				t.Fatal(err)
			}
			if len(want.Edges) == 0 || len(want.Nodes) == 0 {
				t.Fatalf("request %d: an answer of %d nodes and %d edges tests nothing", i, len(want.Nodes), len(want.Edges))
			}
			want.Timings, reused.Timings = Timings{}, Timings{}
			if d := answerDiff(want, reused); d != "" {
				t.Errorf("round %d, request %d: planned into a reused answer, %s", round, i, d)
			}
			if round == 1 {
				reused.Reset()
				for _, n := range reused.Nodes[:cap(reused.Nodes)] {
					if !reflect.ValueOf(n).IsZero() {
						t.Fatalf("after Reset a node remains: %+v", n)
					}
				}
				for _, e := range reused.Edges[:cap(reused.Edges)] {
					if !reflect.ValueOf(e).IsZero() {
						t.Fatalf("after Reset an edge remains: %+v", e)
					}
				}
				if reused.ContextState != nil || len(reused.Nodes) != 0 || len(reused.Edges) != 0 {
					t.Fatalf("after Reset: %+v", reused)
				}
			}
		}
	}
}

// answerDiff names the first field in which got differs from want.
func answerDiff(want, got *Answer) string {
	w, g := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := range w.NumField() {
		if !w.Type().Field(i).IsExported() {
			continue // storage a reused answer keeps
		}
		if !reflect.DeepEqual(w.Field(i).Interface(), g.Field(i).Interface()) {
			return fmt.Sprintf("%s differs:\n%.600v\nwant\n%.600v", w.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
	return ""
}

// An edge's ends in an answer are its nodes' ids themselves when the
// answer has those nodes (the same bytes), so the encoders read each id
// once, at its node, not again in every edge's copy.
func TestAnswerEdgeEndsShareTheirNodesIDs(t *testing.T) {
	f := newFixture(t, false)
	// Each edge names its ends in copies of the ids, as an edge read
	// back from the store does.
	f.write(func(b *particle.Batch) error {
		for i := range 6 {
			if err := f.entity(b, fmt.Sprintf("node-%d", i), fmt.Sprintf("thing %d", i)); err != nil {
				return err
			}
		}
		for i := range 12 {
			e := &particle.Edge{Namespace: testNS, Source: fmt.Sprintf("node-%d", i%6), Target: fmt.Sprintf("node-%d", (i*5+1)%6),
				Type: particle.EdgeAssertion, Assertion: &particle.Assertion{Predicate: fmt.Sprintf("p%d", i)}, Confidence: 0.9}
			e.Embedding = f.embed(fmt.Sprintf("thing %d fact", i%6))
			if err := b.PutEdge(e); err != nil {
				return err
			}
		}
		return nil
	})
	ans := f.plan(Request{Query: "thing 3", K: 10, Hops: 2, Budget: 256})
	ids := map[string]*byte{}
	for _, n := range ans.Nodes {
		ids[n.ID] = unsafe.StringData(n.ID)
	}
	var ends int
	for _, e := range ans.Edges {
		for _, end := range []string{e.Source, e.Target} {
			if p, ok := ids[end]; ok {
				ends++
				if unsafe.StringData(end) != p {
					t.Errorf("edge %s: its end %s is a copy of its node's id", e.ID, end)
				}
			}
		}
	}
	if ends == 0 {
		t.Fatalf("no edge of %d has an end among %d nodes: nothing tested", len(ans.Edges), len(ans.Nodes))
	}
}

// The expansion reaches a node by the seq its edge's adjacency entry
// holds, else by its id: an edge written before the node at its end
// existed holds no seq for it, and must still lead there.
func TestExpansionReachesNodesWrittenAfterTheirEdges(t *testing.T) {
	f := newFixture(t, false)
	f.write(func(b *particle.Batch) error {
		if err := f.entity(b, "hub", "loading dock"); err != nil {
			return err
		}
		for i := range 3 {
			late := fmt.Sprintf("late-%d", i)
			for _, ends := range [][2]string{{"hub", late}, {late, "hub"}} {
				e := &particle.Edge{Namespace: testNS, Source: ends[0], Target: ends[1], Type: particle.EdgeAssertion,
					Assertion: &particle.Assertion{Predicate: fmt.Sprintf("p-%s-%s", ends[0], ends[1])}, Confidence: 0.9}
				e.Embedding = f.embed("loading dock pallet")
				if err := b.PutEdge(e); err != nil {
					return err
				}
			}
		}
		return nil
	})
	f.write(func(b *particle.Batch) error {
		for i := range 3 {
			if err := f.entity(b, fmt.Sprintf("late-%d", i), fmt.Sprintf("pallet %d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	ans := f.plan(Request{Query: "loading dock", K: 1, Hops: 1, Budget: 256})
	reached := map[string]bool{}
	for _, n := range ans.Nodes {
		reached[n.ID] = true
	}
	edges := map[[2]string]bool{}
	for _, e := range ans.Edges {
		edges[[2]string{e.Source, e.Target}] = true
	}
	for i := range 3 {
		late := fmt.Sprintf("late-%d", i)
		if !reached[late] || !edges[[2]string{"hub", late}] || !edges[[2]string{late, "hub"}] {
			t.Errorf("%s: reached %v, edges from and to the hub %v %v; want the node and both edges (nodes %v)",
				late, reached[late], edges[[2]string{"hub", late}], edges[[2]string{late, "hub"}], reached)
		}
	}
}

// A reused answer holds its context state and its copy of the query
// vector in storage of its own: planning into it again, without a
// session, allocates neither (an allocation while the collector marks
// pays for marking; beside ingest that was 1-2 ms at the p99).
func TestPlanIntoReusesTheContextState(t *testing.T) {
	f := newFixture(t, false)
	recordsGraph(t, f, 7)
	if err := f.vec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	vec := make([]float32, f.p.index.Dim())
	for i := range vec {
		vec[i] = float32(i%7) - 3
	}
	reused := new(Answer)
	var cs *ContextState
	var state, query *float32
	for round := range 3 {
		req := Request{Vector: vec, K: 5, Hops: 1, Budget: 64}
		reused.Reset()
		if err := f.p.PlanInto(context.Background(), &req, reused); err != nil {
			t.Fatal(err)
		}
		want := f.plan(req).ContextState
		if !reflect.DeepEqual(reused.ContextState, want) {
			t.Fatalf("round %d: context state %+v, Plan gives %+v", round, reused.ContextState, want)
		}
		if round > 0 && (reused.ContextState != cs || &reused.ContextState.Vector[0] != state || &reused.keep.query[0] != query) {
			t.Fatalf("round %d: the context state or the query vector is in new storage", round)
		}
		cs, state, query = reused.ContextState, &reused.ContextState.Vector[0], &reused.keep.query[0]
	}
}
