package wave

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"
)

// IVF benchmarks on the same data and ground truth as the HNSW ones
// (hnsw_bench_test.go), side by side:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench 'IVF|HNSWSearch|HNSWInsert' -benchtime 2000x
//
// The IVF of each size is built by one writer (as the daemon's indexer
// does) once per process; the build rate is logged.

// getIVF returns the IVF over s, building it once.
func getIVF(b *testing.B, s *benchSet) *IVF { return buildBenchIVF(b, s, &s.ivf, false) }

// getSplitIVF returns an IVF over s split by agent, building it once.
func getSplitIVF(b *testing.B, s *benchSet) *IVF { return buildBenchIVF(b, s, &s.splitIVF, true) }

// buildBenchIVF returns *into, building an IVF over s there first if
// nil (split by agent if split).
func buildBenchIVF(b *testing.B, s *benchSet, into **IVF, split bool) *IVF {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if *into != nil {
		return *into
	}
	x := NewIVF(s.dim, IVFOptions{Seed: 1})
	if split {
		x.SplitByAgent()
	}
	t0 := time.Now()
	for i, v := range s.vecs {
		if err := x.Add(uint64(i), v, benchMeta(i)); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(t0)
	x.WaitRebuild()
	b.Logf("IVF (split by agent %v): built n=%d dim=%d with one writer in %v (%.0f inserts/s), trained in %v more; %d lists",
		split, s.n, s.dim, d, float64(s.n)/d.Seconds(), time.Since(t0)-d, x.Lists())
	*into = x
	return x
}

func BenchmarkIVFSearch(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d/dim=%d", n, benchDim), func(b *testing.B) {
			s := getBenchSet(b, n)
			x := getIVF(b, s)
			def := x.NProbe()
			defer x.SetNProbe(def)
			for _, np := range []int{8, 16, 24, 32, 48, 64} {
				b.Run(fmt.Sprintf("nprobe=%d", np), func(b *testing.B) {
					x.SetNProbe(np)
					searchBench(b, s, x, x.Bytes(), "none", nil)
				})
			}
			x.SetNProbe(def)
			for _, bf := range benchFilters[1:] {
				b.Run("filter="+bf.name, func(b *testing.B) {
					searchBench(b, s, x, x.Bytes(), bf.name, bf.f)
				})
			}
			// The same items split by agent (ivf_side.go): the one-agent
			// filter reads that agent's list.
			sx := getSplitIVF(b, s)
			b.Run("split/filter=agent2pct", func(b *testing.B) {
				searchBench(b, s, sx, sx.Bytes(), "agent2pct", benchFilters[len(benchFilters)-1].f)
			})
		})
	}
}

// BenchmarkIVFInsert measures single-writer inserts into a growing index
// (from empty, through the first trainings, which run in the
// background), as BenchmarkHNSWInsert does for HNSW; split=true into an
// index split by agent (ivf_side.go), which codes each vector twice.
func BenchmarkIVFInsert(b *testing.B) {
	vecs := clustered(benchSeed+1, 50_000, benchDim, 100)
	for _, split := range []string{"false", "true", "time"} {
		b.Run("split="+split, func(b *testing.B) {
			x := NewIVF(benchDim, IVFOptions{Seed: 1})
			meta := benchMeta
			switch split {
			case "true":
				x.SplitByAgent()
			case "time":
				// A fleet's history: 250 items an hour, most of them
				// keyed by their hour (timeMeta).
				x.SplitByTime()
				meta = timeMeta(len(vecs))
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if err := x.Add(uint64(i), vecs[i%len(vecs)], meta(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "inserts/s")
			b.ReportMetric(float64(x.Len()), "final_n")
			x.WaitRebuild()
		})
	}
}

// BenchmarkIVFRetrain measures one retraining of an index of 32,768
// clustered vectors (the medium fleet's second, on the way to 207k):
// its quantiser's k-means and the placing of every item in the new
// lists, as the background retraining does beside ingest. The vectors
// lie in 100 clusters, where k-means settles in a few iterations, or in
// 2,000, where (as on the daemon's vectors) it runs all of them.
func BenchmarkIVFRetrain(b *testing.B) {
	const n = 32768
	for _, clusters := range []int{100, 2000} {
		b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) {
			vecs := clustered(benchSeed+2, n, benchDim, clusters)
			x := NewIVF(benchDim, IVFOptions{Seed: 1})
			for i, v := range vecs {
				if err := x.Add(uint64(i), v, benchMeta(i)); err != nil {
					b.Fatal(err)
				}
			}
			x.WaitRebuild()
			b.ReportAllocs()
			for b.Loop() {
				x.mu.Lock()
				snap, wg := x.startRebuild(n)
				x.mu.Unlock()
				x.retrain(snap, n, x.opt.Seed, wg)
			}
			b.ReportMetric(float64(len(x.st.Load().lists)), "lists")
		})
	}
}

// BenchmarkIVFRetrainReplay times a retraining at 32,000 items during
// which ingest went on, as the medium bench's does: 32,000 items added
// and 24,000 Meta changes of items already there (a sixth of them to the
// same items again, a fifth moving a field written once), all of which
// the retraining replays into its new lists. One op is the retraining;
// the index is built again, untimed, before each.
func BenchmarkIVFRetrainReplay(b *testing.B) {
	const n, added, metas = 32_000, 32_000, 24_000
	vecs := clustered(benchSeed+3, n+added, benchDim, 500)
	for b.Loop() {
		b.StopTimer()
		x := NewIVF(benchDim, IVFOptions{Seed: 1})
		for i, v := range vecs[:n] {
			if err := x.Add(uint64(i), v, benchMeta(i)); err != nil {
				b.Fatal(err)
			}
		}
		x.WaitRebuild()
		x.mu.Lock()
		snap, wg := x.startRebuild(n)
		x.mu.Unlock()
		for i := range added {
			if err := x.Add(uint64(n+i), vecs[n+i], benchMeta(n+i)); err != nil {
				b.Fatal(err)
			}
			if i < metas {
				id := i % (metas * 5 / 6)
				m := benchMeta(id)
				m.End += int64(1 + i)
				if i%5 == 0 {
					m.Type++ // written once: the entry is appended again
				}
				x.SetMeta(uint64(id), m)
			}
		}
		b.StartTimer()
		x.retrain(snap, n, x.opt.Seed, wg)
	}
}

// BenchmarkIVFReadSnapshot measures reopening the largest benchmark IVF
// from its snapshot (in memory) and attaching its float vectors.
func BenchmarkIVFReadSnapshot(b *testing.B) {
	sizes := benchSizes()
	s := getBenchSet(b, sizes[len(sizes)-1])
	x := getIVF(b, s)
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	var attach time.Duration
	for b.Loop() {
		y, err := ReadIVF(bytes.NewReader(buf.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for i, v := range s.vecs {
			y.Attach(uint64(i), v)
		}
		attach += time.Since(t0)
	}
	b.ReportMetric(float64(s.n), "n")
	b.ReportMetric(attach.Seconds()/float64(b.N), "attach_s")
	runtime.KeepAlive(s)
}

// evictBytes is the size of the buffer BenchmarkIVFListsAhead reads
// before a cold search: larger than this machine's caches, so that the
// search starts as one in the daemon does, after the rest of a planner
// call and of the process have used the caches.
const evictBytes = 64 << 20

// BenchmarkIVFListsAhead compares how far ahead a search hints the
// lists it will scan (listsAhead; 0 hints none) in one process, so that
// the machine's drift falls on every distance alike:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench IVFListsAhead -benchtime 5000x
//
// cold: each query is searched at every distance in turn, the caches
// swept before each search (outside its time). warm: passes over the
// queries, nothing swept, the distance changing search by search and
// shifted by one each pass (query q at distance q+pass), so that a query
// meets every distance in as many passes and never twice in a row.
func BenchmarkIVFListsAhead(b *testing.B) {
	defer func(a int) { listsAhead = a }(listsAhead)
	benchSearchDistances(b, ivfIndex, "ahead", func(d int) { listsAhead = d }, []int{0, 1, 2, 4, 8})
}

// BenchmarkIVFEntriesAhead compares how far ahead of the entry it
// scores a list's scan hints an entry's code (entriesAhead; 0 hints
// none), as BenchmarkIVFListsAhead compares listsAhead:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench IVFEntriesAhead -benchtime 5000x
func BenchmarkIVFEntriesAhead(b *testing.B) {
	defer func(e int) { entriesAhead = e }(entriesAhead)
	benchSearchDistances(b, ivfIndex, "entries", func(d int) { entriesAhead = d }, []int{0, 8})
}

// BenchmarkIVFRerankStop compares the rerank reading every candidate's
// vector (stop0) with its stop once no candidate left can rank (stop1;
// rerankEarly), as BenchmarkIVFListsAhead compares listsAhead, and
// BenchmarkHNSWRerankStop the same in the HNSW:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench 'IVFRerankStop|HNSWRerankStop' -benchtime 5000x
func BenchmarkIVFRerankStop(b *testing.B) {
	defer func(e bool) { rerankEarly = e }(rerankEarly)
	benchSearchDistances(b, ivfIndex, "stop", func(d int) { rerankEarly = d == 1 }, []int{0, 1})
}

// BenchmarkHNSWRerankStop is BenchmarkIVFRerankStop for the HNSW, whose
// rerank stops the same way (HNSW.rerank).
func BenchmarkHNSWRerankStop(b *testing.B) {
	defer func(e bool) { rerankEarly = e }(rerankEarly)
	benchSearchDistances(b, func(_ *testing.B, s *benchSet) Index { return s.hnsw }, "stop", func(d int) { rerankEarly = d == 1 }, []int{0, 1})
}

// ivfIndex is benchSearchDistances' index of the IVF benchmarks.
func ivfIndex(b *testing.B, s *benchSet) Index { return getIVF(b, s) }

// benchSearchDistances times searches of the index index returns with
// set called with each of distances in turn, in one process (cold and
// warm, as BenchmarkIVFListsAhead says), for the filters none, time200
// and agent2pct, and reports each distance's p50 and p99 as
// NAME<distance>_p50_us and _p99_us. The caller restores what set
// changes.
func benchSearchDistances(b *testing.B, index func(*testing.B, *benchSet) Index, name string, set func(int), distances []int) {
	for _, n := range benchSizes() {
		s := getBenchSet(b, n)
		x := index(b, s)
		for _, bf := range benchFilters {
			if bf.name != "none" && bf.name != "time200" && bf.name != "agent2pct" {
				continue
			}
			for _, cold := range []bool{true, false} {
				b.Run(fmt.Sprintf("n=%d/filter=%s/cold=%v", n, bf.name, cold), func(b *testing.B) {
					var sweep []byte
					if cold {
						sweep = make([]byte, evictBytes)
					}
					var sink byte
					lat := make([][]time.Duration, len(distances))
					i := 0
					for b.Loop() {
						di, qi := i%len(distances), i/len(distances)%len(s.queries)
						if !cold {
							di, qi = (i+i/len(s.queries))%len(distances), i%len(s.queries)
						}
						set(distances[di])
						for o := 0; o < len(sweep); o += 64 {
							sink += sweep[o]
						}
						t0 := time.Now()
						x.Search(s.queries[qi], benchK, bf.f)
						lat[di] = append(lat[di], time.Since(t0))
						i++
					}
					for di, d := range distances {
						if l := lat[di]; len(l) > 0 {
							slices.Sort(l)
							b.ReportMetric(float64(l[len(l)/2].Nanoseconds())/1e3, fmt.Sprintf("%s%d_p50_us", name, d))
							b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds())/1e3, fmt.Sprintf("%s%d_p99_us", name, d))
						}
					}
					runtime.KeepAlive(sink)
				})
			}
		}
	}
}

// BenchmarkIVFTimeSplit compares, on one index split by time, windowed
// searches through the split (the window's hours and the catch-alls'
// index) with the same searches of the inverted lists
// (timeScanFactor 0), alternating search by search so that the
// machine's drift falls on both alike (warm: passes over the queries,
// the way shifted each pass, as BenchmarkIVFListsAhead's distances). The items have timeMeta's scopes
// over 200 hours (three in ten catch-alls: timeless, open or 30 hours
// long); windows of 1, 4 and 24 hours (about 0.35%, 1.4% and 10% of the
// keyed items). cold=true sweeps 64 MB before each search, as the
// daemon's searches find the caches. It reports each way's p50 and p99
// and recall@10 against exact search under the same filter.
func BenchmarkIVFTimeSplit(b *testing.B) {
	split := timeScanFactor
	defer func() { timeScanFactor = split }()
	for _, n := range benchSizes() {
		s := getBenchSet(b, n)
		x, flat := timeBenchIVF(b, s)
		for _, hours := range []int64{1, 4, 24} {
			from := timeBase + 90*timeBucketNS + 17*60e9
			f := &Filter{From: from, To: from + hours*timeBucketNS}
			truth := make([][]uint64, len(s.queries))
			parallel(len(s.queries), func(i int) {
				for _, h := range flat.Search(s.queries[i], benchK, f) {
					truth[i] = append(truth[i], h.ID)
				}
			})
			for _, cold := range []bool{true, false} {
				b.Run(fmt.Sprintf("n=%d/window=%dh/cold=%v", n, hours, cold), func(b *testing.B) {
					var sweep []byte
					if cold {
						sweep = make([]byte, evictBytes)
					}
					var sink byte
					ways := []struct {
						name   string
						factor float64
						lat    []time.Duration
						hits   int
						want   int
					}{{name: "split", factor: split}, {name: "lists", factor: 0}}
					i := 0
					for b.Loop() {
						wi, qi := i%2, i/2%len(s.queries)
						if !cold {
							// Passes over the queries, the way shifted each
							// pass: a search never follows its own query's.
							wi, qi = (i+i/len(s.queries))%2, i%len(s.queries)
						}
						w := &ways[wi]
						timeScanFactor = w.factor
						for o := 0; o < len(sweep); o += 64 {
							sink += sweep[o]
						}
						t0 := time.Now()
						res := x.Search(s.queries[qi], benchK, f)
						w.lat = append(w.lat, time.Since(t0))
						for _, h := range res {
							if slices.Contains(truth[qi], h.ID) {
								w.hits++
							}
						}
						w.want += len(truth[qi])
						i++
					}
					for _, w := range ways {
						if l := w.lat; len(l) > 0 {
							slices.Sort(l)
							b.ReportMetric(float64(l[len(l)/2].Nanoseconds())/1e3, w.name+"_p50_us")
							b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds())/1e3, w.name+"_p99_us")
							b.ReportMetric(float64(w.hits)/float64(max(w.want, 1)), w.name+"_recall@10")
						}
					}
					runtime.KeepAlive(sink)
				})
			}
		}
	}
}

// timeBenchIVF builds an IVF split by time, and a Flat, over the bench
// set's vectors with timeMeta's scopes, once per set.
func timeBenchIVF(b *testing.B, s *benchSet) (*IVF, *Flat) {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if s.timeIVF != nil {
		return s.timeIVF, s.timeFlat
	}
	t0 := time.Now()
	x, flat := buildIVFWith(b, s.vecs, IVFOptions{Seed: 1}, timeMeta(s.n), (*IVF).SplitByTime)
	b.Logf("IVF split by time: n=%d, built in %v, %d lists, %d hours' lists, %d catch-alls", s.n, time.Since(t0), x.Lists(),
		len(x.sides[byTime].Load().lists.Load().lists), x.sides[byTime].Load().shared.Len())
	s.timeIVF, s.timeFlat = x, flat
	return x, flat
}

// BenchmarkIVFSnapshotBesideTheWriter writes the snapshots of an IVF
// split by agent (the index's, then its splits', to io.Discard) while a
// writer sets items' Metas without pause, as the daemon's indexer does
// during a vector checkpoint, and reports the write's time and the
// longest a writer's call waited meanwhile:
//
//	CTXGRAPH_BENCH_LARGE=1 go test ./wave -run '^$' -bench IVFSnapshotBesideTheWriter -benchtime 5x
func BenchmarkIVFSnapshotBesideTheWriter(b *testing.B) {
	sizes := benchSizes()
	s := getBenchSet(b, sizes[len(sizes)-1])
	x := getSplitIVF(b, s)
	for !x.SplitReady() {
		time.Sleep(10 * time.Millisecond)
	}
	var write, longest time.Duration
	for b.Loop() {
		stop := make(chan struct{})
		waited := make(chan time.Duration)
		go func() {
			var most time.Duration
			for i := 0; ; i = (i + 7919) % s.n {
				select {
				case <-stop:
					waited <- most
					return
				default:
				}
				t0 := time.Now()
				x.SetMeta(uint64(i), benchMeta(i))
				most = max(most, time.Since(t0))
			}
		}()
		t0 := time.Now()
		if _, err := x.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
		if _, err := x.WriteSplitsTo(io.Discard); err != nil {
			b.Fatal(err)
		}
		write += time.Since(t0)
		close(stop)
		longest = max(longest, <-waited)
	}
	b.ReportMetric(float64(s.n), "n")
	b.ReportMetric(write.Seconds()*1e3/float64(b.N), "write_ms")
	b.ReportMetric(longest.Seconds()*1e3, "max_writer_wait_ms")
}
