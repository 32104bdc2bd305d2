package particle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/wave"
)

// viewFacts is e's facts as the view must hold them: EdgeFactsOf(e)
// with the number of its namespace.
func viewFacts(r Reader, e *Edge) EdgeFacts {
	f := EdgeFactsOf(e)
	f.NS = r.NamespaceKey(e.Namespace)
	return f
}

// checkFacts asserts that every edge's facts are EdgeFactsOf(edge) with
// its namespace's number, and its salience record EdgeSalienceOf(edge);
// that the records stand for the edge exactly where they say so; that
// namespace numbers are one per namespace; and that no seq without an
// edge has facts or a salience record.
func checkFacts(t *testing.T, s *Store, when string) {
	t.Helper()
	// The coder may be making a code as the check asks for it (EmbeddingCode
	// then holds none): let it finish what the commits gave it.
	s.syncCoder()
	s.Read(func(r Reader) {
		live := map[uint64]bool{}
		nsOf := map[uint32]string{}
		r.Edges(func(e *Edge) bool {
			live[e.Seq] = true
			f := r.EdgeFactsBySeq(e.Seq)
			if f == nil || *f != viewFacts(r, e) {
				t.Fatalf("%s: edge %s (seq %d): facts %+v, want %+v", when, e.ID, e.Seq, f, viewFacts(r, e))
			}
			if ns, ok := nsOf[f.NS]; f.NS == 0 || ok && ns != e.Namespace {
				t.Fatalf("%s: edge %s of namespace %q: NS %d, also that of %q", when, e.ID, e.Namespace, f.NS, ns)
			}
			nsOf[f.NS] = e.Namespace
			if wave.IsAgentSet(f.Agent) {
				// Its agent set holds exactly its provenance's agents.
				agents := map[string]bool{}
				for _, p := range e.Provenance {
					if p.Agent != "" {
						agents[p.Agent] = true
					}
				}
				asked := []string{"nobody"}
				for a := range agents {
					asked = append(asked, a)
				}
				for a := range r.v.agentNums {
					asked = append(asked, a)
				}
				for _, a := range asked {
					num, _ := r.AgentNumber(a)
					if has, known := r.EdgeHasAgent(e.Seq, num); !known || has != agents[a] {
						t.Fatalf("%s: edge %s (agents %v): has %q = %v (known %v)", when, e.ID, agents, a, has, known)
					}
				}
			} else if _, known := r.EdgeHasAgent(e.Seq, 1); known {
				t.Fatalf("%s: edge %s of at most one agent has an agent set", when, e.ID)
			}
			// Its code is that of its embedding, where it has one of the
			// codes' dimension.
			code, scale, ok := r.EmbeddingCode(e.Seq)
			if want := len(e.Embedding) > 0 && len(e.Embedding) == r.v.codes.dim; ok != want {
				t.Fatalf("%s: edge %s with a %d-dimension embedding (codes %d): code held %v", when, e.ID, len(e.Embedding), r.v.codes.dim, ok)
			} else if ok {
				wantCode := make([]int8, len(e.Embedding))
				if ws := wave.Quantize(e.Embedding, wantCode); ws != scale || !slices.Equal(code, wantCode) {
					t.Fatalf("%s: edge %s: code (scale %v) is not its embedding's (scale %v)", when, e.ID, scale, ws)
				}
			}
			sal := r.EdgeSalienceBySeq(e.Seq)
			if sal == nil || !sameSalience(*sal, EdgeSalienceOf(e)) {
				t.Fatalf("%s: edge %s (seq %d): salience %+v, want %+v", when, e.ID, e.Seq, sal, EdgeSalienceOf(e))
			}
			if f.Decay != FactDecayEdge && !salienceIs(f, sal, e.Salience) {
				t.Fatalf("%s: edge %s: facts %+v and salience %+v do not stand for %+v", when, e.ID, f, sal, e.Salience)
			}
			return true
		})
		if len(nsOf) != len(r.v.nsKeys) {
			t.Fatalf("%s: %d namespace numbers in the facts, %d in the view", when, len(nsOf), len(r.v.nsKeys))
		}
		for seq := range uint64(max(len(r.v.edgeFacts), len(r.v.edgeSal))) {
			if _, _, ok := r.EmbeddingCode(seq); !live[seq] && ok {
				t.Fatalf("%s: seq %d has a code and no edge", when, seq)
			}
			if !live[seq] && (r.EdgeFactsBySeq(seq) != nil || r.EdgeSalienceBySeq(seq) != nil && !sameSalience(*r.EdgeSalienceBySeq(seq), EdgeSalience{})) {
				t.Fatalf("%s: seq %d has facts or salience and no edge", when, seq)
			}
		}
		// The walk sees each edge once per direction, with its facts,
		// newest (highest seq) first.
		for id := range r.v.nodes {
			n := 0
			last := uint64(math.MaxUint64)
			r.OutNewestFacts(id, func(seq uint64, f *EdgeFacts, target uint64) bool {
				e := r.EdgeBySeq(seq)
				if e == nil || e.Source != id || *f != viewFacts(r, e) || seq >= last {
					t.Fatalf("%s: out of %s: seq %d (after %d)", when, id, seq, last)
				}
				checkEnd(t, r, when, e, e.Target, target)
				last = seq
				n++
				return true
			})
			last = math.MaxUint64
			r.InNewestFacts(id, func(seq uint64, f *EdgeFacts, source uint64) bool {
				e := r.EdgeBySeq(seq)
				if e == nil || e.Target != id || *f != viewFacts(r, e) || seq >= last {
					t.Fatalf("%s: in of %s: seq %d (after %d)", when, id, seq, last)
				}
				checkEnd(t, r, when, e, e.Source, source)
				last = seq
				n++
				return true
			})
			if n != len(r.v.out[id])+len(r.v.in[id]) {
				t.Fatalf("%s: node %s: %d edges walked, %d in the adjacency", when, id, n, len(r.v.out[id])+len(r.v.in[id]))
			}
		}
	})
}

// checkEnd asserts what an adjacency entry's end seq promises: the node
// found at it, if any, is the edge's end id. After a reopen every end
// with a numbered node is found there.
func checkEnd(t *testing.T, r Reader, when string, e *Edge, id string, end uint64) {
	t.Helper()
	at := r.NodeBySeq(end)
	if at != nil && at.ID != id {
		t.Fatalf("%s: edge %s: the end seq %d is node %s, not %s", when, e.ID, end, at.ID, id)
	}
	if n := r.Node(id); when == "reopened" && n != nil && n.Seq != 0 && at != n {
		t.Fatalf("%s: edge %s: end %s (seq %d) not found at the entry's end seq %d", when, e.ID, id, n.Seq, end)
	}
}

// sameSalience compares salience records bit for bit (a half-life may
// be NaN).
func sameSalience(a, b EdgeSalience) bool {
	return math.Float64bits(a.Score) == math.Float64bits(b.Score) && a.LastUpdated == b.LastUpdated &&
		math.Float64bits(a.HalfLifeS) == math.Float64bits(b.HalfLifeS)
}

// salienceIs reports whether facts f and record sal give s's decayed
// salience: the same function and half-life, bit for bit, and the same
// instant.
func salienceIs(f *EdgeFacts, sal *EdgeSalience, s Salience) bool {
	return f.Decay.Fn() == wave.DecayFn(s.DecayFn) && sameSalience(*sal, EdgeSalience{Score: s.Score, LastUpdated: sal.LastUpdated, HalfLifeS: s.HalfLifeS}) &&
		FactInstant(sal.LastUpdated).Equal(s.LastUpdated)
}

// factsStore is a store on disk whose edge records a test checks, and
// checks again after a reload.
type factsStore struct {
	*Store
	o Options
}

func openFactsStore(t *testing.T) *factsStore {
	t.Helper()
	o := DefaultOptions(t.TempDir())
	o.SyncWrites = false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	fs := &factsStore{Store: s, o: o}
	t.Cleanup(func() { fs.Close() })
	// Each batch's changes carry its edges' facts as the view holds them.
	s.Subscribe(func(ch Changes) {
		if len(ch.EdgeFacts) != len(ch.Edges) {
			t.Errorf("changes of %d edges carry %d facts", len(ch.Edges), len(ch.EdgeFacts))
			return
		}
		s.Read(func(r Reader) {
			for i, e := range ch.Edges {
				if want := viewFacts(r, e); ch.EdgeFacts[i] != want {
					t.Errorf("changes: edge %s: facts %+v, want %+v", e.ID, ch.EdgeFacts[i], want)
				}
			}
		})
	})
	return fs
}

// reopen closes the store, opens it again (the view loaded from
// Badger) and checks its records.
func (fs *factsStore) reopen(t *testing.T) {
	t.Helper()
	fs.reload(t)
	checkFacts(t, fs.Store, "reopened")
}

// reload closes the store and opens it again.
func (fs *factsStore) reload(t *testing.T) {
	t.Helper()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(fs.o)
	if err != nil {
		t.Fatal(err)
	}
	fs.Store = s
}

// putThings puts entities "thing 0" to "thing n-1" of namespace ns and
// returns their ids.
func putThings(b *Batch, ns string, n int) ([]string, error) {
	var ids []string
	for k := range n {
		node, _, err := b.Resolve(ns, NodeEntity, fmt.Sprintf("thing %d", k))
		if err != nil {
			return nil, err
		}
		if err := b.PutNode(node); err != nil {
			return nil, err
		}
		ids = append(ids, node.ID)
	}
	return ids, nil
}

// TestEdgeFactsFollowTheEdges keeps edge facts current through what
// changes an edge: re-observation (confidence, provenance of several
// agents, a wider scope), supersession, deletion, a node merge, and a
// reopen from disk.
func TestEdgeFactsFollowTheEdges(t *testing.T) {
	s := openFactsStore(t)
	ctx := context.Background()
	ns := DefaultNamespace
	if _, err := s.ConfigurePredicate(ctx, Predicate{Name: "located_in", Scope: ns, Cardinality: Single, Status: PredicateActive}, "test", "test"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var ids []string
	var doomed string
	observe := func(i int, agent, pred, place string, conf float64) {
		_, err := s.Update(ctx, func(b *Batch) error {
			if ids == nil {
				var err error
				if ids, err = putThings(b, ns, 6); err != nil {
					return err
				}
			}
			e, _, err := b.Observe(Observation{Namespace: ns, Source: ids[i%3], Target: ids[3+(i/3)%3], Type: EdgeAssertion, Predicate: pred,
				Confidence: conf, At: t0.Add(time.Duration(i) * time.Minute), Location: place, Decay: wave.DecayExp, HalfLife: time.Hour,
				Provenance: Provenance{EpisodeID: "ep-1", Agent: agent, ObservedAt: t0.Add(time.Duration(i) * time.Minute)}})
			if err == nil && pred == "doomed" {
				doomed = e.ID
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		observe(i, "ur5-alpha", fmt.Sprintf("near %d", i%4), "kitchen lab", 0.4)
	}
	checkFacts(t, s.Store, "created")
	for i := range 12 {
		observe(i, "spot-1", fmt.Sprintf("near %d", i%4), "Kitchen Lab", 0.9) // several agents, more confident
	}
	observe(1, "ur5-alpha", "located_in", "", 0.8)
	observe(4, "ur5-alpha", "located_in", "", 0.8) // supersedes the first
	observe(2, "ur5-beta", "doomed", "warehouse", 0.7)
	checkFacts(t, s.Store, "re-observed and superseded")
	if _, err := s.Update(ctx, func(b *Batch) error { return b.DeleteEdge(doomed) }); err != nil {
		t.Fatal(err)
	}
	checkFacts(t, s.Store, "deleted")
	if _, err := s.MergeNodes(ctx, ids[0], ids[1], "test", "same thing"); err != nil {
		t.Fatal(err)
	}
	checkFacts(t, s.Store, "merged")
	superseded := 0
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool {
			if f := r.EdgeFactsBySeq(e.Seq); f.Flags&FactSuperseded != 0 {
				superseded++
			}
			return true
		})
	})
	if superseded == 0 {
		t.Fatal("no superseded edge: the test does not exercise supersession")
	}
	s.reopen(t)
}

// TestFactTime checks which times the facts hold exactly.
func TestFactTime(t *testing.T) {
	for _, c := range []struct {
		t  time.Time
		ok bool
	}{
		{time.Time{}, true}, {time.Unix(0, 0), false}, {time.Unix(0, 1), true}, {time.Unix(-1, 0), true},
		{time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), false}, {time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), true},
	} {
		ns, ok := FactTime(c.t)
		if ok != c.ok || (ok && !c.t.IsZero() && ns != c.t.UnixNano()) || (c.t.IsZero() && ns != 0) {
			t.Errorf("FactTime(%v) = %d, %v; want ok %v", c.t, ns, ok, c.ok)
		}
	}
}

// FactSince must be time.Time.Sub on the instants the counts stand
// for, saturation included.
func TestFactSince(t *testing.T) {
	counts := []int64{0, 1, -1, 1e9, -1e9, 1772000000123456789, -1772000000123456789, math.MaxInt64, math.MinInt64 + 1,
		math.MaxInt64 / 2, math.MinInt64 / 2, 9e18, -9e18}
	for _, now := range counts {
		for _, ns := range counts {
			if now == 0 {
				continue
			}
			if got, want := FactSince(now, ns), FactInstant(now).Sub(FactInstant(ns)); got != want {
				t.Errorf("FactSince(%d, %d) = %d, want %d", now, ns, got, want)
			}
		}
	}
}

// The facts stay one cache line; the salience record is the 24 bytes
// read beside them for the edges a walk scores.
func TestEdgeFactsSizes(t *testing.T) {
	if n := unsafe.Sizeof(EdgeFacts{}); n != 64 {
		t.Errorf("EdgeFacts is %d bytes, want 64", n)
	}
	if n := unsafe.Sizeof(EdgeSalience{}); n != 24 {
		t.Errorf("EdgeSalience is %d bytes, want 24", n)
	}
}

// TestEdgeRecordsFollowRandomChanges puts, re-puts, renumbers, deletes
// and merges random edges of three namespaces, with saliences of every
// decay function (known or not) and times the facts hold exactly or
// not, and checks the facts and salience records against the edges
// after each round and after a reload from Badger.
func TestEdgeRecordsFollowRandomChanges(t *testing.T) {
	s := openFactsStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	times := []func() time.Time{
		func() time.Time { return time.Time{} },
		func() time.Time { return time.Unix(0, 0) }, // not held exactly
		func() time.Time { return t0.Add(time.Duration(rng.Int64N(int64(1000 * time.Hour)))) },
		func() time.Time { return time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC) }, // outside int64 ns
		func() time.Time { return t0.Add(-time.Duration(rng.Int64N(int64(1000 * time.Hour)))) },
	}
	fns := []string{"", "exp", "power", "linear", "bogus", "Exp"}
	salience := func() Salience {
		return Salience{Score: rng.Float64(), DecayFn: fns[rng.IntN(len(fns))], HalfLifeS: []float64{0, 60, 3600 * rng.Float64(), math.NaN()}[rng.IntN(4)],
			LastUpdated: times[rng.IntN(len(times))]()}
	}
	// Embeddings of the codes' dimension (the first one's, 8: the first
	// round has no other, since a batch applies its edges in any order),
	// of another, or none.
	firstRound := true
	embedding := func() []float32 {
		dims := []int{8, 8, 8, 5, 0}
		if firstRound {
			dims = []int{8, 8, 0}
		}
		v := make([]float32, dims[rng.IntN(len(dims))])
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		if len(v) == 0 {
			return nil
		}
		return v
	}
	namespaces := []string{DefaultNamespace, "lab-b", "lab-c"}
	nodes := map[string][]string{} // namespace -> node ids
	var edges []string
	if _, err := s.Update(ctx, func(b *Batch) error {
		for _, ns := range namespaces {
			ids, err := putThings(b, ns, 6)
			if err != nil {
				return err
			}
			nodes[ns] = ids
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	renumbered, merged := 0, 0
	for round := range 12 {
		if _, err := s.Update(ctx, func(b *Batch) error {
			for range 20 {
				ns := namespaces[rng.IntN(len(namespaces))]
				ids := nodes[ns]
				e := &Edge{Namespace: ns, Source: ids[rng.IntN(len(ids))], Target: ids[rng.IntN(len(ids))], Type: []EdgeType{EdgeCausal, EdgeTemporal, EdgeToolUse}[rng.IntN(3)],
					Confidence: rng.Float64(), Salience: salience(),
					ValidFrom: times[rng.IntN(len(times))](), ValidTo: times[rng.IntN(len(times))]()}
				if e.Source == e.Target {
					continue
				}
				e.Embedding = embedding()
				if err := b.PutEdge(e); err != nil {
					return err
				}
				edges = append(edges, e.ID)
			}
			for range 8 { // re-observed: a new salience, maybe another agent
				if e := b.Edge(edges[rng.IntN(len(edges))]); e != nil {
					e.Salience, e.Confidence = salience(), rng.Float64()
					if rng.IntN(3) == 0 {
						e.Embedding = embedding()
					}
					for range rng.IntN(3) {
						e.Provenance = append(e.Provenance, Provenance{EpisodeID: "ep", Agent: fmt.Sprintf("robot-%d", rng.IntN(4)), ObservedAt: t0})
					}
					if err := b.PutEdge(e); err != nil {
						return err
					}
				}
			}
			for range 3 {
				if err := b.DeleteEdge(edges[rng.IntN(len(edges))]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		checkFacts(t, s.Store, fmt.Sprintf("round %d: put and deleted", round))
		firstRound = false
		if s.v.codes.dim != 8 {
			t.Fatalf("round %d: codes of %d dimensions, want the first embedding's 8", round, s.v.codes.dim)
		}
		// Renumber a few edges in the view (the store does not, the view
		// supports it).
		s.mu.Lock()
		for range 3 {
			if e := s.v.edges.get(s.v, edges[rng.IntN(len(edges))]); e != nil {
				c := cloneEdge(e)
				c.Seq = 1<<20 + uint64(renumbered)
				s.v.putEdge(c)
				renumbered++
			}
		}
		s.mu.Unlock()
		checkFacts(t, s.Store, fmt.Sprintf("round %d: renumbered", round))
		if round%3 == 2 {
			ns := namespaces[round%len(namespaces)]
			ids := nodes[ns]
			if _, err := s.MergeNodes(ctx, ids[0], ids[len(ids)-1], "test", "same thing"); err != nil {
				t.Fatal(err)
			}
			nodes[ns] = ids[:len(ids)-1]
			merged++
			checkFacts(t, s.Store, fmt.Sprintf("round %d: merged", round))
		}
	}
	// The rounds must have made what the records distinguish.
	decays := map[FactDecay]int{}
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool {
			decays[r.EdgeFactsBySeq(e.Seq).Decay]++
			return true
		})
	})
	for d := FactDecayEdge; d <= FactDecayLinear; d++ {
		if decays[d] == 0 {
			t.Fatalf("no edge with decay code %d (%v): the test does not exercise it", d, decays)
		}
	}
	if renumbered == 0 || merged == 0 {
		t.Fatalf("renumbered %d, merged %d", renumbered, merged)
	}
	s.reopen(t)
}

// TestEdgeCodesMadeByConcurrentReaders has readers make codes while
// others read them and a writer changes embeddings: every code a reader
// gets is that of the embedding its edge has (run with -race, it also
// checks that making a code on first use is safe beside other readers).
func TestEdgeCodesMadeByConcurrentReaders(t *testing.T) {
	s := openFactsStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	vec := func() []float32 {
		v := make([]float32, 16)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	var seqs []uint64
	var ids []string // of the edges
	if _, err := s.Update(ctx, func(b *Batch) error {
		nodes, err := putThings(b, DefaultNamespace, 8)
		if err != nil {
			return err
		}
		for i := range 300 {
			e := &Edge{Source: nodes[i%8], Target: nodes[(i+1)%8], Type: EdgeAssertion, Assertion: &Assertion{Predicate: fmt.Sprintf("p%d", i)}, Embedding: vec()}
			if err := b.PutEdge(e); err != nil {
				return err
			}
			seqs, ids = append(seqs, e.Seq), append(ids, e.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			made := 0
			for {
				select {
				case <-done:
					if made == 0 {
						errs <- fmt.Errorf("a reader got no code")
					} else {
						errs <- nil
					}
					return
				default:
				}
				var bad error
				s.Read(func(r Reader) {
					for _, seq := range seqs {
						code, scale, ok := r.EmbeddingCode(seq)
						if !ok {
							continue // another reader is making it
						}
						made++
						want := make([]int8, 16)
						if ws := wave.Quantize(r.EdgeBySeq(seq).Embedding, want); ws != scale || !slices.Equal(code, want) {
							bad = fmt.Errorf("seq %d: a code that is not its edge's embedding's", seq)
							return
						}
					}
				})
				if bad != nil {
					errs <- bad
					return
				}
			}
		}()
	}
	for range 30 {
		if _, err := s.Update(ctx, func(b *Batch) error {
			for range 10 {
				e := b.Edge(ids[rng.IntN(len(ids))])
				if e == nil {
					continue
				}
				e.Embedding = vec()
				if err := b.PutEdge(e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestEdgeFactsMarkUnitEmbeddings: FactUnit is set exactly for an edge
// whose embedding has unit length.
func TestEdgeFactsMarkUnitEmbeddings(t *testing.T) {
	unit := []float32{0.6, 0.8, 0}
	for _, c := range []struct {
		emb  []float32
		want bool
	}{{unit, true}, {[]float32{1.2, 1.6, 0}, false}, {[]float32{0, 0, 0}, false}, {[]float32{}, false}, {nil, false}} {
		f := EdgeFactsOf(&Edge{ID: "e", Type: EdgeAssertion, Embedding: c.emb})
		if got := f.Flags&FactUnit != 0; got != c.want {
			t.Errorf("embedding %v: FactUnit %v, want %v", c.emb, got, c.want)
		}
	}
}
