package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
	"github.com/ctxgraph/ctxgraph/wave"
)

// rrfK is the reciprocal-rank fusion constant (Cormack et al. 2009):
// an item's fused score is the sum over the rankings of 1/(rrfK + rank).
const rrfK = 60

// candidate is one retrieved item on its way to becoming seeds: a node,
// an edge with its endpoints, an episode's node or the nodes a CMS span
// touched. Every candidate has passed the request's constraints.
type candidate struct {
	kind string // node, edge, episode or span
	id   string
	// keyID is the id the item fuses on (fuseKey): its id, or an
	// episode's node's (an episode stands for its node).
	keyID string
	via   []string // the rankings that found it: semantic, keyword
	score float64
	edge  *particle.Edge
	nodes []*particle.Node
	// endpointScale scales the score for an edge's endpoints.
	endpointScale float64
}

// chooseStrategy resolves the request's strategy: the one to report,
// the one that finds the seeds (they differ for temporal) and, for
// auto, why.
func (p *Planner) chooseStrategy(req *Request, ns string) (strategy, seedBy, reason string, err error) {
	name := req.Strategy
	if name == "" {
		name = StrategyAuto
	}
	hasKeyword := p.opts.Keyword != nil
	switch name {
	case StrategyKeyword, StrategyHybrid:
		if !hasKeyword {
			return "", "", "", fmt.Errorf("%w: strategy %s needs the keyword index, which this planner does not have", ErrInvalid, name)
		}
		return name, name, "", nil
	case StrategySemantic, StrategyGraph:
		return name, name, "", nil
	}
	// A request without query text rates the strategies by a few
	// flags alone: the choice is made once per flags (textless), not
	// with a dozen allocations per call.
	key, textless := textlessKey(name, req, hasKeyword)
	if textless {
		if c := textlessChoices[key].Load(); c != nil {
			return c.strategy, c.seedBy, c.reason, nil
		}
	}
	adv := advise(req, p.knownName(req, ns), hasKeyword)
	if name == StrategyAuto {
		name, reason = adv.Chosen, "auto: "+adv.Reason
	}
	seedBy = name
	if name == StrategyTemporal {
		seedBy = seeding(adv.Suggestions)
		if reason == "" {
			reason = "seeds by " + seedBy
		} else {
			reason += "; seeds by " + seedBy
		}
	}
	if textless {
		textlessChoices[key].Store(&strategyChoice{name, seedBy, reason})
	}
	return name, seedBy, reason, nil
}

// strategyChoice is what chooseStrategy resolves.
type strategyChoice struct{ strategy, seedBy, reason string }

// textlessChoices holds chooseStrategy's result for the requests
// without query text, by textlessKey: their signals (readSignals) are
// flags, and Suggest rates the strategies from those alone.
var textlessChoices [1 << 6]atomic.Pointer[strategyChoice]

// textlessKey is the index in textlessChoices of a request resolving
// strategy name (auto or temporal) with a keyword index or not, and
// whether the request has no query text (else there is no index).
func textlessKey(name string, req *Request, keywordIndex bool) (int, bool) {
	if strings.TrimSpace(req.Query) != "" || name != StrategyAuto && name != StrategyTemporal {
		return 0, false
	}
	k := 0
	for i, on := range []bool{name == StrategyTemporal, req.AsOf != nil, req.TimeWindow != nil,
		len(req.Goals)+len(req.Tools)+len(req.Entities) > 0, len(req.Vector) > 0, keywordIndex} {
		if on {
			k |= 1 << i
		}
	}
	return k, true
}

// knownName reports whether a text is the name or alias of a node the
// request may see (the one visibility check, through addNode).
func (p *Planner) knownName(req *Request, ns string) func(string) bool {
	return func(s string) bool {
		var ok bool
		p.store.Read(func(r particle.Reader) {
			probe := &run{p: p, req: req, ns: ns, principal: req.principal(), r: r}
			defer probe.release()
			ok = probe.addNode(r.LookupAny(ns, s), 1, 0, false)
		})
		return ok
	}
}

// seedNamed seeds the request's named goals, tools and entities; what
// the graph lacks becomes an unknown.
func (run *run) seedNamed() {
	r := run.r
	named := func(kind string, t particle.NodeType, names []string) {
		for _, name := range names {
			// What the caller may not see is absent: unknown, as if it
			// did not exist.
			n := r.Lookup(run.ns, t, name)
			if n != nil && !run.policy().NodeVisible(n) {
				n = nil
			}
			if n == nil && t == particle.NodeEntity {
				if n = r.LookupAny(run.ns, name); n != nil && !run.policy().NodeVisible(n) {
					n = nil
				}
			}
			if n == nil {
				run.unknowns = append(run.unknowns, Unknown{Kind: kind, Name: name})
				continue
			}
			run.addNode(n, 1, 0, true)
		}
	}
	named("goal", particle.NodeGoal, run.req.Goals)
	named("tool", particle.NodeTool, run.req.Tools)
	named("entity", particle.NodeEntity, run.req.Entities)
}

// maxNameWords bounds the word n-grams the graph strategy looks up.
const maxNameWords = 4

// seedQueryNames seeds the nodes the query names: its quoted phrases
// and every run of up to maxNameWords words that is a node's name or
// alias (graph strategy).
func (run *run) seedQueryNames() {
	phrases, rest := keyword.Phrases(run.req.Query)
	for _, ph := range phrases {
		run.addNode(run.r.LookupAny(run.ns, ph), 1, 0, true)
	}
	words := strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune(" \t\n\r,;?!()[]{}\"", r) })
	for i := range words {
		for j := min(len(words), i+maxNameWords); j > i; j-- {
			if n := run.r.LookupAny(run.ns, strings.Join(words[i:j], " ")); n != nil {
				run.addNode(n, 1, 0, true)
				break
			}
		}
	}
}

// Rankings a candidate can come from.
const (
	viaSemantic = "semantic"
	viaKeyword  = "keyword"
)

// fuseKey names the candidate's item for fuse: the same item found both
// ways fuses (an episode as its node).
func (c *candidate) fuseKey() string {
	switch c.kind {
	case "edge":
		return "e:" + c.keyID
	case "span":
		return "s:" + c.keyID
	}
	return "n:" + c.keyID
}

// The rankings' names as candidates' via lists, shared: a candidate's
// list is only ever replaced (fuse appends to a clipped copy), so one
// found one way costs no list of its own.
var (
	viaSemanticOnly = []string{viaSemantic}
	viaKeywordOnly  = []string{viaKeyword}
)

func (run *run) nodeCandidate(n *particle.Node, s float64, via []string) candidate {
	return candidate{keyID: n.ID, kind: "node", id: n.ID, via: via, score: s, nodes: run.candNodes(n, nil)}
}

func (run *run) edgeCandidate(e *particle.Edge, s float64, via []string) candidate {
	src, dst := run.r.EdgeEnds(e)
	return candidate{keyID: e.ID, kind: "edge", id: e.ID, via: via, score: s, edge: e, endpointScale: 0.9,
		nodes: run.candNodes(src, dst)}
}

// episodeCandidate is an episode standing for its node (the same item
// as that node found another way).
func (run *run) episodeCandidate(ep *particle.Episode, s float64, via []string) candidate {
	return candidate{keyID: ep.NodeID, kind: "episode", id: ep.ID, via: via, score: s, nodes: run.candNodes(run.r.Node(ep.NodeID), nil)}
}

// candNodes returns a and, unless nil, b, as a candidate's nodes in the
// run's storage, so that seeding a plan allocates nothing per candidate
// (an allocation while the collector marks pays for marking).
func (run *run) candNodes(a, b *particle.Node) []*particle.Node {
	st := run.state()
	i := len(st.candNodes)
	st.candNodes = append(st.candNodes, a)
	if b != nil {
		st.candNodes = append(st.candNodes, b)
	}
	return st.candNodes[i:len(st.candNodes):len(st.candNodes)]
}

// candidates ranks what a seeding strategy retrieves (the vector
// prefilter, the keyword hits kw, or both fused); graph retrieves none.
func (run *run) candidates(seedBy string, kw []keyword.Hit) []candidate {
	switch seedBy {
	case StrategySemantic:
		return run.fromVector(run.p.prefilter(run))
	case StrategyKeyword:
		return run.fromKeyword(kw)
	case StrategyHybrid:
		return fuse(run.fromVector(run.p.prefilter(run)), run.fromKeyword(kw))
	}
	return nil
}

// fromVector turns vector-index hits into candidates (they passed the
// prefilter's constraints).
func (run *run) fromVector(hits []wave.Hit) []candidate {
	r := run.r
	st := run.state()
	out := slices.Grow(st.seeds[:0], len(hits))
	for _, h := range hits {
		s := cos01(h.Score)
		if n := r.NodeBySeq(h.ID); n != nil {
			out = append(out, run.nodeCandidate(n, s, viaSemanticOnly))
		} else if e := r.EdgeBySeq(h.ID); e != nil {
			out = append(out, run.edgeCandidate(e, s, viaSemanticOnly))
		} else if ep := r.EpisodeBySeq(h.ID); ep != nil {
			out = append(out, run.episodeCandidate(ep, s, viaSemanticOnly))
		}
	}
	st.seeds = out[:0] // its storage, for the next run
	return out
}

// fromKeyword turns keyword hits into candidates, applying the same
// constraints the vector prefilter applies: namespace, policy, time
// window and agent. BM25 scores are scaled to (0, 1] by the best.
func (run *run) fromKeyword(hits []keyword.Hit) []candidate {
	r := run.r
	best := 0.0
	for _, h := range hits {
		best = max(best, h.Score)
	}
	out := make([]candidate, 0, len(hits))
	for _, h := range hits {
		s := 1.0
		if best > 0 {
			s = h.Score / best
		}
		switch h.Kind {
		case keyword.KindNode:
			if n := r.Node(h.ID); n != nil && n.Namespace == run.ns {
				out = append(out, run.nodeCandidate(n, s, viaKeywordOnly))
			}
		case keyword.KindEdge:
			if e := r.Edge(h.ID); e != nil && e.Namespace == run.ns && run.admitsAt(e, r.EdgeFactsBySeq(e.Seq)) {
				out = append(out, run.edgeCandidate(e, s, viaKeywordOnly))
			}
		case keyword.KindEpisode:
			if ep := r.Episode(run.ns, h.ID); ep != nil && run.episodeAdmits(ep) {
				out = append(out, run.episodeCandidate(ep, s, viaKeywordOnly))
			}
		case keyword.KindSpan:
			var nodes []*particle.Node
			for _, id := range h.Nodes {
				if n := r.Node(id); n != nil && n.Namespace == run.ns {
					nodes = append(nodes, n)
				}
			}
			if len(nodes) > 0 {
				out = append(out, candidate{keyID: h.ID, kind: "span", id: h.ID, via: viaKeywordOnly, score: s, nodes: nodes})
			}
		}
	}
	return out
}

// fuse merges rankings by reciprocal rank: the result is ordered by
// the sum of 1/(rrfK + rank) over the rankings an item appears in; an
// item keeps its best native score.
func fuse(rankings ...[]candidate) []candidate {
	fused := map[string]float64{}
	byKey := map[string]candidate{}
	var order []string
	for _, list := range rankings {
		for rank, c := range list {
			key := c.fuseKey()
			fused[key] += 1 / float64(rrfK+rank+1)
			old, ok := byKey[key]
			if !ok {
				byKey[key] = c
				order = append(order, key)
				continue
			}
			old.score = max(old.score, c.score)
			old.via = append(slices.Clip(old.via), c.via...)
			byKey[key] = old
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return fused[order[i]] > fused[order[j]] })
	out := make([]candidate, len(order))
	for i, k := range order {
		out[i] = byKey[k]
	}
	return out
}

// seedCandidates makes the first K candidates seeds.
func (run *run) seedCandidates(cs []candidate) {
	kept := 0
	for _, c := range cs {
		if kept >= run.req.K {
			return
		}
		s := c.score
		if c.edge != nil {
			run.addEdge(c.edge)
			s *= c.endpointScale
		}
		for _, n := range c.nodes {
			run.addNode(n, s, 0, true)
		}
		kept++
	}
}
