package planner

import (
	"context"
	"testing"

	"github.com/ctxgraph/ctxgraph/wave"
)

// TestAnswerCarriesTheSearchesWork: an answer planned over an IVF says
// what its prefilter's search did (lists scanned, items scored, the
// predicate asked), one answer's worth, not what an earlier answer
// planned into the same value did; over the exact index it is zero.
func TestAnswerCarriesTheSearchesWork(t *testing.T) {
	f := lab(t, false)
	ivf := wave.NewIVF(384, wave.IVFOptions{Seed: 1})
	ix, err := NewIndexer(f.store, ivf, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := New(f.store, ivf, f.emb, nil, Options{Now: f.p.opts.Now})
	req := Request{Query: "red block", K: 5, Roles: []string{"planner"}, Strategy: StrategySemantic}
	var ans Answer
	for i := range 2 {
		ans.Reset()
		if err := p.PlanInto(context.Background(), &req, &ans); err != nil {
			t.Fatal(err)
		}
		s := ans.Search
		// Untrained, the IVF is one list holding every vector.
		if s.Lists != 1 || s.Scored != ivf.Len() || s.Asked == 0 || s.Asked > s.Scored {
			t.Fatalf("call %d: search work %+v over an untrained IVF of %d vectors", i, s, ivf.Len())
		}
	}
	if a := f.plan(req); a.Search != (wave.SearchStats{}) {
		t.Fatalf("over the exact index the answer says %+v", a.Search)
	}
}
