package wave

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// TestGiveWayYieldsEverySoMuchWork: a loop yields once per giveWayDots
// of its steps' work, however costly a step.
func TestGiveWayYieldsEverySoMuchWork(t *testing.T) {
	yields := 0
	for _, c := range []struct{ dots, steps, want int }{
		{1, 3 * giveWayDots, 3},
		{64, 10 * giveWayDots / 64, 10},
		{giveWayDots, 5, 5},
		{4 * giveWayDots, 5, 5}, // a step costlier than the budget yields each time
		{0, giveWayDots, 1},
	} {
		yields = 0
		gw := newGiveWay(c.dots)
		gw.yield = func() { yields++ }
		for range c.steps {
			gw.step()
		}
		if yields != c.want {
			t.Errorf("%d steps of %d dot products: %d yields, want %d", c.steps, c.dots, yields, c.want)
		}
	}
}

// TestKMeansGivesWay: a retraining's k-means yields as it assigns the
// vectors.
func TestKMeansGivesWay(t *testing.T) {
	var yields atomic.Int64
	defer func(g func()) { gosched = g }(gosched)
	gosched = func() { yields.Add(1) }
	r := rand.New(rand.NewPCG(1, 2))
	vs := make([][]float32, 2000)
	for i := range vs {
		vs[i] = make([]float32, 16)
		for j := range vs[i] {
			vs[i][j] = r.Float32() - 0.5
		}
		Normalize(vs[i])
	}
	kmeans(vs, 64, 16, r)
	if yields.Load() == 0 {
		t.Fatal("k-means over 2,000 vectors and 64 centroids never yielded")
	}
}
