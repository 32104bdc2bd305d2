//go:build unix

package planner

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// benchGraph fills f with parts, each with a serial number (an
// assertion value), a location and a maker: parts*3 edges.
func benchGraph(b *testing.B, f *fixture, parts int) {
	b.Helper()
	words := []string{"gripper", "bracket", "sensor", "cable", "fixture", "camera", "motor", "valve"}
	const perBatch = 200
	for start := 0; start < parts; start += perBatch {
		_, err := f.store.Update(context.Background(), func(bt *particle.Batch) error {
			resolve := func(name string) (*particle.Node, error) {
				n, created, err := bt.Resolve(testNS, particle.NodeEntity, name)
				if err != nil {
					return nil, err
				}
				if created {
					n.Embedding = f.embed(n.Name)
				}
				return n, bt.PutNode(n)
			}
			for i := start; i < min(parts, start+perBatch); i++ {
				part, err := resolve(fmt.Sprintf("%s part %d", words[i%len(words)], i))
				if err != nil {
					return err
				}
				for j, rel := range [][3]string{
					{"serial_number", fmt.Sprintf("%s batch %d", words[(i+1)%len(words)], i%50), fmt.Sprintf("SN-%05d-XQ", i)},
					{"located_in", fmt.Sprintf("bay %d", i%40), ""},
					{"made_by", fmt.Sprintf("maker %d", i%25), ""},
				} {
					o, err := resolve(rel[1])
					if err != nil {
						return err
					}
					step := j
					pred, value := rel[0], rel[2]
					if _, _, err := bt.Observe(particle.Observation{
						Namespace: testNS, Source: part.ID, Target: o.ID, Type: particle.EdgeAssertion, Predicate: pred, Value: value,
						At: t0, Provenance: particle.Provenance{EpisodeID: "ep-bench", StepIndex: &step, ObservedAt: t0},
						Decay: wave.DecayExp, HalfLife: 24 * time.Hour, Reinforce: 0.5,
						Embed: func() ([]float32, error) { return f.embed(part.Name + " " + pred + " " + o.Name + " " + value), nil },
					}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := f.vec.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPlanByStrategy measures the planner in process per strategy
// over 3000 parts (about 9000 edges, 3000 with a serial number): the
// default (auto on free text: semantic, bleve untouched) against
// keyword and hybrid, which search bleve first. It reports p50/p99.
func BenchmarkPlanByStrategy(b *testing.B) {
	f := newFixture(b, true)
	benchGraph(b, f, 3000)
	for _, tc := range []struct{ name, strategy, query string }{
		{"auto-free-text", "", "where is the gripper part"},
		{"semantic", StrategySemantic, "where is the gripper part"},
		{"keyword", StrategyKeyword, "SN-01234-XQ"},
		{"hybrid", StrategyHybrid, "gripper part SN-01234-XQ"},
		{"auto-serial", "", "SN-01234-XQ"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var lat []time.Duration
			c0 := cpuTime()
			for b.Loop() {
				t := time.Now()
				if _, err := f.p.Plan(context.Background(), &Request{Query: tc.query, Strategy: tc.strategy, Hops: 1}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			reportLatency(b, lat, cpuTime()-c0)
		})
	}
	b.Run("bleve-search-only", func(b *testing.B) {
		var lat []time.Duration
		c0 := cpuTime()
		for b.Loop() {
			t := time.Now()
			if _, err := f.kw.Search(testNS, "SN-01234-XQ", 20); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		reportLatency(b, lat, cpuTime()-c0)
	})
}

// cpuTime is the process's user+system CPU time: per op, a cost the
// other processes of a shared machine do not inflate as they do wall
// time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportLatency(b *testing.B, lat []time.Duration, cpu time.Duration) {
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/op")
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkChooseStrategy is what auto adds to every request that does
// not name a strategy: reading the query and, for plain text, one name
// look-up in the view.
func BenchmarkChooseStrategy(b *testing.B) {
	f := lab(b, true)
	for _, q := range []string{"where is the red block", "red block", "SN-4471-XQ near the gripper"} {
		b.Run(q, func(b *testing.B) {
			req := &Request{Query: q}
			for b.Loop() {
				if _, _, _, err := f.p.chooseStrategy(req, testNS); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
