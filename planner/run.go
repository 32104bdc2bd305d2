package planner

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// maxScan bounds how many of a hub's edges one expansion step looks at:
// the newest, half from each direction (adjacency is in insertion, so
// time, order). An agent or a tool seen in thousands of episodes stays
// cheap to expand, and what it did lately is what the planner sees.
const maxScan = 512

// run is the state of one request through the pipeline. What it keeps
// (nodes and edges with their scores) lives in st, pooled between
// requests and indexed by seq, so the inner loops hash no strings.
type run struct {
	p         *Planner
	req       *Request
	ns        string
	q         []float32
	qNorm     float32 // ‖q‖, once codeBounds needs it
	now       time.Time
	principal particle.Principal
	r         particle.Reader
	guard     *particle.Guard // policy bound to principal, for guardFor
	guardFor  particle.Reader // the read the guard belongs to

	st        *runState
	canonLoc  string // the request's location, canonical, once asked
	unknowns  []Unknown
	truncated bool

	// temporal ranks edges by closeness in time to now (as_of, or the
	// time window's end); history keeps superseded facts.
	temporal, history bool

	fc      factCheck // the request's constraints for edge facts, once compiled
	fcReady bool

	search wave.SearchStats // the prefilter's vector search's work
}

// state is the run's pooled state, taken on first use.
func (run *run) state() *runState {
	if run.st == nil {
		run.st = getRunState()
	}
	return run.st
}

// release returns the run's pooled state; the run must not be used
// after.
func (run *run) release() {
	putRunState(run.st)
	run.st = nil
}

// facts is the run's fact check, compiled on first use.
func (run *run) facts() *factCheck {
	if !run.fcReady {
		run.fc, run.fcReady = run.factCheck(), true
	}
	return &run.fc
}

// admitsAt is admits for edge e whose view facts are f (nil: none): the
// facts decide most edges without reading e (factCheck), admits the
// rest. Every caller that holds an edge goes through it, or through
// admitsSeq.
func (run *run) admitsAt(e *particle.Edge, f *particle.EdgeFacts) bool {
	if f != nil {
		if admit, decided := run.facts().decide(e.Seq, f); decided {
			return admit
		}
	}
	return run.admits(e)
}

// admitsSeq is admitsAt for the edge at seq, whose facts are f: the
// edge is read only when the facts cannot decide.
func (run *run) admitsSeq(seq uint64, f *particle.EdgeFacts) bool {
	if admit, decided := run.facts().decide(seq, f); decided {
		return admit
	}
	return run.admits(run.r.EdgeBySeq(seq))
}

// admits applies every constraint of the request to an edge.
func (run *run) admits(e *particle.Edge) bool {
	req := run.req
	if e == nil || !run.policy().EdgeVisible(e) {
		return false
	}
	if e.Confidence < req.MinConfidence {
		return false
	}
	if req.AsOf != nil {
		// What was valid then, as the graph knew it then (knowledge is
		// dated by observation time, so replayed history answers as it
		// was lived): a fact first observed later is absent; an end
		// observed later did not end it yet.
		at := *req.AsOf
		if e.ValidFrom.After(at) {
			return false
		}
		if !e.ValidTo.IsZero() && !e.ValidTo.After(at) && !e.EndedAt.After(at) {
			return false
		}
	} else if e.Status == particle.StatusSuperseded && !run.history {
		return false
	}
	if tw := req.TimeWindow; tw != nil {
		if !e.Scope.TimeRange.Overlaps(particle.TimeRange{From: tw.From, To: tw.To}) {
			return false
		}
	}
	if req.Location != "" && e.Scope.Location != "" && e.Scope.Location != req.Location && !canonicalIs(e.Scope.Location, run.location()) {
		return false
	}
	if req.SameAgent {
		other := false
		for i := range e.Provenance {
			pv := &e.Provenance[i] // 88 bytes: read in place
			if pv.Agent == req.Agent {
				return true
			}
			if pv.Agent != "" {
				other = true
			}
		}
		if other {
			return false
		}
	}
	return true
}

// location is the request's location, canonical (computed once).
func (run *run) location() string {
	if run.canonLoc == "" {
		run.canonLoc = particle.Canonical(run.req.Location)
	}
	return run.canonLoc
}

// canonicalIs reports whether particle.Canonical(s) is c, without
// building it (admits asks for every candidate edge with a location).
func canonicalIs(s, c string) bool {
	j, space := 0, false
	var buf [utf8.UTFMax]byte
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			if j >= len(c) || c[j] != ' ' {
				return false
			}
			j++
			space = false
		}
		n := utf8.EncodeRune(buf[:], unicode.ToLower(r))
		if j+n > len(c) || string(buf[:n]) != c[j:j+n] {
			return false
		}
		j += n
	}
	return j == len(c)
}

// episodeAdmits applies the request's constraints to an episode:
// policy, the same agent when asked, and the time window.
func (run *run) episodeAdmits(ep *particle.Episode) bool {
	return run.policy().EpisodeVisible(ep) && (!run.req.SameAgent || ep.Agent == run.req.Agent) && run.episodeInWindow(ep)
}

func (run *run) episodeInWindow(ep *particle.Episode) bool {
	tw := run.req.TimeWindow
	if tw == nil {
		return true
	}
	return particle.TimeRange{From: ep.StartTime, To: ep.EndTime}.Overlaps(particle.TimeRange{From: tw.From, To: tw.To})
}

// addNode keeps n (if the request may see it) with a score, or raises
// the score, lowers the hop and marks the seed of a node kept before. It
// reports whether n was new to the run.
func (run *run) addNode(n *particle.Node, score float64, hop int, seed bool) bool {
	if n == nil || n.Namespace != run.ns || !run.policy().NodeVisible(n) {
		return false
	}
	st := run.state()
	if i, ok := st.nodeIndex(n); ok {
		rn := &st.nodes[i]
		if score > rn.score {
			rn.score = score
		}
		if hop < rn.hop {
			rn.hop = hop
		}
		rn.seed = rn.seed || seed
		return false
	}
	if n.Seq != 0 {
		st.nodeAt.put(n.Seq, int32(len(st.nodes)))
	}
	st.nodes = append(st.nodes, runNode{n: n, score: score, hop: hop, seed: seed})
	return true
}

// addEdge keeps a seed edge, scored alone.
func (run *run) addEdge(e *particle.Edge) {
	st := run.state()
	if !st.hasEdge(e, e.Seq) {
		sal := run.salience(e)
		st.keepEdge(runEdge{e: e, score: run.scoreEdge(e, sal), salience: sal}, e.Seq)
	}
}

func (run *run) full() bool {
	st := run.state()
	return len(st.nodes)+len(st.edges) >= run.req.Budget
}

// byScore orders node indexes best first, stably.
func (st *runState) byScore(ids []int32) {
	slices.SortStableFunc(ids, func(a, b int32) int { return cmp.Compare(st.nodes[b].score, st.nodes[a].score) })
}

// edgeCand is an edge an expansion step considers, held by seq: its
// facts admit it and, with its salience record, give the part of its
// score that needs no embedding, and the int8 code of its embedding
// (by seq) its similarity, so the edge itself is read only to keep it,
// where the records defer to it, or for the embedding of an edge
// without a code.
type edgeCand struct {
	seq   uint64
	f     *particle.EdgeFacts // the view's; nil: read everything from e
	e     *particle.Edge      // nil until read
	score float64
	// in: the edge came from the walked node's incoming list (its
	// source is the node reached), not its outgoing one.
	in bool
	// end is the seq of the node reached, as the adjacency has it (see
	// particle.Reader.OutNewestFacts).
	end uint64
	// salience is the edge's decayed salience, as staticScores found it
	// from its salience record (the answer reports it).
	salience float64
}

// edge is c's edge, read on first use.
func (run *run) edge(c *edgeCand) *particle.Edge {
	if c.e == nil {
		c.e = run.r.EdgeBySeq(c.seq)
	}
	return c.e
}

// expand walks out from the seeds, hop by hop, taking each node's best
// admissible edges, until the hops or the budget run out.
func (run *run) expand() {
	r, st := run.r, run.state()
	cands := &st.cands
	st.frontier = st.frontier[:0]
	for i := range st.nodes {
		st.frontier = append(st.frontier, int32(i))
	}
	for hop := 1; hop <= run.req.Hops && len(st.frontier) > 0; hop++ {
		st.byScore(st.frontier)
		st.next = st.next[:0]
		for _, fi := range st.frontier {
			if run.full() {
				run.truncated = true
				return
			}
			from := st.nodes[fi].n
			*cands = (*cands)[:0]
			limit, scanned, in := maxScan/2, 0, false
			collect := func(seq uint64, f *particle.EdgeFacts, end uint64) bool {
				scanned++
				if _, kept := st.edgeAt.get(seq); !kept && run.admitsSeq(seq, f) {
					*cands = append(*cands, edgeCand{seq: seq, f: f, in: in, end: end})
				}
				// Stop at the candidate budget, or after looking at four
				// times as many edges when constraints turn most away.
				return len(*cands) < limit && scanned < 4*limit
			}
			r.OutNewestFacts(from.ID, collect)
			limit, in = maxScan, true
			r.InNewestFacts(from.ID, collect)
			if !run.keepBest(from, hop, run.fanoutFor()) {
				return
			}
		}
		st.frontier, st.next = st.next, st.frontier
	}
}

// keepBestResumed counts the expansion steps that went on past a fanout
// capped at the budget's room (keepBest), for the tests.
var keepBestResumed atomic.Int64

// fanoutToBudget caps a node's fanout at the items the budget has left
// (fanoutFor); a variable for the test that checks the cap changes no
// answer.
var fanoutToBudget = true

// fanoutFor is how many of a node's candidates an expansion step scores
// and keeps: PerNodeFanout, or fewer once the budget has less room
// left. Each edge kept takes an item (its node may take another), so no
// more than that room can be kept before the budget is full, and the
// best that many are the first of the best PerNodeFanout: their scores
// are all that need computing.
func (run *run) fanoutFor() int {
	fan := run.p.opts.PerNodeFanout
	st := run.state()
	if room := run.req.Budget - len(st.nodes) - len(st.edges); fanoutToBudget && room < fan {
		return max(1, room)
	}
	return fan
}

// keepBest scores the candidates st.cands of node from, reached at hop,
// and keeps the best fan of them, best first, with the nodes they reach,
// until the budget is full; it reports whether the budget has room left.
// Where fan is under PerNodeFanout and the first fan leave the budget
// room (a candidate whose other end is gone takes no item, nor does a
// self-loop met again from its other list), it goes on
// with those after them, as far as the best PerNodeFanout: what keeping
// the best PerNodeFanout in turn would have done.
func (run *run) keepBest(from *particle.Node, hop, fan int) bool {
	r, st := run.r, run.state()
	most := run.p.opts.PerNodeFanout
	done := 0 // the candidates already taken in turn
	for {
		cs := st.cands
		run.scoreCands(cs, fan)
		cs = bestCands(cs, fan)
		// The edges kept and the nodes reached are read below, each
		// at a random address: the edge's pointer by seq; the node's
		// pointer, its namespace, seq, embedding header and belief (four
		// of its five lines) and its embedding's code (scoreNode).
		// Hinted first, in passes (the pointers, then what they point
		// to, arrived or on its way), their misses overlap instead of
		// following one another.
		for i := done; i < len(cs); i++ {
			r.HintBySeq(cs[i].seq, cs[i].end)
		}
		for i := done; i < len(cs); i++ {
			if on := r.NodeBySeq(cs[i].end); on != nil {
				wave.PrefetchRange(unsafe.Pointer(on), unsafe.Sizeof(particle.Node{}))
				r.HintEmbeddingCode(cs[i].end)
			}
		}
		for i := done; i < len(cs); i++ {
			if run.full() {
				run.truncated = true
				return false
			}
			c := &cs[i]
			e := run.edge(c)
			// The node reached, by its seq in the adjacency, else by
			// its id; the list the edge came from says which end it
			// is. (Hashing the id, or comparing it with the walked
			// node's, reads both from memory: a miss apiece.)
			on := r.NodeBySeq(c.end)
			if on == nil {
				other := e.Target
				if c.in {
					other = e.Source
				}
				if on = r.Node(other); on == nil {
					continue
				}
			}
			src, dst := from, on
			if c.in {
				src, dst = on, from
			}
			st.keepEdge(runEdge{e: e, score: c.score, salience: c.salience, src: src, dst: dst}, c.seq)
			own := run.ownScore(on)
			if run.addNode(on, own*0.5+c.score*0.5, hop, false) {
				last := &st.nodes[len(st.nodes)-1]
				last.own, last.ownOK = own, true
				st.next = append(st.next, int32(len(st.nodes)-1))
			}
		}
		if fan >= most || len(st.cands) <= fan {
			return true // every one of the best PerNodeFanout taken
		}
		if run.full() {
			run.truncated = true // with candidates left to take
			return false
		}
		// The best PerNodeFanout begin with the best fan, in order:
		// the rest are taken after them.
		done, fan = len(cs), most
		keepBestResumed.Add(1)
	}
}

// bestCands reorders cs to its best n by score, best first (ties by
// seq), and returns them. Candidates that scoreCands left unscored
// (-Inf) are moved past the scored ones first and sorted only when
// fewer than n are scored: a hub's hundreds of candidates, of which
// scoreCands scores a few dozen, are not all sorted.
func bestCands(cs []edgeCand, n int) []edgeCand {
	scored := len(cs)
	if len(cs) > n {
		scored = 0
		for i := range cs {
			if !math.IsInf(cs[i].score, -1) {
				cs[scored], cs[i] = cs[i], cs[scored]
				scored++
			}
		}
		if scored < n {
			scored = len(cs)
		}
	}
	slices.SortFunc(cs[:scored], func(a, b edgeCand) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return cs[:min(scored, n)]
}

// rerank scores every node once more against the query (edges were
// scored as they were admitted).
func (run *run) rerank() {
	st := run.state()
	for i := range st.nodes {
		rn := &st.nodes[i]
		if !rn.ownOK {
			rn.own, rn.ownOK = run.scoreNode(rn.n), true
		}
		rn.score = math.Max(rn.score, rn.own)
	}
}

// ownScore is scoreNode(n), from the run's node when it holds n and
// scored it before.
func (run *run) ownScore(n *particle.Node) float64 {
	st := run.state()
	if i, ok := st.nodeIndex(n); ok {
		rn := &st.nodes[i]
		if !rn.ownOK {
			rn.own, rn.ownOK = run.scoreNode(n), true
		}
		return rn.own
	}
	return run.scoreNode(n)
}

// scoreEdge is cosine × decayed salience × confidence, for e whose
// decayed salience is sal (run.salience).
func (run *run) scoreEdge(e *particle.Edge, sal float64) float64 {
	s := run.similarity(e) * (run.p.opts.SalienceFloor + sal) * e.Confidence
	if run.temporal {
		s *= run.recency(e.ValidFrom, e.ValidTo)
	}
	return s
}

// recencyScale is the time over which a fact's recency weight halves
// from 1 towards 0.5 (temporal strategy).
const recencyScale = 24 * time.Hour

// recency weighs a fact valid from from to to by how close its
// validity is to the reference time: 1 for a fact valid at it, towards
// 0.5 for one long before or after.
func (run *run) recency(from, to time.Time) float64 {
	ref := run.now
	if tw := run.req.TimeWindow; tw != nil && !tw.To.IsZero() && tw.To.Before(ref) {
		ref = tw.To
	}
	var d time.Duration
	switch {
	case from.After(ref):
		d = from.Sub(ref)
	case !to.IsZero() && to.Before(ref):
		d = ref.Sub(to)
	}
	return 0.5 + 0.5/(1+float64(d)/float64(recencyScale))
}

// recencyOf is c's recency, from its facts where they hold its times
// exactly.
func (run *run) recencyOf(c *edgeCand) float64 {
	if f := c.f; f != nil && f.Flags&particle.FactExact != 0 {
		return run.recency(particle.FactInstant(f.ValidFrom), particle.FactInstant(f.ValidTo))
	}
	e := run.edge(c)
	return run.recency(e.ValidFrom, e.ValidTo)
}

// confidenceOf is c's confidence (its facts hold it exactly).
func (run *run) confidenceOf(c *edgeCand) float64 {
	if c.f != nil {
		return c.f.Confidence
	}
	return run.edge(c).Confidence
}

// salienceOf is what c's decayed salience is computed from: its score,
// its age at run.now in seconds and its decay, from its salience record
// where that stands for the edge's salience exactly. now is run.now as
// particle.FactTime holds it, 0 where it does not (the age is then
// computed on times).
func (run *run) salienceOf(c *edgeCand, now int64) (score, ageS float64, k decayKey) {
	if f := c.f; f != nil && f.Decay != particle.FactDecayEdge {
		s := run.r.EdgeSalienceBySeq(c.seq)
		var age time.Duration
		if now != 0 {
			age = particle.FactSince(now, s.LastUpdated)
		} else {
			age = run.now.Sub(particle.FactInstant(s.LastUpdated))
		}
		return s.Score, age.Seconds(), decayKey{string(f.Decay.Fn()), s.HalfLifeS}
	}
	e := run.edge(c)
	return e.Salience.Score, run.now.Sub(e.Salience.LastUpdated).Seconds(), decayKey{e.Salience.DecayFn, e.Salience.HalfLifeS}
}

// similarity is the cosine of q and e's embedding mapped to [0, 1], 0.5
// for an edge without one: the factor of an edge's score that reads its
// embedding. A seed edge is scored by it; an expansion step scores its
// candidates by their codes where they have one (codeSimilarity).
func (run *run) similarity(e *particle.Edge) float64 {
	if len(e.Embedding) == len(run.q) {
		return min(cos01(wave.Dot(run.q, e.Embedding)), 1)
	}
	return 0.5
}

// scoreCands sets the scores of a candidate set, as scoreEdge would
// give them (saliences are decayed with gonum over each group of
// candidates that share decay parameters) but for the similarity of a
// candidate with a code (codeSimilarity), for the best fanout of them
// and for as few others as it can: the rest get -Inf. A candidate's
// score is its similarity times the rest of it (decayed salience,
// confidence, recency), which needs no embedding; the similarity is
// bounded by 1, or tighter by the int8 code of the embedding
// (codeBounds). Candidates are scored in order of that bound until the
// next bound is below the fanout-th best score found.
//
// A candidate with a code is scored by it: its code was read for its
// bound, and its float32 embedding is 1.5 KB behind a pointer in the
// edge, two reads at random addresses. Scored by their codes, the
// medium bench's expansion took 0.80-0.81 of its time per query
// (median) against their embeddings (BENCHMARKS.md, seventy-sixth
// round).
func (run *run) scoreCands(cands []edgeCand, fanout int) {
	static := run.staticScores(cands)
	bounds, sims := run.codeBounds(cands, static)
	if len(cands) <= fanout {
		// Every candidate is scored: the embeddings of those without a
		// code are hinted first, so that the misses overlap (as below).
		run.hintEmbeddings(cands, sims, nil)
		for i := range cands {
			cands[i].score = static[i] * run.codeSimilarity(&cands[i], sims[i])
		}
		return
	}
	st := run.state()
	order := slices.Grow(st.order[:0], len(cands))[:len(cands)]
	for i, b := range bounds {
		order[i] = boundKey(b, i)
	}
	slices.Sort(order)
	st.order = order
	best := &st.best
	best.k, best.h = fanout, best.h[:0]
	// The first fanout in order are scored whatever their bounds: the
	// embeddings of those without a code are hinted first.
	run.hintEmbeddings(cands, sims, order[:fanout])
	for j, key := range order {
		i := uint32(key)
		// Keys order the bounds as float32s: the next float32 up
		// bounds this candidate and, the order being by key, every one
		// after it.
		if best.full() && float64(math.Nextafter32(float32(bounds[i]), float32(math.Inf(1)))) < best.min() {
			for _, rest := range order[j:] {
				cands[uint32(rest)].score = math.Inf(-1)
			}
			break
		}
		cands[i].score = static[i] * run.codeSimilarity(&cands[i], sims[i])
		best.push(cands[i].score)
	}
}

// codeSimilarity is c's similarity for its score: est, the dot product
// of the query with the int8 code of c's embedding (codeBounds), mapped
// as similarity maps the cosine; run.similarity of c's edge when c has
// no code (est is NaN). The code's estimate is within wave.CodeBound
// of the float32 dot product: for a unit query and a unit embedding of
// 384 dimensions, about 0.01 at worst (every component off by half a
// step, all the same way) and a few 1e-4 as the errors fall.
func (run *run) codeSimilarity(c *edgeCand, est float32) float64 {
	if !math.IsNaN(float64(est)) {
		return min(cos01(est), 1)
	}
	return run.similarity(run.edge(c))
}

// hintEmbeddings hints into the caches the embeddings of the candidates
// without a code (sims NaN), of those at the keys' positions (boundKey)
// or of all when keys is nil: first the edges' lines that name them
// (hintEmbeddingHeader), then the embeddings.
func (run *run) hintEmbeddings(cands []edgeCand, sims []float32, keys []uint64) {
	n := len(cands)
	if keys != nil {
		n = len(keys)
	}
	// uncoded is the candidate at position j, and whether it has no code.
	uncoded := func(j int) (int, bool) {
		i := j
		if keys != nil {
			i = int(uint32(keys[j]))
		}
		return i, math.IsNaN(float64(sims[i]))
	}
	for j := range n {
		if i, ok := uncoded(j); ok {
			hintEmbeddingHeader(run.edge(&cands[i]))
		}
	}
	for j := range n {
		if i, ok := uncoded(j); ok {
			wave.Prefetch(run.edge(&cands[i]).Embedding)
		}
	}
}

// hintEmbeddingHeader hints into the caches the line of e that holds
// its embedding's slice header. An edge is read at a random address,
// and hinting its embedding reads that line first: a pass of these
// hints before the pass that hints the embeddings lets the edges'
// misses overlap one another, where the embeddings' hints would each
// wait for their own.
func hintEmbeddingHeader(e *particle.Edge) {
	wave.PrefetchRange(unsafe.Pointer(&e.Embedding), unsafe.Sizeof(e.Embedding))
}

// boundKey is candidate i's sort key for a score bound b: keys in
// increasing order are bounds, as float32s, in decreasing order (ties
// by i). Sorting integer keys is several times faster than sorting
// indexes by a comparison of their bounds.
func boundKey(b float64, i int) uint64 {
	return uint64(^wave.OrderedBits(float32(b)))<<32 | uint64(uint32(i))
}

// codeBounds returns the candidates' score bounds and the dot products
// of the query with the int8 codes of their embeddings
// (particle.Reader.EmbeddingCode, wave.CodeDot; NaN for a candidate
// without a code), a read of 384 bytes at their seq instead of the edge
// and its 1.5 KB embedding. A bound is the static score (for a similarity of at
// most 1) × the similarity of the code's dot product plus its error
// (wave.CodeBound): never below the score, from the code or from the
// embedding, as scoreCands needs. A candidate without a code keeps its
// static score. The results are scratch, valid until the next call.
func (run *run) codeBounds(cands []edgeCand, static []float64) (bounds []float64, sims []float32) {
	st := run.state()
	bounds = append(st.bounds[:0], static...)
	st.bounds = bounds
	nan := float32(math.NaN())
	sims = slices.Grow(st.sims[:0], len(cands))[:len(cands)]
	st.sims = sims
	if run.qNorm == 0 {
		run.qNorm = float32(math.Sqrt(float64(wave.Dot(run.q, run.q))))
	}
	dim := len(run.q)
	// The codes first, each hinted into the caches, then their dot
	// products: the codes lie at random seqs, and their misses overlap.
	// codes is all nil here (cleared below at every call's end): a
	// candidate without a code stays nil.
	codes := slices.Grow(st.codes[:0], len(cands))[:len(cands)]
	scales := slices.Grow(st.scales[:0], len(cands))[:len(cands)]
	st.codes, st.scales = codes, scales
	for i := range cands {
		sims[i] = nan
		if bounds[i] < 0 || cands[i].seq == 0 {
			continue // a similarity bound only bounds a non-negative factor; no seq, no code
		}
		code, scale, ok := run.r.EmbeddingCode(cands[i].seq)
		if !ok || len(code) != dim {
			continue
		}
		codes[i], scales[i] = code, scale
		wave.PrefetchCode(code)
	}
	for i, code := range codes {
		if code == nil {
			continue
		}
		sims[i] = wave.CodeDot(run.q, code, scales[i])
		bounds[i] *= min(cos01(sims[i]+wave.CodeBound(run.qNorm, scales[i], dim)), 1)
	}
	clear(codes) // the view's memory: not kept past the call
	return bounds, sims
}

// staticScores is every candidate's score without its similarity
// factor: (floor + decayed salience) × confidence, × recency for the
// temporal strategy. It reads the candidates' records, and their edges
// only where the records defer. The result is scratch, valid until the
// next call.
func (run *run) staticScores(cands []edgeCand) []float64 {
	st := run.state()
	n := len(cands)
	st.scores = slices.Grow(st.scores[:0], n)[:n]
	st.ages = slices.Grow(st.ages[:0], n)[:n]
	groups := st.groups[:0]
	now, ok := particle.FactTime(run.now)
	if !ok {
		now = 0
	}
	// Each candidate's salience record and code state lie at its seq,
	// at random: hinted first, their misses overlap (codeBounds reads
	// the code states next).
	for i := range cands {
		if cands[i].f != nil {
			run.r.HintEdgeScore(cands[i].seq)
		}
	}
	for i := range cands {
		var k decayKey
		st.scores[i], st.ages[i], k = run.salienceOf(&cands[i], now)
		g := slices.IndexFunc(groups, func(g decayGroup) bool { return g.key == k })
		if g < 0 {
			// Reuse the index list a group of an earlier call left.
			if len(groups) < cap(groups) {
				groups = groups[:len(groups)+1]
				groups[len(groups)-1].key = k
				groups[len(groups)-1].idx = groups[len(groups)-1].idx[:0]
			} else {
				groups = append(groups, decayGroup{key: k})
			}
			g = len(groups) - 1
		}
		groups[g].idx = append(groups[g].idx, i)
	}
	st.groups = groups
	for _, g := range groups {
		d := decayOf(g.key.fn, g.key.halfLifeS)
		if len(g.idx) == n {
			d.ApplyBatch(st.scores, st.scores, st.ages)
			break
		}
		m := len(g.idx)
		s, a := slices.Grow(st.groupS[:0], m)[:m], slices.Grow(st.groupA[:0], m)[:m]
		st.groupS, st.groupA = s, a
		for j, i := range g.idx {
			s[j], a[j] = st.scores[i], st.ages[i]
		}
		d.ApplyBatch(s, s, a)
		for j, i := range g.idx {
			st.scores[i] = s[j]
		}
	}
	for i := range cands {
		c := &cands[i]
		c.salience = st.scores[i]
		st.scores[i] = (run.p.opts.SalienceFloor + st.scores[i]) * run.confidenceOf(c)
		if run.temporal {
			st.scores[i] *= run.recencyOf(c)
		}
	}
	return st.scores
}

// topFloats keeps the k largest values pushed, in a min-heap.
type topFloats struct {
	k int
	h []float64
}

func (t *topFloats) full() bool   { return len(t.h) == t.k }
func (t *topFloats) min() float64 { return t.h[0] }

func (t *topFloats) push(v float64) {
	if len(t.h) < t.k {
		t.h = append(t.h, v)
		for i := len(t.h) - 1; i > 0 && t.h[(i-1)/2] > t.h[i]; i = (i - 1) / 2 {
			t.h[i], t.h[(i-1)/2] = t.h[(i-1)/2], t.h[i]
		}
		return
	}
	if v <= t.h[0] {
		return
	}
	t.h[0] = v
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(t.h) {
			return
		}
		if c+1 < len(t.h) && t.h[c+1] < t.h[c] {
			c++
		}
		if t.h[i] <= t.h[c] {
			return
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}

type decayKey struct {
	fn        string
	halfLifeS float64
}

type decayGroup struct {
	key decayKey
	idx []int
}

// salience is e's salience decayed to the run's time.
func (run *run) salience(e *particle.Edge) float64 {
	return decayOf(e.Salience.DecayFn, e.Salience.HalfLifeS).Apply(e.Salience.Score, e.Salience.LastUpdated, run.now)
}

// decayOf is the decay a salience record names: its function and its
// half-life in seconds.
func decayOf(fn string, halfLifeS float64) wave.Decay {
	return wave.Decay{Fn: wave.DecayFn(fn), HalfLife: time.Duration(halfLifeS * float64(time.Second))}
}

// scoreNode is n's own score: its similarity to the query × (0.5 + 0.5
// × belief), the similarity that of the int8 code of its embedding
// where it has one (as an expansion step's edges, codeSimilarity: 384
// bytes by seq, hinted with the node, instead of 1.5 KB behind a
// pointer in it), else of its embedding.
func (run *run) scoreNode(n *particle.Node) float64 {
	sim := 0.5
	if len(n.Embedding) == len(run.q) {
		if code, scale, ok := run.r.EmbeddingCode(n.Seq); ok && len(code) == len(run.q) {
			sim = min(cos01(wave.CodeDot(run.q, code, scale)), 1)
		} else {
			sim = cos01(wave.Dot(run.q, n.Embedding))
		}
	}
	return sim * (0.5 + 0.5*n.Belief.Score)
}

func cos01(c float32) float64 { return (float64(c) + 1) / 2 }

// stitch orders the kept nodes and edges by score and fills the answer,
// every edge with its provenance and confidence.
func (run *run) stitch(ans *Answer) {
	r, st := run.r, run.state()
	hyps := ans.Hypotheses[:0]
	if hyps == nil {
		hyps = []string{}
	}
	*ans = Answer{Nodes: slices.Grow(ans.Nodes[:0], len(st.nodes)), Edges: slices.Grow(ans.Edges[:0], len(st.edges)), Unknowns: run.unknowns,
		Hypotheses: hyps, Contradictions: []Contradiction{}, Truncated: run.truncated, keep: ans.keep}
	if ans.Unknowns == nil {
		ans.Unknowns = []Unknown{}
	}
	order := st.edgeOrder[:0]
	for i := range st.edges {
		order = append(order, int32(i))
	}
	slices.SortFunc(order, func(a, b int32) int {
		ea, eb := &st.edges[a], &st.edges[b]
		if c := cmp.Compare(eb.score, ea.score); c != 0 {
			return c
		}
		return strings.Compare(ea.e.ID, eb.e.ID)
	})
	st.edgeOrder = order
	guard := run.policy() // provenance and episode lists name only episodes the caller may see
	// end is an edge's end, id, as its node's own id string (the run's
	// node, else the graph's: particle.Reader.EdgeEnds, by seq) and the
	// node's name. The encoders then read the id's bytes once, at the
	// node, instead of once more in each edge's own copy (a miss apiece
	// in the daemon). A run's node is the end's by construction (expand
	// keeps the node it walked from or looked up), so the ids are not
	// compared, which would read both from memory.
	end := func(n *particle.Node, id string) (string, string) {
		if n == nil {
			return id, ""
		}
		return n.ID, n.Name
	}
	// The edges lie at random addresses and are read whole: hinted
	// first, their misses overlap.
	for i := range st.edges {
		wave.PrefetchRange(unsafe.Pointer(st.edges[i].e), unsafe.Sizeof(particle.Edge{}))
	}
	for _, i := range order {
		re := &st.edges[i]
		e := re.e
		hyp := e.Status == particle.StatusHypothesis || e.Belief.Score < run.p.opts.HypothesisBelow
		srcNode, dstNode := re.src, re.dst
		if srcNode == nil || dstNode == nil {
			s, d := r.EdgeEnds(e)
			srcNode, dstNode = cmp.Or(srcNode, s), cmp.Or(dstNode, d)
		}
		src, srcName := end(srcNode, e.Source)
		dst, dstName := end(dstNode, e.Target)
		ans.Edges = append(ans.Edges, EdgeOut{
			ID: e.ID, Source: src, Target: dst, SourceName: srcName, TargetName: dstName,
			Type: string(e.Type), Predicate: e.Predicate(), Confidence: e.Confidence, Salience: re.salience,
			Score: re.score, Status: string(e.Status), Hypothesis: hyp, Evidence: e.Evidence,
			Provenance: guard.VisibleProvenance(e.Namespace, e.Provenance), Scope: e.Scope, ValidFrom: e.ValidFrom, ValidTo: e.ValidTo,
		})
		if e.Assertion != nil {
			ans.Edges[len(ans.Edges)-1].Value = e.Assertion.Value
		}
		if hyp {
			ans.Hypotheses = append(ans.Hypotheses, e.ID)
		}
	}
	st.ranked = st.ranked[:0]
	for i := range st.nodes {
		st.ranked = append(st.ranked, int32(i))
		wave.PrefetchRange(unsafe.Pointer(st.nodes[i].n), unsafe.Sizeof(particle.Node{}))
	}
	st.byScore(st.ranked)
	for _, i := range st.ranked {
		rn := &st.nodes[i]
		n := rn.n
		ans.Nodes = append(ans.Nodes, NodeOut{
			ID: n.ID, Type: string(n.Type), Name: n.Name, Aliases: n.Aliases, Tags: n.Attributes.Tags,
			Score: rn.score, Belief: n.Belief.Score, Seed: rn.seed, Hop: rn.hop,
			Episodes: guard.VisibleEpisodeIDs(n.Namespace, n.Attributes.RLDSEpisodeIDs), Spans: n.Attributes.CMSSpanIDs,
		})
	}
	ans.Contradictions = contradictions(ans.Edges)
}

// contradictions pairs edges of the answer marked contradicted that share
// a subject and predicate.
func contradictions(edges []EdgeOut) []Contradiction {
	out := []Contradiction{}
	for i := range edges {
		a := &edges[i] // an EdgeOut is some 300 bytes: not copied per edge
		if a.Status != string(particle.StatusContradicted) {
			continue
		}
		for j := i + 1; j < len(edges); j++ {
			b := &edges[j]
			if b.Status == string(particle.StatusContradicted) && b.Source == a.Source && b.Predicate == a.Predicate {
				out = append(out, Contradiction{Subject: a.SourceName, Predicate: a.Predicate, EdgeA: a.ID, EdgeB: b.ID,
					ConfidenceA: a.Confidence, ConfidenceB: b.Confidence})
			}
		}
	}
	return out
}

// policy is the one evaluation function bound to the request's
// principal for the current read (particle.Guard): node verdicts are
// remembered across the many candidate edges that share endpoints.
func (run *run) policy() *particle.Guard {
	if run.guard == nil || run.guardFor != run.r {
		run.guard, run.guardFor = run.r.Guard(run.principal), run.r
	}
	return run.guard
}
