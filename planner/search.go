package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
)

// Advise rates every strategy for a request and says which auto would
// choose, with reasons (POST /v1/strategies).
func (p *Planner) Advise(req *Request) (Advice, error) {
	if err := req.normalize(p.index.Dim()); err != nil {
		return Advice{}, err
	}
	return advise(req, p.knownName(req, req.namespace()), p.opts.Keyword != nil), nil
}

// SearchHit is one ranked item of a search: what it is, why it ranks
// and the nodes it would seed.
type SearchHit struct {
	Kind string `json:"kind"` // node, edge, episode or span
	ID   string `json:"id"`
	// Name is a node's name, an edge as "source predicate target", an
	// episode's or span's id.
	Name string `json:"name"`
	// Text is what keyword search reads: aliases, an assertion value, a
	// language instruction, span text.
	Text  string  `json:"text,omitempty"`
	Score float64 `json:"score"`
	// Via lists the rankings that found it: semantic, keyword.
	Via   []string `json:"via"`
	Nodes []string `json:"nodes"`
}

// SearchResult is the answer to POST /v1/search.
type SearchResult struct {
	Strategy string      `json:"strategy"`
	Hits     []SearchHit `json:"hits"`
	Timings  Timings     `json:"timings_us"`
}

// Search ranks what a query finds, by keyword (the default when the
// planner has a keyword index), semantic or hybrid, without expanding
// the graph: the seeds a planner request would start from, each passed
// through the same policy and constraints.
func (p *Planner) Search(ctx context.Context, req *Request) (*SearchResult, error) {
	t0 := p.begin()
	if err := req.normalize(p.index.Dim()); err != nil {
		return nil, err
	}
	strategy := req.Strategy
	switch strategy {
	case "", StrategyAuto:
		strategy = StrategySemantic
		if p.opts.Keyword != nil {
			strategy = StrategyKeyword
		}
	case StrategyKeyword, StrategyHybrid:
		if p.opts.Keyword == nil {
			return nil, fmt.Errorf("%w: strategy %s needs the keyword index, which this planner does not have", ErrInvalid, strategy)
		}
	case StrategySemantic:
	default:
		return nil, fmt.Errorf("%w: search ranks by semantic, keyword or hybrid, not %s", ErrInvalid, strategy)
	}
	if strings.TrimSpace(req.Query) == "" && len(req.Vector) == 0 {
		return nil, fmt.Errorf("%w: search needs a query", ErrInvalid)
	}
	ns := req.namespace()
	res := &SearchResult{Strategy: strategy, Hits: []SearchHit{}}
	var kw []keyword.Hit
	if strategy != StrategySemantic {
		tk := time.Now()
		var err error
		if kw, err = p.opts.Keyword.Search(ns, req.Query, 2*req.K); err != nil {
			return nil, fmt.Errorf("keyword search: %w", err)
		}
		res.Timings.KeywordUS = us(time.Since(tk))
	}
	run := &run{p: p, req: req, ns: ns, now: p.opts.Now().UTC(), principal: req.principal()}
	defer run.release()
	if strategy != StrategyKeyword {
		q, err := p.queryVector(ctx, req, Seeds{}, nil)
		if err != nil {
			return nil, err
		}
		run.q = q
	}
	t1 := time.Now()
	var spans []int
	var tRead time.Time
	p.store.Read(func(r particle.Reader) {
		tRead = time.Now()
		run.r = r
		for _, c := range run.candidates(strategy, kw) {
			if len(res.Hits) == req.K {
				break
			}
			h := SearchHit{Kind: c.kind, ID: c.id, Score: c.score, Via: slices.Compact(slices.Sorted(slices.Values(c.via))), Nodes: []string{}}
			for _, n := range c.nodes {
				// Only what the caller may see is named.
				if n != nil && n.Namespace == ns && r.NodeVisible(n, run.principal) {
					h.Nodes = append(h.Nodes, n.ID)
				}
			}
			if (c.kind == "node" || c.kind == "span") && len(h.Nodes) == 0 {
				continue // nothing the caller may see
			}
			switch c.kind {
			case "node":
				h.Name, h.Text = c.nodes[0].Name, strings.Join(c.nodes[0].Aliases, ", ")
			case "edge":
				h.Name = nodeName(r, c.edge.Source) + " " + c.edge.Predicate() + " " + nodeName(r, c.edge.Target)
				h.Text = edgeValue(c.edge)
			case "episode":
				h.Name = c.id
				if ep := r.Episode(ns, c.id); ep != nil {
					h.Text = ep.LanguageInstruction
				}
			case "span":
				h.Name = c.id
				spans = append(spans, len(res.Hits))
			}
			res.Hits = append(res.Hits, h)
		}
	})
	res.Timings.WaitUS, res.Timings.PrefilterUS = us(tRead.Sub(t1)), us(time.Since(tRead))
	// Span text lives in Badger, not the view: read it outside the lock.
	for _, i := range spans {
		if raw, err := p.store.Span(ns, res.Hits[i].ID); err == nil {
			if s, err := cms.DecodeStored(raw); err == nil {
				res.Hits[i].Text = s.Text
			}
		}
	}
	res.Timings.TotalUS = us(time.Since(t0))
	return res, nil
}

func nodeName(r particle.Reader, id string) string {
	if n := r.Node(id); n != nil {
		return n.Name
	}
	return ""
}

func edgeValue(e *particle.Edge) string {
	if e.Assertion == nil {
		return ""
	}
	return e.Assertion.Value
}
