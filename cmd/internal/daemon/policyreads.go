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

// visibleItem returns the item as see gives it for the caller (nil:
// hidden, with the decision that hid it), or a not-found error
// recording the denial of kind:id.
func visibleItem[T any](d *Daemon, ctx context.Context, c caller, kind, id, ns string, see func(particle.Reader) (*T, particle.Decision)) (*T, error) {
	var out *T
	var dec particle.Decision
	d.store.Read(func(r particle.Reader) { out, dec = see(r) })
	if out != nil {
		return out, nil
	}
	d.sec.deny(ctx, c, particle.Denial{Action: "read", Item: kind + ":" + id, Namespace: ns,
		Status: http.StatusNotFound, Reason: string(dec.Reason), Rule: dec.Rule, Scope: dec.Scope})
	return nil, fmt.Errorf("%s %s: %w", kind, id, particle.ErrNotFound)
}

// visibleNode is n as the caller may see it (its episode list without
// hidden episodes), or a not-found error recording the denial.
func (d *Daemon) visibleNode(ctx context.Context, c caller, p particle.Principal, n *particle.Node) (*particle.Node, error) {
	return visibleItem(d, ctx, c, "node", n.ID, n.Namespace, func(r particle.Reader) (*particle.Node, particle.Decision) {
		if v := r.VisibleNode(n, p); v != nil {
			return v, particle.Decision{}
		}
		return nil, r.ExplainNode(n, p)
	})
}

// visibleEdge is e as the caller may see it (its provenance without
// hidden episodes), or a not-found error recording the denial.
func (d *Daemon) visibleEdge(ctx context.Context, c caller, p particle.Principal, e *particle.Edge) (*particle.Edge, error) {
	return visibleItem(d, ctx, c, "edge", e.ID, e.Namespace, func(r particle.Reader) (*particle.Edge, particle.Decision) {
		if v := r.VisibleEdge(e, p); v != nil {
			return v, particle.Decision{}
		}
		return nil, r.ExplainEdge(e, p)
	})
}

// visibleEpisode is ep as the caller may see it (its node and edge lists
// without hidden items), or a not-found error recording the denial.
func (d *Daemon) visibleEpisode(ctx context.Context, c caller, p particle.Principal, ep *particle.Episode) (*particle.Episode, error) {
	return visibleItem(d, ctx, c, "episode", ep.ID, ep.Namespace, func(r particle.Reader) (*particle.Episode, particle.Decision) {
		if v := r.VisibleEpisode(ep, p); v != nil {
			return v, particle.Decision{}
		}
		return nil, r.ExplainEpisode(ep, p)
	})
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
