package planner_test

import (
	"context"
	"testing"

	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/wave"
)

// TestFanoutToBudgetChangesNoAnswer plans the fleet graph's queries at
// 1 and 2 hops under budgets that fill at the first node, midway and
// not at all, with each node's fanout capped at the budget's room left
// and without the cap: the answers must be the same, nodes and edges in
// order with their scores, and so must their truncation.
func TestFanoutToBudgetChangesNoAnswer(t *testing.T) {
	g := fleetBench(t)
	idx := wave.NewFlat(fleetDims)
	g.index(t, idx)
	p := planner.New(g.store, idx, g.emb, nil, planner.Options{})
	defer planner.SetFanoutToBudget(planner.SetFanoutToBudget(true))
	plan := func(req planner.Request, capped bool) (string, int) {
		planner.SetFanoutToBudget(capped)
		ans, err := p.Plan(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		return planner.AnswerKey(ans), len(ans.Nodes) + len(ans.Edges)
	}
	filled, resumed := 0, planner.KeepBestResumed()
	for qi, q := range g.queries {
		for _, hops := range []int{1, 2} {
			for _, budget := range []int{7, 40, 256, 4096} {
				req := planner.Request{Vector: q, K: 10, Hops: hops, Budget: budget, Roles: []string{"planner"}}
				want, n := plan(req, false)
				got, _ := plan(req, true)
				if got != want {
					t.Fatalf("query %d, %d hops, budget %d: capped %s\nuncapped %s", qi, hops, budget, got, want)
				}
				if n >= budget {
					filled++
				}
			}
		}
	}
	if filled == 0 {
		t.Fatal("no budget filled: the cap was never tried")
	}
	t.Logf("%d of %d answers filled their budget; %d expansion steps went on past a capped fanout", filled, len(g.queries)*8, planner.KeepBestResumed()-resumed)
}
