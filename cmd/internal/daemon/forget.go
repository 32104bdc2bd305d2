package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// ForgetRequest asks to forget one node: by id (DELETE
// /v1/entities/{id}), or by name and type in a namespace (POST
// /v1/forget). Why is required: the record keeps it.
type ForgetRequest struct {
	Name    string `json:"name,omitempty"`
	Type    string `json:"type,omitempty"` // default entity
	Tenant  string `json:"tenant,omitempty"`
	Project string `json:"project,omitempty"`
	Who     string `json:"who,omitempty"`
	Why     string `json:"why"`
}

// Forget removes node id (following merges) from every layer: the graph
// in Badger and its view (the node, its aliases, every edge and fact on
// it, its place in episode records, the merge and fact records naming
// it), the vector and keyword indexes (through the store's change
// feed), the stored steps and CMS spans that name it, and the sessions
// that hold it; one transaction, so a crash leaves all or nothing. It
// records who forgot it, when and why (particle.Forgotten).
func (d *Daemon) Forget(ctx context.Context, id, who, why string) (*particle.Forgotten, error) {
	if strings.TrimSpace(why) == "" {
		return nil, fmt.Errorf("%w: say why the entity is forgotten", errBadRequest)
	}
	if strings.TrimSpace(who) == "" {
		who = "unknown"
	}
	n, err := d.store.ResolveNode(id)
	if err != nil {
		return nil, err
	}
	sessions := d.sessions.BeginForget(n.Namespace, append([]string{n.Name}, n.Aliases...))
	f, err := d.store.Forget(ctx, n.ID, who, why, func(b *particle.Batch, f *particle.Forgotten) error {
		scrubStep := func(raw []byte) ([]byte, bool, error) { return rlds.ScrubStep(raw, f.Names) }
		for _, ep := range f.EpisodeIDs {
			k, err := b.ScrubSteps(f.Namespace, ep, scrubStep)
			if err != nil {
				return fmt.Errorf("scrub steps of %s: %w", ep, err)
			}
			f.Steps += k
		}
		k, err := b.ScrubSpans(f.Namespace, func(raw []byte) ([]byte, bool, error) { return cms.ScrubSpan(raw, f.Names) })
		if err != nil {
			return fmt.Errorf("scrub spans: %w", err)
		}
		f.Spans = k
		if f.Sessions, err = sessions.Scrub(b); err != nil {
			return fmt.Errorf("scrub sessions: %w", err)
		}
		return nil
	})
	sessions.End(err == nil)
	if err != nil {
		return nil, err
	}
	d.log.Info("entity forgotten", "id", f.ID, "type", f.Type, "who", f.Who, "why", f.Why,
		"edges", f.Edges, "episodes", f.Episodes, "steps", f.Steps, "spans", f.Spans, "sessions", f.Sessions)
	return f, nil
}

func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("DELETE /v1/entities/{id}", d.httpForgetID)
		mux.HandleFunc("POST /v1/forget", d.httpForgetName)
		mux.HandleFunc("GET /v1/forgotten", d.httpForgotten)
	})
}

// forgetRequest reads the optional JSON body of a forget; query
// parameters who and why fill what it leaves out.
func forgetRequest(r *http.Request) (ForgetRequest, error) {
	var req ForgetRequest
	body, err := readBody(r)
	if err != nil {
		return req, err
	}
	if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err)
		}
	}
	q := r.URL.Query()
	if c := callerOf(r); c.Authenticated {
		req.Who = c.who() // with auth on, who is who authenticated, whatever the body says
	}
	if req.Who == "" {
		req.Who = q.Get("who")
	}
	if req.Why == "" {
		req.Why = q.Get("why")
	}
	if req.Who == "" {
		req.Who = whoOf(r)
	}
	return req, nil
}

func (d *Daemon) httpForgetID(w http.ResponseWriter, r *http.Request) {
	req, err := forgetRequest(r)
	if err == nil {
		var f *particle.Forgotten
		if f, err = d.Forget(r.Context(), r.PathValue("id"), req.Who, req.Why); err == nil {
			writeJSON(w, http.StatusOK, f)
			return
		}
	}
	writeError(w, err)
}

func (d *Daemon) httpForgetName(w http.ResponseWriter, r *http.Request) {
	req, err := forgetRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	t := particle.NodeType(req.Type)
	if t == "" {
		t = particle.NodeEntity
	}
	if !t.Valid() || strings.TrimSpace(req.Name) == "" {
		writeError(w, fmt.Errorf("%w: give the name and a node type (got %q)", errBadRequest, req.Type))
		return
	}
	ns, err := requestNamespace(req.Tenant, req.Project)
	if err != nil {
		writeError(w, err)
		return
	}
	var n *particle.Node
	d.store.Read(func(rd particle.Reader) { n = rd.Lookup(ns, t, req.Name) })
	if n == nil {
		writeError(w, fmt.Errorf("%s %q in %s: %w", t, req.Name, ns, particle.ErrNotFound))
		return
	}
	f, err := d.Forget(r.Context(), n.ID, req.Who, req.Why)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (d *Daemon) httpForgotten(w http.ResponseWriter, _ *http.Request) {
	fs, err := d.store.Forgottens()
	if err != nil {
		writeError(w, err)
		return
	}
	if fs == nil {
		fs = []particle.Forgotten{}
	}
	writeJSON(w, http.StatusOK, fs)
}
