package planner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// candsOf holds edges as candidates without view records: scoring them
// reads every factor but the codes (by seq) from the edges, as the
// planner did before the records.
func candsOf(edges []*particle.Edge) []edgeCand {
	cs := make([]edgeCand, len(edges))
	for i, e := range edges {
		cs[i] = edgeCand{seq: e.Seq, e: e}
	}
	return cs
}

func scoresOf(cs []edgeCand) []float64 {
	out := make([]float64, len(cs))
	for i := range cs {
		out[i] = cs[i].score
	}
	return out
}

// scoreEdges scores every edge (by its code where it has one,
// codeSimilarity), from the edges alone.
func (run *run) scoreEdges(edges []*particle.Edge) []float64 {
	cs := candsOf(edges)
	run.scoreCands(cs, len(cs))
	return scoresOf(cs)
}

// topScores is scoreCands for edges alone: scores for the best fanout,
// -Inf for those it could leave unscored.
func (run *run) topScores(edges []*particle.Edge, fanout int) []float64 {
	cs := candsOf(edges)
	run.scoreCands(cs, fanout)
	return scoresOf(cs)
}

// edgeStaticScore is an edge's score without its similarity, computed
// from the edge as staticScores did before the view's records: the
// decay is ApplyBatch's (element-wise, so a batch of one gives what a
// group gives).
func edgeStaticScore(run *run, e *particle.Edge) float64 {
	x := (run.p.opts.SalienceFloor + edgeDecayedSalience(run, e)) * e.Confidence
	if run.temporal {
		x *= run.recency(e.ValidFrom, e.ValidTo)
	}
	return x
}

// edgeDecayedSalience is e's salience decayed to the run's time, as
// staticScores computes it (ApplyBatch, element-wise).
func edgeDecayedSalience(run *run, e *particle.Edge) float64 {
	s, age := []float64{e.Salience.Score}, []float64{run.now.Sub(e.Salience.LastUpdated).Seconds()}
	decayOf(e.Salience.DecayFn, e.Salience.HalfLifeS).ApplyBatch(s, s, age)
	return s[0]
}

// recordsGraph fills f's store with edges of two namespaces carrying
// every kind of value the records hold or defer on: each decay function
// and an unknown one, last updates and validity times held exactly or
// not (zero, the epoch, far out), NaN and zero half-lives, with and
// without embeddings, own policies, superseded ones.
func recordsGraph(t *testing.T, f *fixture, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	times := []func() time.Time{
		func() time.Time { return time.Time{} },
		func() time.Time { return time.Unix(0, 0).UTC() },
		func() time.Time { return time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC) },
		func() time.Time { return time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func() time.Time { return time.Date(1680, 1, 1, 0, 0, 0, 0, time.UTC) }, // held, but more than a Duration before now
		func() time.Time { return time.Date(2260, 1, 1, 0, 0, 0, 0, time.UTC) },
		func() time.Time { return t0.Add(time.Duration(r.Int64N(int64(96*time.Hour))) - 48*time.Hour) },
		func() time.Time { return t0.Add(time.Duration(r.Int64N(int64(96*time.Hour))) - 48*time.Hour) },
		func() time.Time { return t0.Add(time.Duration(r.Int64N(int64(96*time.Hour))) - 48*time.Hour) },
	}
	pick := func() time.Time { return times[r.IntN(len(times))]() }
	fns := []string{"", "exp", "exp", "power", "linear", "linear", "bogus"}
	_, err := f.store.Update(context.Background(), func(b *particle.Batch) error {
		for _, ns := range []string{testNS, "lab-b"} {
			var ids []string
			for i := range 10 {
				n := &particle.Node{ID: fmt.Sprintf("%s-node-%d", ns, i), Namespace: ns, Type: particle.NodeEntity, Name: fmt.Sprintf("thing %d", i)}
				n.Embedding = f.embed(n.Name)
				if err := b.PutNode(n); err != nil {
					return err
				}
				ids = append(ids, n.ID)
			}
			for i := range 400 {
				e := &particle.Edge{Namespace: ns, Source: ids[r.IntN(len(ids))], Target: ids[r.IntN(len(ids))], Type: particle.EdgeAssertion,
					Assertion: &particle.Assertion{Predicate: fmt.Sprintf("p%d", i)}, Confidence: []float64{0, 0.3, 0.5, 0.9, 1}[r.IntN(5)],
					Salience: particle.Salience{Score: r.Float64(), DecayFn: fns[r.IntN(len(fns))],
						HalfLifeS: []float64{0, math.NaN(), 3600, 3600 * 48 * r.Float64()}[r.IntN(4)], LastUpdated: pick()},
					ValidFrom: pick(), ValidTo: pick()}
				if r.IntN(5) != 0 {
					e.Embedding = f.embed(fmt.Sprintf("fact %s %d", ns, i))
				}
				if r.IntN(6) == 0 {
					e.Status = particle.StatusSuperseded
				}
				if r.IntN(8) == 0 {
					e.Policy.DenyRoles = []string{"visitor"}
				}
				if err := b.PutEdge(e); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recordRuns are the requests the record tests ask under: strategies,
// times and constraints that change how edges are admitted and scored.
func recordRuns(f *fixture) []*run {
	var runs []*run
	window := &TimeWindow{From: t0.Add(-30 * time.Hour), To: t0.Add(-2 * time.Hour)}
	for i, req := range []Request{{}, {MinConfidence: 0.5}, {Roles: []string{"visitor"}}, {TimeWindow: window}, {AsOf: &t0}, {}} {
		for _, temporal := range []bool{false, true} {
			runs = append(runs, &run{p: f.p, req: &req, ns: testNS, q: f.embed(fmt.Sprintf("thing %d", i)), now: t0.Add(time.Duration(i) * 7 * time.Hour),
				principal: req.principal(), temporal: temporal, history: temporal && req.AsOf == nil})
		}
	}
	runs[len(runs)-1].ns = "lab-b"
	return runs
}

// readRecordRuns builds recordsGraph(seed) in a fresh fixture, waits
// for its codes and calls fn for each of recordRuns' runs inside a read
// of the store, the run reading through r. The coder makes the graph's
// codes after its commit; a code it is making reads as none, so two
// scorings compared could otherwise use a code one did not have yet.
func readRecordRuns(t *testing.T, seed uint64, fn func(ri int, run *run, r particle.Reader)) {
	t.Helper()
	f := newFixture(t, false)
	recordsGraph(t, f, seed)
	f.store.WaitCoded()
	for ri, run := range recordRuns(f) {
		f.store.Read(func(r particle.Reader) {
			run.r = r
			run.ns = r.Namespace(run.ns)
			run.fcReady = false
			defer run.release()
			fn(ri, run, r)
		})
	}
}

// TestEdgeRecordsScoreAsTheEdges is the differential test of the
// expansion on the view's records: for every node of random graphs and
// every request, the candidates gathered from the facts are those the
// edges admit, every candidate's static score is, bit for bit, the one
// computed from its edge, scoreCands gives the same scores (and the
// same unscored candidates) on the records as on the edges alone, and
// the edges are read only where the records defer or an embedding is
// needed.
func TestEdgeRecordsScoreAsTheEdges(t *testing.T) {
	deferred, fromRecords, pruned, byCode := 0, 0, 0, 0
	for seed := range uint64(3) {
		readRecordRuns(t, seed, func(ri int, run *run, r particle.Reader) {
			r.Nodes(func(n *particle.Node) bool {
				var cs []edgeCand
				var edges []*particle.Edge
				collect := func(seq uint64, facts *particle.EdgeFacts, _ uint64) bool {
					if run.admitsSeq(seq, facts) {
						cs = append(cs, edgeCand{seq: seq, f: facts})
					}
					if e := r.EdgeBySeq(seq); run.admits(e) {
						edges = append(edges, e)
					}
					return true
				}
				r.OutNewestFacts(n.ID, collect)
				r.InNewestFacts(n.ID, collect)
				if len(cs) != len(edges) {
					t.Fatalf("seed %d run %d node %s: %d candidates by the facts, %d by the edges", seed, ri, n.ID, len(cs), len(edges))
				}
				for i := range cs {
					if cs[i].seq != edges[i].Seq {
						t.Fatalf("seed %d run %d node %s: candidate %d is seq %d by the facts, %d by the edges", seed, ri, n.ID, i, cs[i].seq, edges[i].Seq)
					}
				}
				static := run.staticScores(cs)
				for i, c := range cs {
					want := edgeStaticScore(run, edges[i])
					if math.Float64bits(static[i]) != math.Float64bits(want) {
						t.Fatalf("seed %d run %d: edge %+v: static score %v from the records, %v from the edge", seed, ri, edges[i], static[i], want)
					}
					if sal := edgeDecayedSalience(run, edges[i]); math.Float64bits(c.salience) != math.Float64bits(sal) {
						t.Fatalf("seed %d run %d: edge %+v: decayed salience %v from the records, %v from the edge", seed, ri, edges[i], c.salience, sal)
					}
					exact := c.f.Decay != particle.FactDecayEdge && (!run.temporal || c.f.Flags&particle.FactExact != 0)
					switch {
					case exact && c.e != nil:
						t.Fatalf("seed %d run %d: edge %s read though its records hold its static score", seed, ri, edges[i].ID)
					case exact:
						fromRecords++
					default:
						deferred++
					}
				}
				full := run.scoreEdges(edges)
				for _, fanout := range []int{1, 3, 8, len(cs) + 1} {
					run.scoreCands(cs, fanout)
					// The best fanout are those of scoring every
					// candidate, with the same scores; any other
					// scored one has its full scoring's score. A
					// candidate left unscored whose static score
					// alone did not rule it out was ruled out by its
					// embedding's code.
					best := slices.Sorted(slices.Values(full))
					slices.Reverse(best)
					cut := best[min(fanout, len(best))-1]
					got := scoresOf(cs)
					top := slices.Sorted(slices.Values(got))
					slices.Reverse(top)
					for i := range min(fanout, len(best)) {
						if math.Float64bits(top[i]) != math.Float64bits(best[i]) {
							t.Fatalf("seed %d run %d fanout %d: best scores %v, scoring all gives %v", seed, ri, fanout, top[:min(fanout, len(top))], best[:min(fanout, len(best))])
						}
					}
					for i := range cs {
						if !math.IsInf(got[i], -1) && math.Float64bits(got[i]) != math.Float64bits(full[i]) {
							t.Fatalf("seed %d run %d fanout %d: edge %s scored %v, exactly %v", seed, ri, fanout, edges[i].ID, got[i], full[i])
						}
						if math.IsInf(got[i], -1) && static[i] >= cut && static[i] >= 0 {
							byCode++
						}
					}
					want := run.topScores(edges, fanout)
					for i := range cs {
						if math.Float64bits(cs[i].score) != math.Float64bits(want[i]) {
							t.Fatalf("seed %d run %d fanout %d: edge %s scored %v from the records, %v from the edge", seed, ri, fanout, edges[i].ID, cs[i].score, want[i])
						}
						if math.IsInf(want[i], -1) {
							pruned++
						}
					}
				}
				return true
			})
		})
	}
	if fromRecords == 0 || deferred == 0 || pruned == 0 || byCode == 0 {
		t.Fatalf("%d static scores from the records, %d from the edges, %d candidates pruned (%d by their codes): the test does not exercise each", fromRecords, deferred, pruned, byCode)
	}
}

// TestAnswerSalienceIsTheEdgesDecayed: every edge of an answer, whether
// a seed of the prefilter or reached by the expansion, reports its
// salience decayed to the answer's time, as Decay.Apply gives it from the
// edge (to within rounding: the expansion decays whole candidate sets
// with ApplyBatch), not its score or its salience before decay.
func TestAnswerSalienceIsTheEdgesDecayed(t *testing.T) {
	f := newFixture(t, false)
	recordsGraph(t, f, 11)
	now := f.p.opts.Now()
	decayed, undecayed := 0, 0
	for i := range 8 {
		// Queries near nodes, and near edges (which become seeds).
		for _, q := range []string{fmt.Sprintf("thing %d", i), fmt.Sprintf("fact %s %d", testNS, 40*i)} {
			for _, hops := range []int{1, 2} {
				a := f.plan(Request{Query: q, K: 5, Hops: hops, Budget: 256})
				for _, out := range a.Edges {
					var e *particle.Edge
					f.store.Read(func(r particle.Reader) { e = r.Edge(out.ID) })
					if e == nil {
						t.Fatalf("answer edge %s not in the store", out.ID)
					}
					want := decayOf(e.Salience.DecayFn, e.Salience.HalfLifeS).Apply(e.Salience.Score, e.Salience.LastUpdated, now)
					if got := out.Salience; !(got == want || math.Abs(got-want) <= 1e-12*math.Abs(want) || math.IsNaN(got) && math.IsNaN(want)) {
						t.Fatalf("query %q, %d hops: edge %s reports salience %v, decayed from %+v it is %v", q, hops, out.ID, got, e.Salience, want)
					}
					if e.Salience.Score != want {
						decayed++ // decay moved it: the check tells decayed from raw
					} else {
						undecayed++
					}
				}
			}
		}
	}
	if decayed == 0 {
		t.Fatalf("no answer edge's salience had decayed (%d undecayed): the test checks nothing", undecayed)
	}
}

// TestAllowByFactsAsByEdge: the prefilter's predicate, which judges an
// edge by its facts (its namespace by number), answers for every edge
// what the request's namespace and admits say of the edge.
func TestAllowByFactsAsByEdge(t *testing.T) {
	f := newFixture(t, false)
	recordsGraph(t, f, 7)
	allowed, otherNS := 0, 0
	runs := recordRuns(f)
	elsewhere := *runs[0]
	elsewhere.ns = "nowhere" // a namespace without edges
	for ri, run := range append(runs, &elsewhere) {
		f.store.Read(func(r particle.Reader) {
			run.r = r
			run.ns = r.Namespace(run.ns)
			run.fcReady = false
			r.Edges(func(e *particle.Edge) bool {
				want := e.Namespace == run.ns && run.admits(e)
				if got := run.allow(e.Seq); got != want {
					t.Fatalf("run %d (namespace %q): allow(edge %+v) = %v, want %v", ri, run.ns, e, got, want)
				}
				if want {
					allowed++
				}
				if e.Namespace != run.ns {
					otherNS++
				}
				return true
			})
		})
	}
	if allowed == 0 || otherNS == 0 {
		t.Fatalf("%d edges allowed, %d of another namespace: the test does not exercise both", allowed, otherNS)
	}
}

// TestCodeSimilarityIsNearTheEmbeddings: an expansion step scores a
// candidate whose embedding has an int8 code by that code
// (codeSimilarity), and a node by its code (scoreNode). For every candidate of random graphs, under every
// request, its score is within the code's error bound (wave.CodeBound,
// halved as similarity maps the cosine) of the score its float32
// embedding gives, and a candidate without a code is scored by its
// embedding, exactly. Most candidates must have a code, and some codes'
// scores must differ from the embeddings': else the codes are not what
// scored them.
func TestCodeSimilarityIsNearTheEmbeddings(t *testing.T) {
	coded, uncoded, differ, nodes := 0, 0, 0, 0
	var worst float64
	readRecordRuns(t, 5, func(ri int, run *run, r particle.Reader) {
		qNorm := float32(math.Sqrt(float64(wave.Dot(run.q, run.q))))
		r.Nodes(func(n *particle.Node) bool {
			// The node's own score, by its code (scoreNode).
			if code, scale, ok := r.EmbeddingCode(n.Seq); ok && len(n.Embedding) == len(run.q) {
				nodes++
				factor := 0.5 + 0.5*n.Belief.Score
				want := cos01(wave.Dot(run.q, n.Embedding)) * factor
				bound := factor * float64(wave.CodeBound(qNorm, scale, len(code))) / 2
				if got := run.scoreNode(n); math.Abs(got-want) > bound+1e-12 {
					t.Fatalf("run %d: node %s scored %v by its code, %v by its embedding: over the bound %v", ri, n.ID, got, want, bound)
				}
			}
			var cs []edgeCand
			collect := func(seq uint64, facts *particle.EdgeFacts, _ uint64) bool {
				if run.admitsSeq(seq, facts) {
					cs = append(cs, edgeCand{seq: seq, f: facts})
				}
				return true
			}
			r.OutNewestFacts(n.ID, collect)
			r.InNewestFacts(n.ID, collect)
			static := slices.Clone(run.staticScores(cs))
			run.scoreCands(cs, len(cs))
			for i := range cs {
				e := r.EdgeBySeq(cs[i].seq)
				want := static[i] * run.similarity(e)
				got := cs[i].score
				code, scale, ok := r.EmbeddingCode(cs[i].seq)
				if !ok || len(code) != len(run.q) || static[i] < 0 {
					uncoded++
					if math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("run %d: edge %s without a code scored %v, by its embedding %v", ri, e.ID, got, want)
					}
					continue
				}
				coded++
				bound := static[i] * float64(wave.CodeBound(qNorm, scale, len(run.q))) / 2
				if d := math.Abs(got - want); d > bound+1e-12 {
					t.Fatalf("run %d: edge %s scored %v by its code, %v by its embedding: %v apart, over the bound %v", ri, e.ID, got, want, d, bound)
				} else if d > 0 {
					differ++
					if static[i] > 0 {
						worst = max(worst, d/static[i])
					}
				}
			}
			return true
		})
	})
	t.Logf("%d candidates scored by their codes (%d of them not as by their embeddings; the largest difference %.2g of the similarity), %d by their embeddings", coded, differ, worst, uncoded)
	if nodes == 0 {
		t.Fatal("no node has a code: their scores by codes are not checked")
	}
	if coded == 0 || uncoded == 0 || differ == 0 || coded < uncoded {
		t.Fatalf("%d candidates scored by codes (%d unlike their embeddings), %d by embeddings: the test does not exercise each", coded, differ, uncoded)
	}
}
