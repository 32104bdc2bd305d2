package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/wave"
)

// The planner benchmarks run on a fleet's graph built through the
// ingest path (rlds.Applier): robots at four sites, episodes of annotated
// steps whose events carry clustered 384-d vectors, about 25k edges. The
// full-size measurement (medium: 200k edges, through NATS) is ctxgraph
// bench run; these are for profiling one stage in isolation.

const fleetDims = 384

type fleetGraph struct {
	store   *particle.Store
	emb     embed.Embedder
	queries [][]float32
}

var (
	fleetOnce sync.Once
	fleet     *fleetGraph
	fleetErr  error
)

func fleetBench(b testing.TB) *fleetGraph {
	b.Helper()
	fleetOnce.Do(func() { fleet, fleetErr = buildFleet() })
	if fleetErr != nil {
		b.Fatal(fleetErr)
	}
	return fleet
}

func buildFleet() (*fleetGraph, error) {
	const (
		episodes = 400
		steps    = 30
		robots   = 20
		sites    = 4
		entities = 1600
		topics   = 64
	)
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		return nil, err
	}
	g := &fleetGraph{store: s, emb: embed.NewHashing(fleetDims)}
	r := rand.New(rand.NewPCG(7, 11))
	centres := make([][]float32, topics)
	for i := range centres {
		centres[i] = noisy(r, nil, 1)
	}
	near := func(t int) []float32 { return noisy(r, centres[t], 0.6) }
	ap := &rlds.Applier{Embedder: g.emb}
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var batch []*rlds.Message
	flush := func() error {
		_, err := s.Update(context.Background(), func(bt *particle.Batch) error {
			for _, m := range batch {
				if err := ap.Apply(context.Background(), bt, m.MsgID(), m); err != nil {
					return err
				}
			}
			return nil
		})
		batch = batch[:0]
		return err
	}
	for e := range episodes {
		robot, site := e%robots, e%robots%sites
		topic := r.IntN(topics)
		seen := make([]string, 10)
		for i := range seen {
			seen[i] = fmt.Sprintf("object %d", site+sites*r.IntN(entities/sites))
		}
		start := t0.Add(time.Duration(e) * 20 * time.Minute)
		for i := range steps {
			an := &rlds.Annotations{Entities: seen[i%10 : i%10+1], Tool: fmt.Sprintf("tool %d", robot%5)}
			for range 1 + i%2 {
				c := 0.3 + 0.7*r.Float64()
				a := r.IntN(10)
				an.Events = append(an.Events, rlds.Event{Subject: seen[a], Predicate: "near", Object: seen[(a+1+r.IntN(9))%10],
					Confidence: &c, Embedding: near(topic)})
			}
			batch = append(batch, &rlds.Message{Kind: rlds.KindStep, Agent: fmt.Sprintf("robot-%02d", robot), EpisodeID: fmt.Sprintf("ep-%04d", e),
				Step: &rlds.Step{Index: i, Timestamp: start.Add(time.Duration(i) * 100 * time.Millisecond),
					LanguageInstruction: fmt.Sprintf("put the %s in the %s", seen[0], seen[1]), Annotations: an}})
			if len(batch) == 256 {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for range 200 {
		g.queries = append(g.queries, near(r.IntN(topics)))
	}
	return g, nil
}

// noisy is centre plus Gaussian noise of norm about scale (or a random
// unit vector without a centre), normalised.
func noisy(r *rand.Rand, centre []float32, scale float64) []float32 {
	v := make([]float32, fleetDims)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale / 19.6) // sqrt(384) ≈ 19.6
		if centre != nil {
			v[i] += centre[i]
		}
	}
	wave.Normalize(v)
	return v
}

// index fills idx from the fleet's store.
func (g *fleetGraph) index(b testing.TB, idx wave.Index) {
	ix, err := planner.NewIndexer(g.store, idx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ix.Close)
}

// stages accumulates per-stage timings and reports their means per call.
type stages struct {
	n                                 int
	prefilter, expand, rerank, stitch int64
	nodes, edges                      int
	total                             []float64
}

// plan asks p for the context of vector q (k 10, budget 256) and adds
// the answer's timings. With reuse set the answer is planned over reuse
// (emptied first), as the daemon's responders do.
func (s *stages) plan(b *testing.B, p *planner.Planner, q []float32, hops int, reuse *planner.Answer) {
	req := &planner.Request{Vector: q, K: 10, Hops: hops, Budget: 256, Roles: []string{"planner"}}
	t := time.Now()
	ans, err := reuse, error(nil)
	if reuse != nil {
		reuse.Reset()
		err = p.PlanInto(context.Background(), req, reuse)
	} else {
		ans, err = p.Plan(context.Background(), req)
	}
	if err != nil {
		b.Fatal(err)
	}
	s.add(ans, time.Since(t))
}

func (s *stages) add(a *planner.Answer, d time.Duration) {
	s.n++
	s.prefilter += a.Timings.PrefilterUS
	s.expand += a.Timings.ExpandUS
	s.rerank += a.Timings.RerankUS
	s.stitch += a.Timings.StitchUS
	s.nodes += len(a.Nodes)
	s.edges += len(a.Edges)
	s.total = append(s.total, float64(d.Microseconds()))
}

func (s *stages) report(b *testing.B) {
	if s.n == 0 {
		return
	}
	n := float64(s.n)
	b.ReportMetric(float64(s.prefilter)/n, "prefilter-µs/op")
	b.ReportMetric(float64(s.expand)/n, "expand-µs/op")
	b.ReportMetric(float64(s.rerank)/n, "rerank-µs/op")
	b.ReportMetric(float64(s.stitch)/n, "stitch-µs/op")
	b.ReportMetric(float64(s.nodes+s.edges)/n, "items/op")
	slices.Sort(s.total)
	b.ReportMetric(s.total[len(s.total)*99/100], "p99-µs")
}

// BenchmarkPlanFleet is the whole planner call (prefilter, expansion,
// re-rank, stitch) with k 10 and a budget of 256, over the exact index
// and HNSW, at 1 and 2 hops; over HNSW also into one reused answer
// (Planner.PlanInto, as the daemon's responders call it: compare B/op).
func BenchmarkPlanFleet(b *testing.B) {
	g := fleetBench(b)
	for _, ix := range []struct {
		name string
		idx  func() wave.Index
	}{
		{"flat", func() wave.Index { return wave.NewFlat(fleetDims) }},
		{"hnsw", func() wave.Index { return wave.NewHNSW(fleetDims, wave.DefaultHNSWOptions()) }},
	} {
		idx := ix.idx()
		g.index(b, idx)
		p := planner.New(g.store, idx, g.emb, nil, planner.Options{})
		for _, hops := range []int{1, 2} {
			for _, reuse := range []*planner.Answer{nil, new(planner.Answer)} {
				name := fmt.Sprintf("%s/hops=%d", ix.name, hops)
				if reuse != nil {
					if ix.name == "flat" {
						continue
					}
					name += "/reused"
				}
				b.Run(name, func(b *testing.B) {
					var st stages
					i := 0
					for b.Loop() {
						st.plan(b, p, g.queries[i%len(g.queries)], hops, reuse)
						i++
					}
					st.report(b)
				})
			}
		}
	}
}

// fixedIndex answers every search with the hits set before the call, so
// that a planner call measures what follows the prefilter: seeding,
// expansion, re-rank and stitch.
type fixedIndex struct {
	wave.Index
	next []wave.Hit
}

func (x *fixedIndex) Search([]float32, int, *wave.Filter) []wave.Hit { return x.next }

// BenchmarkExpandFleet is the planner after the prefilter: the same 20
// seeds per query (each query's exact top 20) expanded 1, 2 and 3 hops
// under a budget of 256.
func BenchmarkExpandFleet(b *testing.B) {
	g := fleetBench(b)
	flat := wave.NewFlat(fleetDims)
	g.index(b, flat)
	hits := make([][]wave.Hit, len(g.queries))
	for i, q := range g.queries {
		hits[i] = flat.Search(q, 20, nil)
	}
	fx := &fixedIndex{Index: flat}
	p := planner.New(g.store, fx, g.emb, nil, planner.Options{})
	for _, hops := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("hops=%d", hops), func(b *testing.B) {
			var st stages
			i := 0
			for b.Loop() {
				q := i % len(g.queries)
				fx.next = hits[q]
				st.plan(b, p, g.queries[q], hops, nil)
				i++
			}
			st.report(b)
		})
	}
}

// BenchmarkAnswerJSONFleet encodes a fleet answer (2 hops, budget 256)
// as the daemon does for NATS and HTTP (planner.Render), by reflection,
// by Answer.AppendJSON into a reused buffer, and in the msgpack format
// (Answer.AppendMsgpack), and each format over an answer per query in
// turn (-each); then decodes it as a Go client would, from
// JSON (encoding/json) and from msgpack (DecodeMsgpackAnswer).
func BenchmarkAnswerJSONFleet(b *testing.B) {
	g := fleetBench(b)
	flat := wave.NewFlat(fleetDims)
	g.index(b, flat)
	p := planner.New(g.store, flat, g.emb, nil, planner.Options{})
	ans, err := p.Plan(context.Background(), &planner.Request{Vector: g.queries[0], K: 10, Hops: 2, Budget: 256, Roles: []string{"planner"}})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 1<<18)
	for _, c := range []struct {
		name string
		enc  func() ([]byte, error)
	}{
		{"render", func() ([]byte, error) { raw, _, err := planner.Render(ans, ""); return raw, err }},
		{"reflect", func() ([]byte, error) { return json.Marshal(ans) }},
		{"append", func() ([]byte, error) { return ans.AppendJSON(buf[:0]) }},
		{"msgpack", func() ([]byte, error) { return ans.AppendMsgpack(buf[:0]) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				raw, err := c.enc()
				if err != nil {
					b.Fatal(err)
				}
				n = len(raw)
			}
			b.ReportMetric(float64(n), "bytes")
			b.ReportMetric(float64(len(ans.Nodes)+len(ans.Edges)), "items")
		})
	}
	// The same encoders over an answer per query, in turn: as in the
	// daemon, an answer's strings and provenance are not in cache when
	// it is written (here they are in the last-level cache at worst;
	// the answers of a large graph reach further).
	zbuf := make([]byte, 0, 1<<18)
	many := make([]*planner.Answer, len(g.queries))
	for i, q := range g.queries {
		if many[i], err = p.Plan(context.Background(), &planner.Request{Vector: q, K: 10, Hops: 2, Budget: 256, Roles: []string{"planner"}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		enc  func(a *planner.Answer) ([]byte, error)
	}{
		{"append-each", func(a *planner.Answer) ([]byte, error) { return a.AppendJSON(buf[:0]) }},
		{"msgpack-each", func(a *planner.Answer) ([]byte, error) { return a.AppendMsgpack(buf[:0]) }},
		// As the daemon answers a request asking for s2: the JSON, then
		// the JSON compressed (bytes are those sent).
		{"append-s2-each", func(a *planner.Answer) ([]byte, error) {
			raw, err := a.AppendJSON(buf[:0])
			if err != nil {
				return nil, err
			}
			return contentenc.Append(zbuf[:0], raw, contentenc.S2)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n, i int
			for b.Loop() {
				raw, err := c.enc(many[i%len(many)])
				if err != nil {
					b.Fatal(err)
				}
				n += len(raw)
				i++
			}
			b.ReportMetric(float64(n)/float64(i), "bytes")
		})
	}
	// As the daemon answers: each query planned, then its answer
	// written at once, the plan having filled the caches with what it
	// read; encode-ns/op is the writing alone.
	b.Run("msgpack-after-plan", func(b *testing.B) {
		var a planner.Answer
		var enc time.Duration
		var i int
		for b.Loop() {
			req := planner.Request{Vector: g.queries[i%len(g.queries)], K: 10, Hops: 2, Budget: 256, Roles: []string{"planner"}}
			if err := p.PlanInto(context.Background(), &req, &a); err != nil {
				b.Fatal(err)
			}
			t := time.Now()
			if _, err := a.AppendMsgpack(buf[:0]); err != nil {
				b.Fatal(err)
			}
			enc += time.Since(t)
			i++
		}
		b.ReportMetric(float64(enc.Nanoseconds())/float64(i), "encode-ns/op")
	})
	js, err := ans.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	mp, err := ans.AppendMsgpack(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dec  func() error
	}{
		{"decode-json", func() error { var a planner.Answer; return json.Unmarshal(js, &a) }},
		{"decode-msgpack", func() error { _, err := planner.DecodeMsgpackAnswer(mp); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.dec(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
