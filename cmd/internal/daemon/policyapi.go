package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/particle"
)

// PolicyRequest is a policy edit or query, over HTTP (the body of
// POST/PUT/DELETE /v1/policies...) and NATS (ctxgraph.policy.edit).
type PolicyRequest struct {
	// Op is the NATS operation: list, show, create, update, revoke,
	// approve, reject, audit, denials. HTTP takes it from the route.
	Op   string         `json:"op,omitempty"`
	ID   string         `json:"id,omitempty"`
	Rule *particle.Rule `json:"rule,omitempty"`
	// Why is required for every edit.
	Why string `json:"why,omitempty"`
	// Who names the editor when auth is off; with auth on it is the
	// authenticated caller and this field is ignored.
	Who string `json:"who,omitempty"`
	// Status filters list; Limit keeps the most recent audit entries or
	// denials; Since bounds denials.
	Status particle.RuleStatus `json:"status,omitempty"`
	Limit  int                 `json:"limit,omitempty"`
	Since  time.Time           `json:"since,omitzero"`
}

// PolicyShow is a rule with its audit trail.
type PolicyShow struct {
	Rule  particle.Rule         `json:"rule"`
	Audit []particle.AuditEntry `json:"audit"`
}

func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/policies", d.httpPolicies)
		mux.HandleFunc("POST /v1/policies", d.httpPolicyEdit("create"))
		mux.HandleFunc("GET /v1/policies/audit", d.httpPolicyAudit)
		mux.HandleFunc("GET /v1/policies/denials", d.httpPolicyDenials)
		mux.HandleFunc("GET /v1/policies/{id}", d.httpPolicyEdit("show"))
		mux.HandleFunc("PUT /v1/policies/{id}", d.httpPolicyEdit("update"))
		mux.HandleFunc("DELETE /v1/policies/{id}", d.httpPolicyEdit("revoke"))
		mux.HandleFunc("POST /v1/policies/{id}/approve", d.httpPolicyEdit("approve"))
		mux.HandleFunc("POST /v1/policies/{id}/reject", d.httpPolicyEdit("reject"))
	})
	extraResponders = append(extraResponders, func(d *Daemon) error {
		subj := d.cfg.Prefix() + ".policy.edit"
		if _, err := d.nc.QueueSubscribe(subj, "ctxgraph", d.guardNATS(d.onPolicyEdit)); err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		return nil
	})
}

// policy runs one policy request for caller c.
func (d *Daemon) policy(ctx context.Context, c caller, req PolicyRequest) (any, int, error) {
	who := c.who()
	if !c.Authenticated && req.Who != "" {
		who = req.Who
	}
	switch req.Op {
	case "list":
		out := d.store.Rules(req.Status)
		if out == nil {
			out = []particle.Rule{}
		}
		return out, http.StatusOK, nil
	case "show":
		r, err := d.store.Rule(req.ID)
		if err != nil {
			return nil, 0, err
		}
		audit, err := d.store.PolicyAudit(req.ID, 0)
		if audit == nil {
			audit = []particle.AuditEntry{}
		}
		return PolicyShow{Rule: r, Audit: audit}, http.StatusOK, err
	case "audit":
		out, err := d.store.PolicyAudit(req.ID, req.Limit)
		if out == nil {
			out = []particle.AuditEntry{}
		}
		return out, http.StatusOK, err
	case "denials":
		d.sec.denials.flush()
		out, err := d.store.Denials(req.Since, req.Limit)
		if out == nil {
			out = []particle.Denial{}
		}
		return out, http.StatusOK, err
	}
	ed := particle.Edit{Op: particle.EditOp(req.Op), ID: req.ID, Rule: req.Rule, Who: who, Why: req.Why}
	switch ed.Op {
	case particle.OpCreate, particle.OpUpdate:
		if req.Rule == nil {
			return nil, 0, fmt.Errorf("%w: %s needs a rule", errBadRequest, ed.Op)
		}
		r := *req.Rule
		if err := d.resolveTarget(&r); err != nil {
			return nil, 0, err
		}
		r.Source = "operator"
		ed.Rule = &r
	case particle.OpRevoke, particle.OpApprove, particle.OpReject:
	default:
		return nil, 0, fmt.Errorf("%w: policy op %q (want list, show, create, update, revoke, approve, reject, audit, denials)", errBadRequest, req.Op)
	}
	a, err := d.store.EditPolicy(ctx, ed)
	if err != nil {
		return nil, 0, err
	}
	d.log.Info("policy edit", "op", a.Op, "rule", a.RuleID, "who", a.Who, "why", a.Why)
	status := http.StatusOK
	if ed.Op == particle.OpCreate {
		status = http.StatusCreated
	}
	return a, status, nil
}

// resolveTarget turns a node target given by name into its id.
func (d *Daemon) resolveTarget(r *particle.Rule) error {
	if r.Target.Node == "" {
		return nil
	}
	ns := r.Namespace
	if ns == "" {
		ns = particle.DefaultNamespace
	}
	var n *particle.Node
	d.store.Read(func(rd particle.Reader) {
		if n = rd.Node(rd.Resolve(r.Target.Node)); n == nil {
			n = rd.LookupAny(ns, r.Target.Node)
		}
	})
	if n == nil {
		return fmt.Errorf("%w: target node %q: no node has that id or name", errBadRequest, r.Target.Node)
	}
	r.Target.Node = n.ID
	return nil
}

func (d *Daemon) httpPolicies(w http.ResponseWriter, r *http.Request) {
	d.servePolicy(w, r, PolicyRequest{Op: "list", Status: particle.RuleStatus(r.URL.Query().Get("status"))})
}

func (d *Daemon) httpPolicyAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	req := PolicyRequest{Op: "audit", ID: q.Get("rule"), Limit: limit}
	if q.Get("format") == "jsonl" {
		out, _, err := d.policy(r.Context(), callerOf(r), req)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for _, a := range out.([]particle.AuditEntry) {
			_ = enc.Encode(a)
		}
		return
	}
	d.servePolicy(w, r, req)
}

func (d *Daemon) httpPolicyDenials(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	req := PolicyRequest{Op: "denials", Limit: limit}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeError(w, fmt.Errorf("%w: since: %v", errBadRequest, err))
			return
		}
		req.Since = t
	}
	d.servePolicy(w, r, req)
}

// httpPolicyEdit serves the routes of one op; the body (if any) is a
// PolicyRequest, or a bare rule for create and update.
func (d *Daemon) httpPolicyEdit(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := PolicyRequest{}
		if r.Method != http.MethodGet {
			body, err := readBody(r)
			if err != nil {
				writeError(w, err)
				return
			}
			if len(body) > 0 {
				if err := json.Unmarshal(body, &req); err != nil {
					writeError(w, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err))
					return
				}
			}
		}
		if req.Why == "" {
			req.Why = r.URL.Query().Get("why")
		}
		req.Op, req.ID = op, r.PathValue("id")
		d.servePolicy(w, r, req)
	}
}

func (d *Daemon) servePolicy(w http.ResponseWriter, r *http.Request, req PolicyRequest) {
	out, status, err := d.policy(r.Context(), callerOf(r), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, out)
}

// onPolicyEdit serves ctxgraph.policy.edit: operators only.
func (d *Daemon) onPolicyEdit(ctx context.Context, m *nats.Msg) {
	c := natsCallerOf(ctx)
	var req PolicyRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		d.respond(m, nil, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err))
		return
	}
	if d.sec.enabled && !c.HasRole(RoleOperator) {
		d.sec.deny(ctx, c, particle.Denial{Action: "nats", Item: m.Subject + " " + req.Op, Status: http.StatusForbidden, Reason: "policy edits need the operator role"})
		d.respond(m, nil, fmt.Errorf("%w: policy edits need the operator role", errForbidden))
		return
	}
	out, _, err := d.policy(ctx, c, req)
	d.respond(m, out, err)
}
