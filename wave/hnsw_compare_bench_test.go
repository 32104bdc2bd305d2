//go:build compare

package wave

// Compares HNSW with github.com/coder/hnsw, the most used pure-Go HNSW
// library, on the benchmark data. The build tag keeps the library out of
// normal builds and tests:
//
//	go test ./wave -tags compare -run '^$' -bench Compare -benchtime 1000x
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -tags compare -run '^$' -bench Compare -benchtime 1000x -timeout 60m
//
// coder/hnsw is single-writer (not safe for concurrent use), keeps
// neighbours in maps and has no neighbour-selection heuristic; its graph
// is built with its defaults plus M=16, and EfSearch set per run.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coder "github.com/coder/hnsw"
)

var coderGraphs = map[int]*coder.Graph[uint64]{}

func coderGraph(b *testing.B, s *benchSet) *coder.Graph[uint64] {
	benchMu.Lock()
	defer benchMu.Unlock()
	if g, ok := coderGraphs[s.n]; ok {
		return g
	}
	g := coder.NewGraph[uint64]()
	g.M = 16
	g.EfSearch = 20
	t0 := time.Now()
	for i, v := range s.vecs {
		g.Add(coder.MakeNode(uint64(i), slices.Clone(v)))
	}
	d := time.Since(t0)
	b.Logf("coder/hnsw: built n=%d in %v (%.0f inserts/s, one writer)", s.n, d, float64(s.n)/d.Seconds())
	coderGraphs[s.n] = g
	return g
}

type coderIndex struct{ g *coder.Graph[uint64] }

func (c coderIndex) Add(uint64, []float32, Meta) error { panic("unused") }
func (c coderIndex) Remove(uint64) bool                { panic("unused") }
func (c coderIndex) Len() int                          { return c.g.Len() }
func (c coderIndex) Dim() int                          { return c.g.Dims() }
func (c coderIndex) Search(q []float32, k int, _ *Filter) []Hit {
	ns := c.g.Search(q, k)
	out := make([]Hit, len(ns))
	for i, n := range ns {
		out[i] = Hit{ID: n.Key, Score: Dot(q, n.Value)}
	}
	return out
}

func BenchmarkCompareSearch(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d/dim=%d", n, benchDim), func(b *testing.B) {
			s := getBenchSet(b, n)
			g := coderGraph(b, s)
			defer s.hnsw.SetEfSearch(DefaultHNSWOptions().EfSearch)
			for _, ef := range []int{32, 64, 96, 128} {
				b.Run(fmt.Sprintf("lib=wave/ef=%d", ef), func(b *testing.B) {
					s.hnsw.SetEfSearch(ef)
					searchBench(b, s, s.hnsw, s.hnsw.Bytes(), "none", nil)
				})
				b.Run(fmt.Sprintf("lib=coder/ef=%d", ef), func(b *testing.B) {
					g.EfSearch = ef
					searchBench(b, s, coderIndex{g}, 0, "none", nil)
				})
			}
		})
	}
}

func BenchmarkCompareInsert(b *testing.B) {
	vecs := clustered(benchSeed+1, 50_000, benchDim, 100)
	b.Run("lib=wave", func(b *testing.B) {
		h := NewHNSW(benchDim, DefaultHNSWOptions())
		i := 0
		for b.Loop() {
			if err := h.Add(uint64(i), vecs[i%len(vecs)], Meta{}); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "inserts/s")
	})
	b.Run("lib=coder", func(b *testing.B) {
		g := coder.NewGraph[uint64]()
		g.M = 16
		i := 0
		for b.Loop() {
			g.Add(coder.MakeNode(uint64(i), vecs[i%len(vecs)]))
			i++
		}
		b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "inserts/s")
	})
}
