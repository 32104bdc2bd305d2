package planner

import (
	"slices"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestContradictionsPairsContradictedEdgesOfOneSubjectAndPredicate: each
// pair of contradicted edges with the same source and predicate is a
// contradiction, in the edges' order; edges of other statuses, sources
// or predicates pair with none.
func TestContradictionsPairsContradictedEdgesOfOneSubjectAndPredicate(t *testing.T) {
	c := string(particle.StatusContradicted)
	edge := func(id, src, pred, status string, conf float64) EdgeOut {
		return EdgeOut{ID: id, Source: src, SourceName: "name of " + src, Predicate: pred, Status: status, Confidence: conf}
	}
	edges := []EdgeOut{
		edge("e1", "cup", "color", c, 0.9),
		edge("e2", "cup", "color", string(particle.StatusActive), 0.8),
		edge("e3", "cup", "color", c, 0.4),
		edge("e4", "cup", "size", c, 0.7),
		edge("e5", "mug", "color", c, 0.6),
		edge("e6", "cup", "color", c, 0.2),
	}
	want := []Contradiction{
		{Subject: "name of cup", Predicate: "color", EdgeA: "e1", EdgeB: "e3", ConfidenceA: 0.9, ConfidenceB: 0.4},
		{Subject: "name of cup", Predicate: "color", EdgeA: "e1", EdgeB: "e6", ConfidenceA: 0.9, ConfidenceB: 0.2},
		{Subject: "name of cup", Predicate: "color", EdgeA: "e3", EdgeB: "e6", ConfidenceA: 0.4, ConfidenceB: 0.2},
	}
	if got := contradictions(edges); !slices.Equal(got, want) {
		t.Fatalf("%+v\nwant %+v", got, want)
	}
	if got := contradictions(edges[1:2]); got == nil || len(got) != 0 {
		t.Fatalf("no contradicted pair: %v, want an empty list", got)
	}
}
