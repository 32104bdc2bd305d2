package daemon

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
)

// The read paths of this package ask the one evaluation function
// (particle Reader.EdgeVisible and friends) for every item; what the
// caller may not see is absent (404, left out of lists and counts), and
// an explicit read of it is recorded as a denial, which feeds policy
// tightening.

// hideNode returns n, or a not-found error (recording the denial) when
// the caller may not see it.
func (d *Daemon) hideNode(ctx context.Context, c caller, p particle.Principal, n *particle.Node) error {
	var dec particle.Decision
	d.store.Read(func(r particle.Reader) { dec = r.ExplainNode(n, p) })
	if dec.Visible {
		return nil
	}
	d.sec.deny(ctx, c, particle.Denial{Action: "read", Item: "node:" + n.ID, Namespace: n.Namespace,
		Status: http.StatusNotFound, Reason: string(dec.Reason), Rule: dec.Rule, Scope: dec.Scope})
	return fmt.Errorf("node %s: %w", n.ID, particle.ErrNotFound)
}

// hideEdge is hideNode for an edge.
func (d *Daemon) hideEdge(ctx context.Context, c caller, p particle.Principal, e *particle.Edge) error {
	var dec particle.Decision
	d.store.Read(func(r particle.Reader) { dec = r.ExplainEdge(e, p) })
	if dec.Visible {
		return nil
	}
	d.sec.deny(ctx, c, particle.Denial{Action: "read", Item: "edge:" + e.ID, Namespace: e.Namespace,
		Status: http.StatusNotFound, Reason: string(dec.Reason), Rule: dec.Rule, Scope: dec.Scope})
	return fmt.Errorf("edge %s: %w", e.ID, particle.ErrNotFound)
}

// visibleEpisode is ep as the caller may see it (its node and edge lists
// without hidden items), or a not-found error recording the denial.
func (d *Daemon) visibleEpisode(ctx context.Context, c caller, p particle.Principal, ep *particle.Episode) (*particle.Episode, error) {
	var out *particle.Episode
	var dec particle.Decision
	d.store.Read(func(r particle.Reader) {
		if out = r.VisibleEpisode(ep, p); out == nil {
			dec = r.ExplainEpisode(ep, p)
		}
	})
	if out != nil {
		return out, nil
	}
	d.sec.deny(ctx, c, particle.Denial{Action: "read", Item: "episode:" + ep.ID, Namespace: ep.Namespace,
		Status: http.StatusNotFound, Reason: string(dec.Reason), Rule: dec.Rule, Scope: dec.Scope})
	return nil, fmt.Errorf("episode %s: %w", ep.ID, particle.ErrNotFound)
}

// visibleCounts are the store's counts over what p may see: nodes,
// edges and episodes the policy hides are not counted (nor their steps,
// nor their vectors).
func (d *Daemon) visibleCounts(p particle.Principal) (particle.Counts, int) {
	c := d.store.Counts()
	c.Nodes, c.Edges = map[particle.NodeType]int64{}, map[particle.EdgeType]int64{}
	c.Episodes, c.Steps = 0, 0
	vectors, dim := 0, d.index.Dim()
	d.store.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			if r.NodeVisible(n, p) {
				c.Nodes[n.Type]++
				if len(n.Embedding) == dim {
					vectors++
				}
			}
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			if r.EdgeVisible(e, p) {
				c.Edges[e.Type]++
				if len(e.Embedding) == dim {
					vectors++
				}
			}
			return true
		})
		r.Episodes(func(ep *particle.Episode) bool {
			if r.EpisodeVisible(ep, p) {
				c.Episodes++
				c.Steps += int64(ep.Steps)
				if len(ep.Embedding) == dim {
					vectors++
				}
			}
			return true
		})
	})
	return c, vectors
}

// hiddenUnknowns records, as denials, the names a planner request asked
// for that exist but that the caller may not see (the answer lists them
// as unknown, exactly as if they did not exist).
func (d *Daemon) hiddenUnknowns(ctx context.Context, c caller, p particle.Principal, ns string, names []string) {
	var hidden []particle.Denial
	d.store.Read(func(r particle.Reader) {
		for _, name := range names {
			n := r.LookupAny(ns, name)
			if n == nil {
				continue
			}
			if dec := r.ExplainNode(n, p); !dec.Visible {
				hidden = append(hidden, particle.Denial{Action: "plan", Item: "node:" + n.ID, Namespace: ns,
					Status: http.StatusNotFound, Reason: string(dec.Reason), Rule: dec.Rule, Scope: dec.Scope})
			}
		}
	})
	for _, den := range hidden {
		d.sec.deny(ctx, c, den)
	}
}

// recordHiddenUnknowns records the unknowns of an answer that are
// hidden rather than absent.
func (d *Daemon) recordHiddenUnknowns(ctx context.Context, c caller, req *planner.Request, ans *planner.Answer) {
	p := particle.Principal{Roles: req.Roles, Agent: req.Agent}
	if req.Principal != nil {
		p = *req.Principal
		p.Roles = req.Roles
	}
	names := make([]string, 0, len(ans.Unknowns))
	for _, u := range ans.Unknowns {
		names = append(names, u.Name)
	}
	d.hiddenUnknowns(ctx, c, p, particle.Namespace(req.Tenant, req.Project), names)
}
