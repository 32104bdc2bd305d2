package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
)

// Routes for what the graph knows: introspection, diffs, the predicate
// registry, aliases and merges.
func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/introspect", d.httpIntrospect)
		mux.HandleFunc("GET /v1/introspect/{topic}", d.httpIntrospectTopic)
		mux.HandleFunc("POST /v1/diff", d.httpDiff)
		mux.HandleFunc("GET /v1/predicates", d.httpPredicates)
		mux.HandleFunc("PUT /v1/predicates", d.httpPutPredicate)
		mux.HandleFunc("POST /v1/entities/merge", d.httpMerge)
		mux.HandleFunc("POST /v1/entities/{id}/aliases", d.httpAlias)
	})
}

// readJSON decodes a request's JSON body (at most maxRequestBytes) into
// v; a body that is not that JSON is a bad request.
func readJSON(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err)
	}
	return nil
}

// whoOf names the caller for audit records.
func whoOf(r *http.Request) string {
	if c := callerOf(r); c.Authenticated {
		return c.who()
	}
	if u := r.Header.Get("X-Ctxgraph-User"); u != "" {
		return u
	}
	return "anonymous"
}

// Introspection is the body of GET /v1/introspect.
type Introspection struct {
	*particle.Overview
	Stores       map[string]any `json:"stores"`
	Capabilities map[string]any `json:"capabilities"`
}

func (d *Daemon) httpIntrospect(w http.ResponseWriter, r *http.Request) {
	ns, p := namespaceOf(r), principalOf(r)
	var ov *particle.Overview
	d.store.Read(func(rd particle.Reader) { ov = rd.Overview(ns, p) })
	writeJSON(w, http.StatusOK, Introspection{
		Overview: ov,
		Stores: map[string]any{
			"graph":   map[string]any{"engine": "badger", "dir": d.cfg.Data + "/graph"},
			"log":     map[string]any{"engine": "jetstream", "streams": []string{StreamRLDS, StreamCMS, StreamDLQ}},
			"vectors": map[string]any{"dimensions": d.index.Dim(), "size": d.index.Len()},
			"keyword": map[string]any{"engine": "bleve", "scoring": "bm25", "dir": d.cfg.Data + "/keyword", "documents": d.keyword.Len()},
		},
		Capabilities: map[string]any{
			"node_types": particle.NodeTypes, "edge_types": particle.EdgeTypes,
			"formats": planner.Formats(), "strategies": planner.Strategies, "as_of": true, "diff": true,
		},
	})
}

func (d *Daemon) httpIntrospectTopic(w http.ResponseWriter, r *http.Request) {
	var t *particle.Topic
	var err error
	d.store.Read(func(rd particle.Reader) { t, err = rd.Topic(namespaceOf(r), r.PathValue("topic"), principalOf(r)) })
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// DiffRequest is the body of POST /v1/diff: a subject (name, alias or
// id) or a query whose answer's nodes are the subjects, and a window.
type DiffRequest struct {
	Subject string    `json:"subject,omitempty"`
	Query   string    `json:"query,omitempty"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Roles   []string  `json:"roles,omitempty"`
	Tenant  string    `json:"tenant,omitempty"`
	Project string    `json:"project,omitempty"`
}

func (d *Daemon) httpDiff(w http.ResponseWriter, r *http.Request) {
	var req DiffRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.To.IsZero() {
		req.To = time.Now().UTC()
	}
	if !req.To.After(req.From) {
		writeError(w, fmt.Errorf("%w: to must be after from", errBadRequest))
		return
	}
	ns, err := requestNamespace(req.Tenant, req.Project)
	if err != nil {
		writeError(w, err)
		return
	}
	p := requestPrincipal(r, req.Roles)
	var subjects []string
	switch {
	case req.Subject != "":
		var n *particle.Node
		d.store.Read(func(rd particle.Reader) {
			if n = rd.Node(rd.Resolve(req.Subject)); n == nil {
				n = rd.LookupAny(ns, req.Subject)
			}
		})
		if n == nil {
			writeError(w, fmt.Errorf("subject %q: %w", req.Subject, particle.ErrNotFound))
			return
		}
		if _, err := d.visibleNode(r.Context(), callerOf(r), p, n); err != nil {
			writeError(w, fmt.Errorf("subject %q: %w", req.Subject, particle.ErrNotFound))
			return
		}
		subjects = []string{n.ID}
	case req.Query != "":
		ans, err := d.planner.Plan(r.Context(), &planner.Request{Query: req.Query, Roles: p.Roles, Principal: &p, Tenant: req.Tenant, Project: req.Project})
		if err != nil {
			writeError(w, err)
			return
		}
		for _, n := range ans.Nodes {
			subjects = append(subjects, n.ID)
		}
	default:
		writeError(w, fmt.Errorf("%w: give a subject or a query", errBadRequest))
		return
	}
	var out *particle.Diff
	d.store.Read(func(rd particle.Reader) { out = rd.Diff(ns, subjects, req.From, req.To, p) })
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) httpPredicates(w http.ResponseWriter, r *http.Request) {
	var out []*particle.Predicate
	d.store.Read(func(rd particle.Reader) { out = rd.Predicates() })
	if out == nil {
		out = []*particle.Predicate{}
	}
	writeJSON(w, http.StatusOK, out)
}

// PredicateEdit is the body of PUT /v1/predicates.
type PredicateEdit struct {
	particle.Predicate
	Why string `json:"why"`
}

func (d *Daemon) httpPutPredicate(w http.ResponseWriter, r *http.Request) {
	var e PredicateEdit
	if err := readJSON(r, &e); err != nil {
		writeError(w, err)
		return
	}
	out, err := d.store.ConfigurePredicate(r.Context(), e.Predicate, whoOf(r), e.Why)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// MergeRequest is the body of POST /v1/entities/merge.
type MergeRequest struct {
	Survivor string `json:"survivor"`
	Merged   string `json:"merged"`
	Why      string `json:"why"`
	Tenant   string `json:"tenant,omitempty"`
	Project  string `json:"project,omitempty"`
}

func (d *Daemon) httpMerge(w http.ResponseWriter, r *http.Request) {
	var m MergeRequest
	if err := readJSON(r, &m); err != nil {
		writeError(w, err)
		return
	}
	ns, err := requestNamespace(m.Tenant, m.Project)
	if err != nil {
		writeError(w, err)
		return
	}
	ids := make([]string, 2)
	for i, ref := range []string{m.Survivor, m.Merged} {
		var n *particle.Node
		d.store.Read(func(rd particle.Reader) {
			if n = rd.Node(rd.Resolve(ref)); n == nil {
				n = rd.LookupAny(ns, ref)
			}
		})
		if n == nil {
			writeError(w, fmt.Errorf("entity %q: %w", ref, particle.ErrNotFound))
			return
		}
		ids[i] = n.ID
	}
	rec, err := d.store.MergeNodes(r.Context(), ids[0], ids[1], whoOf(r), m.Why)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (d *Daemon) httpAlias(w http.ResponseWriter, r *http.Request) {
	var a struct {
		Alias string `json:"alias"`
	}
	if err := readJSON(r, &a); err != nil {
		writeError(w, err)
		return
	}
	n, err := d.store.AddAlias(r.Context(), r.PathValue("id"), a.Alias)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}
