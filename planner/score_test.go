package planner

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// The batch scoring of a candidate set (gonum decay per group of decay
// parameters) must agree with scoring each edge alone.
func TestScoreEdgesMatchesScalarScoring(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	q := make([]float32, 8)
	q[0] = 1
	run := &run{p: &Planner{opts: Options{SalienceFloor: 0.05}}, q: q, now: now}
	fns := []wave.DecayFn{wave.DecayExp, wave.DecayPower, wave.DecayLinear}
	var edges []*particle.Edge
	for i := 0; i < 300; i++ {
		emb := make([]float32, 8)
		emb[i%8] = 1
		edges = append(edges, &particle.Edge{
			Embedding: emb, Confidence: 0.2 + float64(i%7)/10,
			Salience: particle.Salience{
				Score: float64(i%10) / 10, DecayFn: string(fns[i%3]), HalfLifeS: float64(60 * (1 + i%4)),
				LastUpdated: now.Add(-time.Duration(i) * 17 * time.Second),
			},
		})
	}
	got := run.scoreEdges(edges)
	for i, e := range edges {
		if want := run.scoreEdge(e, run.salience(e)); math.Abs(got[i]-want) > 1e-9 {
			t.Fatalf("edge %d: batch %v, scalar %v", i, got[i], want)
		}
	}
}

func TestContextStateTopDims(t *testing.T) {
	v := []float32{0.1, -0.9, 0.3, 0.05, 0.5, -0.2, 0.7, 0, 0.25}
	cs := newContextState(v)
	want := []int{1, 6, 4, 2, 8}
	if len(cs.Top) != 5 {
		t.Fatalf("top = %+v", cs.Top)
	}
	for i, d := range cs.Top {
		if d.Dim != want[i] || d.Value != v[want[i]] {
			t.Errorf("top[%d] = %+v, want dim %d", i, d, want[i])
		}
	}
	if short := newContextState([]float32{0.2, -0.4}); len(short.Top) != 2 || short.Top[0].Dim != 1 {
		t.Errorf("short vector top = %+v", short.Top)
	}
}

// canonicalIs must answer as comparing particle.Canonical does.
func TestCanonicalIsCanonical(t *testing.T) {
	names := []string{"", " ", "Lab A", "lab a", "  LAB   a ", "lab\ta", "lab  b", "lab", "lab a b", "ÉCOLE", "école", "\xff", "\ufffd",
		"İstanbul", "i̇stanbul", "ǅ", "ǆ", "a\u00a0b", "a b"}
	for _, s := range names {
		for _, c := range names {
			want := particle.Canonical(s) == particle.Canonical(c)
			if got := canonicalIs(s, particle.Canonical(c)); got != want {
				t.Errorf("canonicalIs(%q, Canonical(%q)) = %v, want %v", s, c, got, want)
			}
		}
	}
}

// topScores must pick the same best edges as scoring every candidate,
// with the same scores, whatever the fanout, under the default and the
// temporal strategy; and it must leave most far-below candidates
// unscored when saliences differ widely (the point of it).
func TestTopScoresPicksWhatFullScoringPicks(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(3, 4))
	const dim = 16
	q := make([]float32, dim)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	wave.Normalize(q)
	fns := []wave.DecayFn{wave.DecayExp, wave.DecayPower, wave.DecayLinear}
	pruned := 0
	for round := range 200 {
		var edges []*particle.Edge
		for i := range 1 + r.IntN(600) {
			e := &particle.Edge{
				Confidence: []float64{0.1, 0.5, 0.5, 0.9, 1}[r.IntN(5)],
				Salience: particle.Salience{Score: r.Float64(), DecayFn: string(fns[r.IntN(3)]), HalfLifeS: 3600 * (1 + 47*r.Float64()),
					LastUpdated: now.Add(-time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))},
				ValidFrom: now.Add(-time.Duration(r.Int64N(int64(60 * 24 * time.Hour)))),
			}
			if i%9 != 0 { // some edges have no embedding: similarity 0.5
				e.Embedding = make([]float32, dim)
				for j := range e.Embedding {
					e.Embedding[j] = float32(r.NormFloat64())
				}
				wave.Normalize(e.Embedding)
			}
			if round%3 == 0 && i%4 == 0 { // ties
				e.Salience.Score, e.Salience.LastUpdated, e.Confidence = 0, now, 0.5
				e.Embedding = nil
			}
			edges = append(edges, e)
		}
		fanout := 1 + r.IntN(40)
		run := &run{p: &Planner{opts: Options{SalienceFloor: 0.05}}, req: &Request{}, q: q, now: now, temporal: round%2 == 1}
		full := slices.Clone(run.scoreEdges(edges))
		top := slices.Clone(run.topScores(edges, fanout))
		want := slices.Clone(full)
		slices.SortFunc(want, func(a, b float64) int { return cmp.Compare(b, a) })
		got := slices.Clone(top)
		slices.SortFunc(got, func(a, b float64) int { return cmp.Compare(b, a) })
		k := min(fanout, len(edges))
		for i := range k {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Fatalf("round %d (fanout %d of %d): best scores %v, want %v", round, fanout, len(edges), got[:k], want[:k])
			}
		}
		for i, s := range top {
			if !math.IsInf(s, -1) && math.Abs(s-full[i]) > 1e-12 {
				t.Fatalf("round %d: edge %d scored %v, full scoring %v", round, i, s, full[i])
			}
			if math.IsInf(s, -1) {
				pruned++
			}
		}
	}
	if pruned == 0 {
		t.Fatal("topScores never skipped a candidate")
	}
}

// TestTopScoresBoundsNearlyTied gives scoreCands three candidates whose
// bounds differ by less than float32 resolution, as its sort keys hold
// them: the first scored sets the floor between the other two bounds,
// and the candidate ranked first among the two by its key has the
// lower bound and score. The best one must still be scored.
func TestTopScoresBoundsNearlyTied(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	q := []float32{1, 0, 0, 0}
	b32 := float64(float32(0.6))
	edge := func(static float64, emb []float32) *particle.Edge {
		return &particle.Edge{Confidence: 1, Embedding: emb,
			Salience: particle.Salience{Score: static - 0.05, DecayFn: string(wave.DecayExp), HalfLifeS: 3600, LastUpdated: now}}
	}
	edges := []*particle.Edge{
		edge(2*(b32+5e-10), nil),              // bound 1.2, score b32+5e-10 (no embedding: similarity 0.5)
		edge(b32, nil),                        // bound b32, score b32/2
		edge(b32+1e-9, []float32{1, 0, 0, 0}), // bound and score b32+1e-9, the best
	}
	run := &run{p: &Planner{opts: Options{SalienceFloor: 0.05}}, req: &Request{}, q: q, now: now}
	if boundKey(edgeStaticScore(run, edges[1]), 1) > boundKey(edgeStaticScore(run, edges[2]), 2) {
		t.Fatal("the test's near tie does not tie as float32 keys")
	}
	top := run.topScores(edges, 1)
	if best := slices.Max(top); best != top[2] || math.IsInf(best, -1) {
		t.Fatalf("scores %v: the best candidate (2) was not scored", top)
	}
}

// TestBestCandsKeepsTheBest checks bestCands against a full sort by
// score, ties by seq, with unscored (-Inf) candidates among them.
func TestBestCandsKeepsTheBest(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 300 {
		n := 1 + r.IntN(300)
		cs := make([]edgeCand, n)
		for i := range cs {
			cs[i] = edgeCand{seq: uint64(r.IntN(1000)), score: float64(r.IntN(20)) / 4}
			if r.IntN(3) == 0 {
				cs[i].score = math.Inf(-1)
			}
		}
		fanout := 1 + r.IntN(40)
		want := slices.Clone(cs)
		slices.SortFunc(want, func(a, b edgeCand) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		want = want[:min(n, fanout)]
		got := bestCands(cs, fanout)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d kept, want %d", round, len(got), len(want))
		}
		for i := range want {
			if got[i].seq != want[i].seq || got[i].score != want[i].score {
				t.Fatalf("round %d (fanout %d of %d): %d-th kept %+v, want %+v", round, fanout, n, i, got[i], want[i])
			}
		}
	}
}
