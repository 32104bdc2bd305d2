package planner_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/wave"
)

// benchWorld is one benchmark store: a fleet's worth of graph (about
// 120k edges) with its vector index and planner.
type benchWorld struct {
	store *particle.Store
	p     *planner.Planner
}

const (
	benchNodes    = 6000
	benchEdges    = 120_000
	benchAgents   = 40
	benchLocation = 20
	benchDim      = 384
)

func benchName(kind string, i int) string { return fmt.Sprintf("%s %d", kind, i) }

// buildBenchWorld builds the same graph for the same seed. With policy,
// it also carries what a lab's policy looks like — per-edge allow/deny
// lists, audiences, personal items, and rules on an edge type, a
// location tag, a hub node, the namespace and a sensitive tag — all of
// which leave the benchmark's planner principal seeing exactly what it
// sees without policy, so both stores give the same answers and the
// difference is the cost of evaluating.
func buildBenchWorld(b *testing.B, seed uint64, policy bool) *benchWorld {
	b.Helper()
	s, err := particle.Open(particle.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	rng := rand.New(rand.NewPCG(seed, 7))
	emb := embed.NewHashing(benchDim)
	pool := make([][]float32, 512) // edge embeddings, shared
	for i := range pool {
		v := make([]float32, benchDim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		wave.Normalize(v)
		pool[i] = v
	}
	ns := particle.DefaultNamespace
	ctx := context.Background()
	var ids []string
	kinds := []particle.NodeType{particle.NodeEntity, particle.NodeEntity, particle.NodeEntity, particle.NodeTool, particle.NodeGoal}
	for start := 0; start < benchNodes; start += 1000 {
		_, err = s.Update(ctx, func(bt *particle.Batch) error {
			for i := start; i < min(benchNodes, start+1000); i++ {
				t := kinds[i%len(kinds)]
				switch {
				case i < benchAgents:
					t = particle.NodeAgent
				case i < benchAgents+benchLocation:
					t = particle.NodeLocation
				}
				n, _, err := bt.Resolve(ns, t, benchName(string(t), i))
				if err != nil {
					return err
				}
				if n.Embedding, err = emb.Embed(ctx, n.Name); err != nil {
					return err
				}
				if i%97 == 0 {
					n.Attributes.Tags = []string{"zone:restricted"}
				}
				if err := bt.PutNode(n); err != nil {
					return err
				}
				ids = append(ids, n.ID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// Edges in batches; endpoints skewed toward hubs (a few entities are
	// in most episodes).
	pickNode := func() string {
		if rng.IntN(4) == 0 {
			return ids[benchAgents+benchLocation+rng.IntN(50)] // hubs
		}
		return ids[rng.IntN(len(ids))]
	}
	types := []particle.EdgeType{particle.EdgeAssertion, particle.EdgeAssertion, particle.EdgeMembership, particle.EdgeToolUse, particle.EdgeCausal, particle.EdgeTemporal}
	const batch = 1000
	for done := 0; done < benchEdges; done += batch {
		_, err := s.Update(ctx, func(bt *particle.Batch) error {
			for i := range batch {
				src, dst := pickNode(), pickNode()
				if src == dst {
					continue
				}
				agent := benchName("agent", rng.IntN(benchAgents))
				o := particle.Observation{Namespace: ns, Source: src, Target: dst, Type: types[rng.IntN(len(types))],
					Predicate: fmt.Sprintf("rel_%d", rng.IntN(40)), Confidence: 0.3 + 0.7*rng.Float64(), Reinforce: rng.Float64(),
					Location:   benchName("location", rng.IntN(benchLocation)),
					Provenance: particle.Provenance{EpisodeID: fmt.Sprintf("ep-%d", (done+i)/40), Agent: agent},
					Decay:      wave.DecayExp, HalfLife: 6 * time.Hour,
					At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(done+i) * time.Second)}
				v := pool[rng.IntN(len(pool))]
				o.Embed = func() ([]float32, error) { return v, nil }
				if r := rng.IntN(100); policy { // drawn either way: the same graph
					switch {
					case r < 10:
						o.Policy.DenyRoles = []string{"visitor"}
					case r < 15:
						o.Policy.AllowRoles = []string{"planner", "operator"}
					case r < 18:
						o.Audience = []string{"planner", agent}
					case r < 21:
						o.Policy.Sensitivity, o.Policy.Subject = particle.SensitivityPersonal, agent
					}
				}
				if _, _, err := bt.Observe(o); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if policy {
		hub := ids[benchAgents+benchLocation]
		for _, r := range []particle.Rule{
			{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{EdgeType: particle.EdgeToolUse}},
			{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Tag: "location:" + benchName("location", 3)}},
			{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Node: hub}},
			{Effect: particle.EffectAllow, Roles: []string{"planner", "operator", "staff"}, Target: particle.Target{Scope: ns}},
			{Effect: particle.EffectLabel, Sensitivity: particle.SensitivitySensitive, Target: particle.Target{Tag: "zone:restricted"}},
			{Effect: particle.EffectDeny, Roles: []string{"contractor"}, Target: particle.Target{EdgeType: particle.EdgeAssertion}},
		} {
			if _, err := s.EditPolicy(ctx, particle.Edit{Op: particle.OpCreate, Rule: &r, Who: "bench", Why: "benchmark policy"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	idx := wave.NewHNSW(benchDim, wave.HNSWOptions{})
	var nodes []*particle.Node
	s.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			if len(n.Embedding) == benchDim {
				nodes = append(nodes, n)
			}
			return true
		})
	})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Seq < nodes[j].Seq }) // one order, one graph
	for _, n := range nodes {
		if err := idx.Add(n.Seq, n.Embedding, wave.Meta{Kind: wave.KindNode, Type: n.Type.Code()}); err != nil {
			b.Fatal(err)
		}
	}
	// The fast path reads only the memory-resident view (and the policy
	// it has loaded): Badger is closed so that its compactions of what
	// was just written do not steal the CPU from the measurement.
	s.PolicyVersion()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	return &benchWorld{store: s, p: planner.New(s, idx, emb, nil, planner.Options{Now: func() time.Time { return now }})}
}

// shape is an answer without scores or ids: what both stores must agree on.
func shape(a *planner.Answer) []string {
	var out []string
	for _, e := range a.Edges {
		out = append(out, e.SourceName+"|"+e.Predicate+"|"+e.TargetName)
	}
	for _, n := range a.Nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkPlannerPolicy measures the planner's fast path (in process,
// k=10) on a 120k-edge store with policy evaluation off (no rules, no
// per-item policy: the evaluator's short path) and on (a lab's policy),
// interleaving the two so that machine noise falls on both alike. It
// reports p50 and p99 of each and the p99 overhead in percent.
//
//	go test ./planner -run '^$' -bench BenchmarkPlannerPolicy -benchtime 3000x
func BenchmarkPlannerPolicy(b *testing.B) {
	off := buildBenchWorld(b, 42, false)
	on := buildBenchWorld(b, 42, true)
	principal := []string{"planner"}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, hops := range []int{1, 2} {
		b.Run(fmt.Sprintf("hops=%d", hops), func(b *testing.B) {
			mk := func() *planner.Request {
				e1 := benchName(string(particle.NodeEntity), benchAgents+benchLocation+rng.IntN(benchNodes-benchAgents-benchLocation))
				e2 := benchName(string(particle.NodeEntity), benchAgents+benchLocation+rng.IntN(50))
				return &planner.Request{Query: e1 + " near " + e2, Entities: []string{e1, e2}, Roles: principal,
					Agent: "agent 3", K: 10, Hops: hops, Budget: 256}
			}
			// Same answers from both stores: the policy hides nothing
			// from this principal, so the work is the same.
			for range 20 {
				req := mk()
				r2 := *req
				a1, err1 := off.p.Plan(context.Background(), req)
				a2, err2 := on.p.Plan(context.Background(), &r2)
				if err1 != nil || err2 != nil {
					b.Fatal(err1, err2)
				}
				if s1, s2 := shape(a1), shape(a2); !slices.Equal(s1, s2) {
					var only1, only2 []string
					for _, x := range s1 {
						if !slices.Contains(s2, x) {
							only1 = append(only1, x)
						}
					}
					for _, x := range s2 {
						if !slices.Contains(s1, x) {
							only2 = append(only2, x)
						}
					}
					b.Fatalf("answers differ with policy on: only off %v, only on %v", only1, only2)
				}
			}
			// Wall time suffers whatever else the machine runs; the
			// thread's CPU time (the loop is locked to one thread, and a
			// request never blocks) does not: both are reported, and the
			// overheads are of CPU time.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var wall, cpu [2][]time.Duration // [off, on]
			runtime.GC()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				req := mk()
				r2 := *req
				order := [2]int{0, 1}
				if i%2 == 1 { // alternate which goes first
					order = [2]int{1, 0}
				}
				i++
				reqs := [2]*planner.Request{req, &r2}
				for k, which := range order {
					w := [2]*benchWorld{off, on}[which]
					t0, c0 := time.Now(), threadCPU()
					if _, err := w.p.Plan(context.Background(), reqs[k]); err != nil {
						b.Fatal(err)
					}
					cpu[which] = append(cpu[which], threadCPU()-c0)
					wall[which] = append(wall[which], time.Since(t0))
				}
			}
			b.StopTimer()
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			over := func(q float64, d [2][]time.Duration) float64 {
				a, b := us(percentile(d[0], q)), us(percentile(d[1], q))
				return 100 * (b - a) / a
			}
			b.ReportMetric(us(percentile(cpu[0], 0.5)), "p50-cpu-off-µs")
			b.ReportMetric(us(percentile(cpu[1], 0.5)), "p50-cpu-on-µs")
			b.ReportMetric(us(percentile(cpu[0], 0.99)), "p99-cpu-off-µs")
			b.ReportMetric(us(percentile(cpu[1], 0.99)), "p99-cpu-on-µs")
			b.ReportMetric(over(0.5, cpu), "p50-overhead-%")
			b.ReportMetric(over(0.99, cpu), "p99-overhead-%")
			b.ReportMetric(us(percentile(wall[0], 0.99)), "p99-wall-off-µs")
			b.ReportMetric(us(percentile(wall[1], 0.99)), "p99-wall-on-µs")
		})
	}
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}
