package particle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"
)

// The reopen benchmark stores a fleet-like graph of N edges, written
// straight through Batch (no NATS), and measures Open on it:
//
//	go test -run '^$' -bench 'Reopen|Write' -benchtime 3x ./particle/
//
// Each edge is an assertion observed in an episode step, with a 384-d
// embedding of integer-valued floats (as cmd/internal/bench/gen.go
// quantises them), one provenance record, a site scope, a value, and a
// role policy on some; each step's raw record is stored beside it and
// each episode lists its edges. The store is built once into $TMPDIR,
// keyed by size, value format and Badger layout, and reused.

const (
	benchDims        = 384
	benchEdgesPerTxn = 512
	benchEntities    = 10_000 // in the benchmarks; tests use fewer
	benchEpisodeLen  = 100    // edges per episode
)

var benchPredicates = []string{"on", "in", "near", "holds", "left_of", "right_of", "above", "below", "inside", "touches",
	"grasped_by", "pushed", "sees", "reaches", "color", "weight", "state", "opened", "closed", "contains"}

var benchSites = []string{"lab-a", "lab-b", "depot-1", "depot-2", "kitchen", "line-3", "line-4", "yard"}

// benchWorkload writes a fleet-like graph into a store, one Update per
// benchEdgesPerTxn edges.
type benchWorkload struct {
	entities int
	r        *rand.Rand
	topics   [][]float32
	start    time.Time
	written  int
}

func newBenchWorkload(seed uint64, entities int) *benchWorkload {
	w := &benchWorkload{entities: entities, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)}
	for range 64 {
		t := make([]float32, benchDims)
		for i := range t {
			t[i] = float32(w.r.NormFloat64())
		}
		w.topics = append(w.topics, t)
	}
	return w
}

// vector is a point near a topic, quantised to integers in [-127, 127].
func (w *benchWorkload) vector(topic int) []float32 {
	v := make([]float32, benchDims)
	peak := float32(0)
	for i, c := range w.topics[topic] {
		v[i] = c + 0.4*float32(w.r.NormFloat64())
		peak = max(peak, float32(math.Abs(float64(v[i]))))
	}
	for i := range v {
		v[i] = float32(math.Round(float64(v[i] / peak * 127)))
	}
	return v
}

func entityName(i int) string { return fmt.Sprintf("object-%05d", i) }

// seed writes the entities every edge refers to.
func (w *benchWorkload) seed(s *Store) error {
	for lo := 0; lo < w.entities; lo += 1000 {
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			for i := lo; i < min(lo+1000, w.entities); i++ {
				n, _, err := b.Resolve(DefaultNamespace, NodeEntity, entityName(i))
				if err != nil {
					return err
				}
				n.Embedding = w.vector(i % len(w.topics))
				n.Attributes.Tags = []string{"fleet", benchSites[i%len(benchSites)]}
				TouchNode(n, "", "", 0, w.start)
				if err := b.PutNode(n); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("seed entities: %w", err)
		}
	}
	return nil
}

// batch writes the next benchEdgesPerTxn edge observations in one Update.
func (w *benchWorkload) batch(s *Store) error {
	_, err := s.Update(context.Background(), func(b *Batch) error {
		var ep *Episode
		for range benchEdgesPerTxn {
			i := w.written
			w.written++
			epNo := i / benchEpisodeLen
			site := benchSites[epNo%len(benchSites)]
			agent := fmt.Sprintf("robot-%02d", epNo%50)
			epID := fmt.Sprintf("ep-%07d", epNo)
			if ep == nil || ep.ID != epID {
				if ep != nil {
					if err := b.PutEpisode(ep); err != nil {
						return err
					}
				}
				if ep = b.Episode(DefaultNamespace, epID); ep == nil {
					ep = &Episode{ID: epID, Agent: agent, Location: site, StartTime: w.start.Add(time.Duration(epNo) * time.Minute),
						LanguageInstruction: "pick up the object and place it on the shelf", Features: map[string]string{"observation/state": "float32[7]"}}
				}
			}
			step := i % benchEpisodeLen
			at := ep.StartTime.Add(time.Duration(step) * 100 * time.Millisecond)
			topic := epNo % len(w.topics)
			src, dst := w.r.IntN(w.entities), w.r.IntN(w.entities)
			o := Observation{
				Source: nodeIDFor(b, src), Target: nodeIDFor(b, dst), Type: EdgeAssertion,
				Predicate: benchPredicates[w.r.IntN(len(benchPredicates))], Value: fmt.Sprintf("v%d", w.r.IntN(1000)),
				Confidence: math.Round((0.2+0.8*w.r.Float64())*100) / 100,
				Provenance: Provenance{EpisodeID: epID, StepIndex: &step, Agent: agent, ObservedAt: at},
				At:         at, Location: site,
			}
			if w.r.Float64() < 0.08 {
				o.Policy.DenyRoles = []string{"visitor"}
			}
			vec := w.vector(topic)
			o.Embed = func() ([]float32, error) { return vec, nil }
			e, _, err := b.Observe(o)
			if err != nil {
				return err
			}
			ep.Edges = append(ep.Edges, e.ID)
			ep.Steps = step + 1
			if step%2 == 0 {
				raw := make([]byte, 256)
				for j := range raw {
					raw[j] = byte(w.r.IntN(16))
				}
				if err := b.PutStep(DefaultNamespace, epID, step, raw); err != nil {
					return err
				}
			}
		}
		return b.PutEpisode(ep)
	})
	return err
}

// writeFleet opens a store in dir and writes the fleet workload of seed,
// over entities entities, until it holds at least edges edges.
func writeFleet(tb testing.TB, dir string, seed uint64, entities, edges int) *Store {
	tb.Helper()
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		tb.Fatal(err)
	}
	w := newBenchWorkload(seed, entities)
	if err := w.seed(s); err != nil {
		tb.Fatal(err)
	}
	for w.written < edges {
		if err := w.batch(s); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func nodeIDFor(b *Batch, i int) string {
	n, _, err := b.Resolve(DefaultNamespace, NodeEntity, entityName(i))
	if err != nil || n == nil {
		return entityName(i)
	}
	return n.ID
}

// benchLayout names what decides the bytes on disk: the value format and
// the Badger options.
func benchLayout() string {
	bo := badgerOptions(DefaultOptions("x"))
	return fmt.Sprintf("f%d-vt%d-c%d-mt%d-bt%d", formatV2, bo.ValueThreshold, bo.Compression, bo.MemTableSize>>20, bo.BaseTableSize>>20)
}

// benchStore returns the directory of a closed store holding edges
// edges, building it the first time.
func benchStore(b *testing.B, edges int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ctxgraph-particle-reopen-%d-%s", edges, benchLayout()))
	if _, err := os.Stat(filepath.Join(dir, "READY")); err == nil {
		return dir
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s := writeFleet(b, dir, 1, benchEntities, edges)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d edges in %s (%.0f edges/s)", edges, time.Since(start).Round(time.Second), float64(edges)/time.Since(start).Seconds())
	if err := os.WriteFile(filepath.Join(dir, "READY"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkReopen opens a store of 200k or 1M edges and loads its view.
// Besides the time it reports the loaded heap: its bytes and objects an
// edge, the bytes of it a collection scans (scanned_B/edge) and a full
// collection's time.
func BenchmarkReopen(b *testing.B) {
	for _, edges := range []int{200_000, 1_000_000} {
		for _, from := range []string{"badger", "snapshot"} {
			b.Run(fmt.Sprintf("edges=%dk/from=%s", edges/1000, from), func(b *testing.B) {
				dir := benchStore(b, edges)
				o := DefaultOptions(dir)
				o.ViewSnapshot = from == "snapshot"
				if err := os.Remove(ViewSnapshotPath(dir)); err != nil && !os.IsNotExist(err) {
					b.Fatal(err)
				}
				if o.ViewSnapshot { // the first Close writes the first snapshot
					s, err := Open(o)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
				var heap, objects, scanned uint64
				cpu, gc := 0.0, time.Duration(0)
				runtime.GC()
				b.ResetTimer()
				for range b.N {
					cpu0 := processCPU()
					s, err := Open(o)
					if err != nil {
						b.Fatal(err)
					}
					cpu += processCPU() - cpu0
					b.StopTimer()
					if got := s.Counts().Edges[EdgeAssertion]; got < int64(edges)*9/10 {
						b.Fatalf("reopened with %d edges, want about %d", got, edges)
					}
					// The maps a daemon builds after it serves, then a
					// full collection of the loaded heap: what every
					// collection of a daemon after its start marks.
					s.IndexLoaded()
					s.WaitLinked()
					gc0 := time.Now()
					runtime.GC()
					gc += time.Since(gc0)
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					heap, objects = ms.HeapAlloc, ms.HeapObjects
					scan := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
					metrics.Read(scan)
					scanned = scan[0].Value.Uint64()
					if err := s.Close(); err != nil { // writes the next snapshot
						b.Fatal(err)
					}
					s = nil
					runtime.GC()
					b.StartTimer()
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "reopen_s")
				b.ReportMetric(cpu/float64(b.N), "reopen_cpu_s")
				b.ReportMetric(float64(heap)/float64(edges), "heap_B/edge")
				b.ReportMetric(float64(objects)/float64(edges), "heap_objects/edge")
				b.ReportMetric(float64(scanned)/float64(edges), "scanned_B/edge")
				b.ReportMetric(gc.Seconds()*1e3/float64(b.N), "full_gc_ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkWrite commits batches of 512 fleet edges (sync writes) to a
// fresh store; one op is one batch.
func BenchmarkWrite(b *testing.B) {
	s, err := Open(DefaultOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := newBenchWorkload(2, benchEntities)
	if err := w.seed(s); err != nil {
		b.Fatal(err)
	}
	var cpu0 float64 = processCPU()
	batches := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := w.batch(s); err != nil {
			b.Fatal(err)
		}
		batches = append(batches, time.Since(start))
	}
	b.ReportMetric(float64(b.N*benchEdgesPerTxn)/b.Elapsed().Seconds(), "edges/s")
	b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N*benchEdgesPerTxn), "cpu_us/edge")
	// The spread of one batch's time shows the disk's stalls: on a VM
	// here, one commit in 25 waited 24-29 ms on page faults of Badger's
	// memory-mapped value log, once per 8 MB written (BENCHMARKS.md,
	// tenth round).
	slices.Sort(batches)
	at := func(q float64) float64 { return float64(batches[int(q*float64(len(batches)-1))].Microseconds()) / 1e3 }
	b.ReportMetric(at(0.5), "batch_p50_ms")
	b.ReportMetric(at(0.99), "batch_p99_ms")
	b.ReportMetric(at(1), "batch_max_ms")
}
