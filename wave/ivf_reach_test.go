package wave

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReachBeyond: the extrapolation of a sample's largest residual
// score to the items unseen is σ·(√(2 ln m) − √(2 ln n)), none for a
// sample of fewer than two or with as many unseen as seen.
func TestReachBeyond(t *testing.T) {
	var r reachStats
	if got := r.beyond(1000); got != 0 {
		t.Fatalf("no scores: beyond %v, want 0", got)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const n, sigma = 20000, 0.04
	for range n {
		r.add(float32(0.1 + sigma*rng.NormFloat64()))
	}
	total := 1000000
	want := sigma * (math.Sqrt(2*math.Log(float64(total-n))) - math.Sqrt(2*math.Log(n)))
	if got := float64(r.beyond(total)); math.Abs(got-want) > 0.02*want {
		t.Fatalf("beyond(%d) after %d scores of σ %v: %v, want %v", total, n, sigma, got, want)
	}
	if got := r.beyond(2 * n); got != 0 {
		t.Fatalf("beyond with as many unseen as seen: %v, want 0", got)
	}
	if a, b := r.beyond(total), r.beyond(10*total); b <= a {
		t.Fatalf("beyond does not grow with the unseen: %v then %v", a, b)
	}
}

// TestSplitFarQueriesRecall: queries that nothing lies close to (random
// directions over clustered items), asked through the split by agent,
// find what exact search finds. Their best scores are near ties that
// the residuals decide, and the catch-alls' bound, its reach the largest
// residual of the few lists it probed, stopped such searches early:
// without the reach's extrapolation (reachBeyondShare) they find less.
func TestSplitFarQueriesRecall(t *testing.T) {
	const n = 100000 // a tenth of it the catch-alls, in far fewer lists than the index's
	vecs := clustered(31, n, 64, 200)
	meta := func(i int) Meta {
		m := Meta{Kind: KindEdge, Namespace: 1, Agent: splitAgents[i%len(splitAgents)]}
		if i%10 == 0 {
			m.Agent = 0
		}
		return m
	}
	x, flat := buildIVFWith(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, meta, (*IVF).SplitByAgent)
	if !x.SplitReady() {
		t.Fatal("split not ready")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	qs := make([][]float32, 300)
	for i := range qs {
		q := make([]float32, 64)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		Normalize(q)
		qs[i] = q
	}
	f := &Filter{Agent: splitAgents[3]}
	with := recall(t, x, flat, qs, 10, f)
	share := reachBeyondShare
	reachBeyondShare = 0
	without := recall(t, x, flat, qs, 10, f)
	reachBeyondShare = share
	t.Logf("far queries through the split: recall@10 %.4f, %.4f without the reach's extrapolation", with, without)
	if with < 0.95 || without >= with {
		t.Fatalf("far queries through the split: recall@10 %.4f, %.4f without the reach's extrapolation; want >= 0.95 and more than without", with, without)
	}
}
