package planner

import (
	"fmt"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestFanoutToBudgetSelfLoops gives a hub self-loops, which its walk
// meets twice (out and in) and keeps once, so that a capped fanout's
// first candidates can leave the budget room and the step goes on past
// them: the answers must still be those without the cap.
func TestFanoutToBudgetSelfLoops(t *testing.T) {
	defer func(on bool) { fanoutToBudget = on }(fanoutToBudget)
	resumed := keepBestResumed.Load()
	answer := func(f *fixture, req Request, capped bool) string {
		fanoutToBudget = capped
		return answerKey(f.plan(req))
	}
	for _, loops := range []int{1, 3} {
		f := newFixture(t, false)
		for i := range loops {
			f.fact(particle.EdgeAssertion, "hub", fmt.Sprintf("loops_%d", i), "hub", "", t0, 0.95)
		}
		for i := range 12 {
			part := fmt.Sprintf("part %d", i)
			f.fact(particle.EdgeAssertion, "hub", "holds", part, "", t0, 0.5+0.04*float64(i))
			f.fact(particle.EdgeAssertion, part, "near", fmt.Sprintf("bin %d", i%4), "", t0, 0.8)
		}
		for _, hops := range []int{1, 2} {
			for budget := 1; budget <= 40; budget++ {
				req := Request{Query: "hub", K: 3, Hops: hops, Budget: budget}
				want := answer(f, req, false)
				if got := answer(f, req, true); got != want {
					t.Fatalf("%d self-loops, %d hops, budget %d: capped %s\nuncapped %s", loops, hops, budget, got, want)
				}
			}
		}
	}
	if keepBestResumed.Load() == resumed {
		t.Fatal("no expansion step went on past its capped fanout: the case is not tried")
	}
}

// answerKey is what of an answer the fanout's cap must not change: its
// nodes and edges in order, with their scores (and the nodes' hops),
// and its truncation.
func answerKey(a *Answer) string {
	out := fmt.Sprint(a.Truncated)
	for _, n := range a.Nodes {
		out += fmt.Sprintf(" n:%s:%.12g:%d", n.ID, n.Score, n.Hop)
	}
	for _, e := range a.Edges {
		out += fmt.Sprintf(" e:%s:%.12g", e.ID, e.Score)
	}
	return out
}
