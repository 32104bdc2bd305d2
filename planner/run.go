package planner

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// maxScan bounds how many of a hub's edges one expansion step looks at:
// the newest, half from each direction (adjacency is in insertion, so
// time, order). An agent or a tool seen in thousands of episodes stays
// cheap to expand, and what it did lately is what the planner sees.
const maxScan = 512

// run is the state of one request through the pipeline.
type run struct {
	p         *Planner
	req       *Request
	ns        string
	q         []float32
	now       time.Time
	principal particle.Principal
	r         particle.Reader
	guard     *particle.Guard // policy bound to principal, for guardFor
	guardFor  particle.Reader // the read the guard belongs to

	nodeScore map[string]float64
	nodeHop   map[string]int
	seeds     map[string]bool
	nodeOrder []string
	edges     map[string]*particle.Edge
	edgeScore map[string]float64
	unknowns  []Unknown
	truncated bool

	// temporal ranks edges by closeness in time to now (as_of, or the
	// time window's end); history keeps superseded facts.
	temporal, history bool

	// scratch for scoreEdges
	batch  []*particle.Edge
	scores []float64
	ages   []float64
	groups []decayGroup
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
	if req.Location != "" && e.Scope.Location != "" && particle.Canonical(e.Scope.Location) != particle.Canonical(req.Location) {
		return false
	}
	if req.SameAgent {
		other := false
		for _, pv := range e.Provenance {
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

func (run *run) addNode(n *particle.Node, score float64, hop int, seed bool) {
	if n == nil || n.Namespace != run.ns || !run.policy().NodeVisible(n) {
		return
	}
	if old, ok := run.nodeScore[n.ID]; ok {
		if score > old {
			run.nodeScore[n.ID] = score
		}
		if hop < run.nodeHop[n.ID] {
			run.nodeHop[n.ID] = hop
		}
		if seed {
			run.seeds[n.ID] = true
		}
		return
	}
	run.nodeScore[n.ID] = score
	run.nodeHop[n.ID] = hop
	run.nodeOrder = append(run.nodeOrder, n.ID)
	if seed {
		run.seeds[n.ID] = true
	}
}

func (run *run) addEdge(e *particle.Edge) {
	if _, ok := run.edges[e.ID]; !ok {
		run.edges[e.ID] = e
		run.edgeScore[e.ID] = run.scoreEdge(e)
	}
}

func (run *run) full() bool {
	return len(run.nodeScore)+len(run.edges) >= run.req.Budget
}

// expand walks out from the seeds, hop by hop, taking each node's best
// admissible edges, until the hops or the budget run out.
func (run *run) expand() {
	r := run.r
	frontier := slices.Clone(run.nodeOrder)
	type cand struct {
		e     *particle.Edge
		score float64
	}
	var cands []cand
	for hop := 1; hop <= run.req.Hops && len(frontier) > 0; hop++ {
		sort.SliceStable(frontier, func(a, b int) bool { return run.nodeScore[frontier[a]] > run.nodeScore[frontier[b]] })
		var next []string
		for _, id := range frontier {
			if run.full() {
				run.truncated = true
				return
			}
			cands = cands[:0]
			limit, scanned := maxScan/2, 0
			collect := func(e *particle.Edge) bool {
				scanned++
				if _, seen := run.edges[e.ID]; !seen && run.admits(e) {
					cands = append(cands, cand{e: e})
				}
				// Stop at the candidate budget, or after looking at four
				// times as many edges when constraints turn most away.
				return len(cands) < limit && scanned < 4*limit
			}
			r.OutNewest(id, collect)
			limit = maxScan
			r.InNewest(id, collect)
			run.batch = run.batch[:0]
			for _, c := range cands {
				run.batch = append(run.batch, c.e)
			}
			for i, s := range run.scoreEdges(run.batch) {
				cands[i].score = s
			}
			sort.Slice(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
			for _, c := range cands[:min(len(cands), run.p.opts.PerNodeFanout)] {
				if run.full() {
					run.truncated = true
					return
				}
				other := c.e.Target
				if other == id {
					other = c.e.Source
				}
				on := r.Node(other)
				if on == nil {
					continue
				}
				run.edges[c.e.ID] = c.e
				run.edgeScore[c.e.ID] = c.score
				if _, had := run.nodeScore[other]; !had {
					next = append(next, other)
				}
				run.addNode(on, run.scoreNode(on)*0.5+c.score*0.5, hop, false)
			}
		}
		frontier = next
	}
}

// rerank scores every node once more against the query (edges were
// scored as they were admitted).
func (run *run) rerank() {
	for id, s := range run.nodeScore {
		if n := run.r.Node(id); n != nil {
			run.nodeScore[id] = math.Max(s, run.scoreNode(n))
		}
	}
}

// scoreEdge is cosine × decayed salience × confidence.
func (run *run) scoreEdge(e *particle.Edge) float64 {
	sim := 0.5
	if len(e.Embedding) == len(run.q) {
		sim = cos01(wave.Dot(run.q, e.Embedding))
	}
	s := sim * (run.p.opts.SalienceFloor + run.salience(e)) * e.Confidence
	if run.temporal {
		s *= run.recency(e)
	}
	return s
}

// recencyScale is the time over which a fact's recency weight halves
// from 1 towards 0.5 (temporal strategy).
const recencyScale = 24 * time.Hour

// recency weighs a fact by how close its validity is to the reference
// time: 1 for a fact valid at it, towards 0.5 for one long before or
// after.
func (run *run) recency(e *particle.Edge) float64 {
	ref := run.now
	if tw := run.req.TimeWindow; tw != nil && !tw.To.IsZero() && tw.To.Before(ref) {
		ref = tw.To
	}
	var d time.Duration
	switch {
	case e.ValidFrom.After(ref):
		d = e.ValidFrom.Sub(ref)
	case !e.ValidTo.IsZero() && e.ValidTo.Before(ref):
		d = ref.Sub(e.ValidTo)
	}
	return 0.5 + 0.5/(1+float64(d)/float64(recencyScale))
}

// scoreEdges scores a candidate set at once: saliences are decayed with
// gonum over each group of edges that share decay parameters.
func (run *run) scoreEdges(edges []*particle.Edge) []float64 {
	n := len(edges)
	run.scores = slices.Grow(run.scores[:0], n)[:n]
	run.ages = slices.Grow(run.ages[:0], n)[:n]
	run.groups = run.groups[:0]
	for i, e := range edges {
		run.scores[i] = e.Salience.Score
		run.ages[i] = run.now.Sub(e.Salience.LastUpdated).Seconds()
		k := decayKey{e.Salience.DecayFn, e.Salience.HalfLifeS}
		g := slices.IndexFunc(run.groups, func(g decayGroup) bool { return g.key == k })
		if g < 0 {
			run.groups = append(run.groups, decayGroup{key: k})
			g = len(run.groups) - 1
		}
		run.groups[g].idx = append(run.groups[g].idx, i)
	}
	for _, g := range run.groups {
		d := wave.Decay{Fn: wave.DecayFn(g.key.fn), HalfLife: time.Duration(g.key.halfLifeS * float64(time.Second))}
		if len(g.idx) == n {
			d.ApplyBatch(run.scores, run.scores, run.ages)
			break
		}
		s, a := make([]float64, len(g.idx)), make([]float64, len(g.idx))
		for j, i := range g.idx {
			s[j], a[j] = run.scores[i], run.ages[i]
		}
		d.ApplyBatch(s, s, a)
		for j, i := range g.idx {
			run.scores[i] = s[j]
		}
	}
	for i, e := range edges {
		sim := 0.5
		if len(e.Embedding) == len(run.q) {
			sim = cos01(wave.Dot(run.q, e.Embedding))
		}
		run.scores[i] = sim * (run.p.opts.SalienceFloor + run.scores[i]) * e.Confidence
		if run.temporal {
			run.scores[i] *= run.recency(e)
		}
	}
	return run.scores
}

type decayKey struct {
	fn        string
	halfLifeS float64
}

type decayGroup struct {
	key decayKey
	idx []int
}

func (run *run) salience(e *particle.Edge) float64 {
	d := wave.Decay{Fn: wave.DecayFn(e.Salience.DecayFn), HalfLife: time.Duration(e.Salience.HalfLifeS * float64(time.Second))}
	return d.Apply(e.Salience.Score, e.Salience.LastUpdated, run.now)
}

func (run *run) scoreNode(n *particle.Node) float64 {
	sim := 0.5
	if len(n.Embedding) == len(run.q) {
		sim = cos01(wave.Dot(run.q, n.Embedding))
	}
	return sim * (0.5 + 0.5*n.Belief.Score)
}

func cos01(c float32) float64 { return (float64(c) + 1) / 2 }

// topNodes returns the n best-scored nodes of the run.
func (run *run) topNodes(n int) []*particle.Node {
	ids := slices.Clone(run.nodeOrder)
	sort.SliceStable(ids, func(a, b int) bool { return run.nodeScore[ids[a]] > run.nodeScore[ids[b]] })
	var out []*particle.Node
	for _, id := range ids[:min(n, len(ids))] {
		if nd := run.r.Node(id); nd != nil {
			out = append(out, nd)
		}
	}
	return out
}

// stitch orders the kept nodes and edges by score and fills the answer,
// every edge with its provenance and confidence.
func (run *run) stitch() *Answer {
	r := run.r
	ans := &Answer{Nodes: []NodeOut{}, Edges: []EdgeOut{}, Unknowns: run.unknowns, Hypotheses: []string{},
		Contradictions: []Contradiction{}, Truncated: run.truncated}
	if ans.Unknowns == nil {
		ans.Unknowns = []Unknown{}
	}
	edgeIDs := make([]string, 0, len(run.edges))
	for id := range run.edges {
		edgeIDs = append(edgeIDs, id)
	}
	sort.Slice(edgeIDs, func(a, b int) bool {
		sa, sb := run.edgeScore[edgeIDs[a]], run.edgeScore[edgeIDs[b]]
		if sa != sb {
			return sa > sb
		}
		return edgeIDs[a] < edgeIDs[b]
	})
	name := func(id string) string {
		if n := r.Node(id); n != nil {
			return n.Name
		}
		return ""
	}
	for _, id := range edgeIDs {
		e := run.edges[id]
		hyp := e.Status == particle.StatusHypothesis || e.Belief.Score < run.p.opts.HypothesisBelow
		out := EdgeOut{
			ID: e.ID, Source: e.Source, Target: e.Target, SourceName: name(e.Source), TargetName: name(e.Target),
			Type: string(e.Type), Predicate: e.Predicate(), Confidence: e.Confidence, Salience: run.salience(e),
			Score: run.edgeScore[id], Status: string(e.Status), Hypothesis: hyp, Evidence: e.Evidence,
			Provenance: e.Provenance, Scope: e.Scope, ValidFrom: e.ValidFrom, ValidTo: e.ValidTo,
		}
		if e.Assertion != nil {
			out.Value = e.Assertion.Value
		}
		ans.Edges = append(ans.Edges, out)
		if hyp {
			ans.Hypotheses = append(ans.Hypotheses, e.ID)
		}
	}
	nodeIDs := slices.Clone(run.nodeOrder)
	sort.SliceStable(nodeIDs, func(a, b int) bool { return run.nodeScore[nodeIDs[a]] > run.nodeScore[nodeIDs[b]] })
	for _, id := range nodeIDs {
		n := r.Node(id)
		if n == nil {
			continue
		}
		ans.Nodes = append(ans.Nodes, NodeOut{
			ID: n.ID, Type: string(n.Type), Name: n.Name, Aliases: n.Aliases, Tags: n.Attributes.Tags,
			Score: run.nodeScore[id], Belief: n.Belief.Score, Seed: run.seeds[id], Hop: run.nodeHop[id],
			Episodes: n.Attributes.RLDSEpisodeIDs, Spans: n.Attributes.CMSSpanIDs,
		})
	}
	ans.Contradictions = contradictions(ans.Edges)
	return ans
}

// contradictions pairs edges of the answer marked contradicted that share
// a subject and predicate.
func contradictions(edges []EdgeOut) []Contradiction {
	out := []Contradiction{}
	for i := range edges {
		a := edges[i]
		if a.Status != string(particle.StatusContradicted) {
			continue
		}
		for j := i + 1; j < len(edges); j++ {
			b := edges[j]
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
