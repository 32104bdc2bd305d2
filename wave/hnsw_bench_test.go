package wave

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Benchmarks run on clustered data (100 isotropic gaussian clusters,
// L2-normalised; see clustered) at n=20k, dim=384 by default, and also at
// the medium fleet size n=200k with CTXGRAPH_BENCH_LARGE=1:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench 'HNSW|Flat' -benchtime 2000x
//
// The HNSW graph of each size is built once per process with GOMAXPROCS
// writers and cached as a snapshot in $TMPDIR/ctxgraph-wave-bench, so
// reruns start in seconds. Item i has Type i%100 (1% per type) and
// Namespace i%2+1.

const (
	benchDim     = 384
	benchQueries = 1000
	benchK       = 10
	benchSeed    = 20260601
)

func benchSizes() []int {
	if os.Getenv("CTXGRAPH_BENCH_LARGE") != "" {
		return []int{20_000, 200_000}
	}
	return []int{20_000}
}

func benchMeta(i int) Meta {
	return Meta{Kind: KindEdge, Namespace: uint32(i%2 + 1), Type: uint8(i % 100), Time: int64(i), End: int64(i),
		Agent: benchAgents[i%len(benchAgents)]}
}

// benchAgents are the agent keys of 50 robots whose items interleave,
// as a fleet's do.
var benchAgents = func() (keys [50]uint32) {
	for i := range keys {
		keys[i] = AgentKey(fmt.Sprintf("robot-%03d", i))
	}
	return keys
}()

type benchSet struct {
	n, dim   int
	vecs     [][]float32
	queries  [][]float32
	flat     *Flat
	hnsw     *HNSW
	ivf      *IVF // built by getIVF
	splitIVF *IVF // built by getSplitIVF
	// timeIVF, split by time, and timeFlat hold the vectors with
	// timeMeta's scopes (timeBenchIVF).
	timeIVF  *IVF
	timeFlat *Flat
	// truth[filter name][query] = exact top-k ids.
	truth map[string][][]uint64
}

var benchFilters = []struct {
	name string
	f    *Filter
}{
	{"none", nil},
	{"types1pct", &Filter{Types: []uint8{7}}},
	{"allow10pct", &Filter{Allow: func(id uint64) bool { return id%10 == 3 }}},
	{"namespace50pct", &Filter{Namespace: 2}},
	{"allow1pct", &Filter{Allow: func(id uint64) bool { return id%100 == 7 }}},
	{"time200", &Filter{From: 10_000, To: 10_199}}, // 200 items: 1% of 20k, 0.1% of 200k
	{"agent2pct", &Filter{Agent: benchAgents[7]}},
}

var (
	benchMu   sync.Mutex
	benchSets = map[int]*benchSet{}
)

// getBenchSet returns the data, exact index, HNSW index and ground truth
// for n vectors, building them once per process.
func getBenchSet(b *testing.B, n int) *benchSet {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if s, ok := benchSets[n]; ok {
		return s
	}
	all := clustered(benchSeed, n+benchQueries, benchDim, 100)
	s := &benchSet{n: n, dim: benchDim, vecs: all[:n], queries: all[n:], truth: map[string][][]uint64{}}
	s.flat = NewFlat(benchDim)
	for i, v := range s.vecs {
		if err := s.flat.Add(uint64(i), v, benchMeta(i)); err != nil {
			b.Fatal(err)
		}
	}
	for _, bf := range benchFilters {
		truth := make([][]uint64, len(s.queries))
		parallel(len(s.queries), func(i int) {
			for _, h := range s.flat.Search(s.queries[i], benchK, bf.f) {
				truth[i] = append(truth[i], h.ID)
			}
		})
		s.truth[bf.name] = truth
	}
	s.hnsw = loadOrBuildHNSW(b, s)
	benchSets[n] = s
	return s
}

// parallel runs fn(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	w := runtime.GOMAXPROCS(0)
	for g := range w {
		wg.Go(func() {
			for i := g; i < n; i += w {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func loadOrBuildHNSW(b *testing.B, s *benchSet) *HNSW {
	o := DefaultHNSWOptions()
	o.Seed = 1
	dir := filepath.Join(os.TempDir(), "ctxgraph-wave-bench")
	path := filepath.Join(dir, fmt.Sprintf("hnsw-v1-n%d-d%d-c100-s%d-M%d-efc%d.snap", s.n, s.dim, benchSeed, o.M, o.EfConstruction))
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		t0 := time.Now()
		h, err := ReadHNSW(bufio.NewReaderSize(f, 1<<20))
		if err == nil && h.Len() == s.n {
			b.Logf("loaded %s in %v", path, time.Since(t0))
			return h
		}
		b.Logf("ignoring cached %s: %v", path, err)
	}
	h := NewHNSW(s.dim, o)
	t0 := time.Now()
	parallel(s.n, func(i int) {
		if err := h.Add(uint64(i), s.vecs[i], benchMeta(i)); err != nil {
			panic(err)
		}
	})
	d := time.Since(t0)
	b.Logf("built n=%d dim=%d with %d writers in %v (%.0f inserts/s)", s.n, s.dim, runtime.GOMAXPROCS(0), d, float64(s.n)/d.Seconds())
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if f, err := os.CreateTemp(dir, "tmp-*"); err == nil {
			_, werr := h.WriteTo(f)
			cerr := f.Close()
			if werr == nil && cerr == nil {
				os.Rename(f.Name(), path)
			} else {
				os.Remove(f.Name())
			}
		}
	}
	return h
}

// searchBench runs queries round-robin, reporting recall@10 against the
// exact answer and the p50/p99 latency of single searches.
func searchBench(b *testing.B, s *benchSet, ix Index, bytes int, filter string, f *Filter) {
	truth := s.truth[filter]
	lat := make([]time.Duration, 0, 1<<16)
	hits, want, i := 0, 0, 0
	b.ReportAllocs()
	for b.Loop() {
		qi := i % len(s.queries)
		t0 := time.Now()
		res := ix.Search(s.queries[qi], benchK, f)
		lat = append(lat, time.Since(t0))
		for _, h := range res {
			if slices.Contains(truth[qi], h.ID) {
				hits++
			}
		}
		want += len(truth[qi])
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(hits)/float64(max(want, 1)), "recall@10")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99_us")
	b.ReportMetric(float64(bytes)/float64(s.n), "B/vec")
}

func BenchmarkHNSWSearch(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d/dim=%d", n, benchDim), func(b *testing.B) {
			s := getBenchSet(b, n)
			h := s.hnsw
			def := DefaultHNSWOptions().EfSearch
			defer h.SetEfSearch(def)
			for _, ef := range []int{32, 48, 64, 80, 96, 128} {
				b.Run(fmt.Sprintf("ef=%d", ef), func(b *testing.B) {
					h.SetEfSearch(ef)
					searchBench(b, s, h, h.Bytes(), "none", nil)
				})
			}
			h.SetEfSearch(def)
			for _, bf := range benchFilters[1:] {
				b.Run("filter="+bf.name, func(b *testing.B) {
					searchBench(b, s, h, h.Bytes(), bf.name, bf.f)
				})
			}
		})
	}
}

func BenchmarkFlatSearch(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d/dim=%d", n, benchDim), func(b *testing.B) {
			s := getBenchSet(b, n)
			for _, bf := range benchFilters[:2] {
				b.Run("filter="+bf.name, func(b *testing.B) {
					searchBench(b, s, s.flat, s.flat.Bytes(), bf.name, bf.f)
				})
			}
		})
	}
}

// BenchmarkHNSWInsert measures single-writer inserts into a growing
// index (from empty), and the parallel build of the benchmark index is
// logged by getBenchSet.
func BenchmarkHNSWInsert(b *testing.B) {
	vecs := clustered(benchSeed+1, 50_000, benchDim, 100)
	h := NewHNSW(benchDim, DefaultHNSWOptions())
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Add(uint64(i), vecs[i%len(vecs)], benchMeta(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "inserts/s")
	b.ReportMetric(float64(h.Len()), "final_n")
}

// BenchmarkHNSWReadSnapshot measures reopening the largest benchmark
// index from its snapshot (in memory, so it excludes disk reads).
func BenchmarkHNSWReadSnapshot(b *testing.B) {
	sizes := benchSizes()
	s := getBenchSet(b, sizes[len(sizes)-1])
	var buf bytes.Buffer
	if _, err := s.hnsw.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if _, err := ReadHNSW(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.n), "n")
}
