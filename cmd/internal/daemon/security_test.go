package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
)

const testBootstrapKey = "bootstrap-secret-for-tests-only"

// secureConfig is a test daemon with auth on: a bootstrap operator key
// and NATS users for each kind of client.
func secureConfig(t *testing.T) Config {
	t.Helper()
	t.Setenv("CTXGRAPH_TEST_BOOTSTRAP", testBootstrapKey)
	cfg := testConfig(t.TempDir())
	cfg.Security.Auth.Enabled = true
	cfg.Security.Auth.BootstrapKeyEnv = "CTXGRAPH_TEST_BOOTSTRAP"
	cfg.Security.Auth.NATSUsers = []NATSUser{
		{User: "op", Password: "op-pass", Roles: []string{"operator"}},
		{User: "planner1", Password: "planner-pass", Roles: []string{"planner"}, Agent: "ur5-alpha"},
		{User: "guest", Password: "guest-pass", Roles: []string{"visitor"}},
		{User: "alpha", Password: "alpha-pass", Roles: []string{"controller"}, Agent: "ur5-alpha"},
		// bcrypt of "beta-pass"
		{User: "beta", Password: "$2a$04$UH/tNzah.DWUSCVEO2UikOwiry3jiUI5Z4yZ4NmnmWgnI3jzf8ypK", Roles: []string{"controller"}, Agent: "franka-beta"},
	}
	return cfg
}

// natsUser connects as a configured user; errs collects the async
// errors the server sends (permission violations).
type natsUser struct {
	*controller
	errs chan error
}

func connectAs(t *testing.T, d *Daemon, user, pass string) *natsUser {
	t.Helper()
	errs := make(chan error, 64)
	nc, err := nats.Connect(d.NATSURL(), nats.UserInfo(user, pass), nats.Name("test-"+user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &natsUser{controller: &controller{t: t, d: d, nc: nc, js: js}, errs: errs}
}

// api is an HTTP client of the daemon with one bearer key.
type api struct {
	t    *testing.T
	base string
	key  string
}

func newAPI(t *testing.T, d *Daemon, key string) *api {
	return &api{t: t, base: "http://" + d.HTTPAddr(), key: key}
}

// do sends a request and decodes a JSON answer into out (if not nil);
// it returns the response (body consumed).
func (a *api) do(method, path string, body, out any) *http.Response {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 300 {
		resp.Header.Set("X-Test-Body", string(raw))
	}
	return resp
}

// must is do that fails the test unless the status is want.
func (a *api) must(want int, method, path string, body, out any) *http.Response {
	a.t.Helper()
	resp := a.do(method, path, body, out)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: %s (%s), want %d", method, path, resp.Status, resp.Header.Get("X-Test-Body"), want)
	}
	return resp
}

// newKey creates an API key as the bootstrap operator.
func newKey(t *testing.T, d *Daemon, spec KeySpec) KeyCreated {
	t.Helper()
	var kc KeyCreated
	newAPI(t, d, testBootstrapKey).must(http.StatusCreated, "POST", "/v1/keys", spec, &kc)
	return kc
}

// askAs sends a planner request as a NATS user.
func (u *natsUser) askAs(req planner.Request) *planner.Answer {
	return u.controller.ask(req)
}

func hasToolUse(a *planner.Answer) bool {
	return slices.ContainsFunc(a.Edges, func(e planner.EdgeOut) bool { return e.Type == string(particle.EdgeToolUse) })
}

var toolQuery = planner.Request{Query: "which gripper acts on the red block", Tools: []string{"parallel gripper"},
	Entities: []string{"red block"}, Hops: 2, Budget: 300}

// TestLivePolicyEditsOverHTTPAndNATS: with auth on, an operator denies
// visitors tool_use edges over HTTP; the visitor's very next planner
// request over NATS lacks them; an operator revokes the rule over NATS
// (ctxgraph.policy.edit); the next request has them again; the audit
// log shows both edits with who, when and why.
func TestLivePolicyEditsOverHTTPAndNATS(t *testing.T) {
	d := startDaemon(t, secureConfig(t))
	op := connectAs(t, d, "op", "op-pass")
	op.publishAll(readMessages(t, "episodes.jsonl"))
	op.waitApplied()
	guest := connectAs(t, d, "guest", "guest-pass")
	alice := newAPI(t, d, newKey(t, d, KeySpec{Name: "alice", Roles: []string{"operator"}}).Key)

	if !hasToolUse(guest.askAs(toolQuery)) {
		t.Fatal("before any rule the visitor sees tool_use edges")
	}
	// The visitor cannot claim other roles: the body's roles are ignored.
	q := toolQuery
	q.Roles = []string{"operator"}
	before := time.Now().UTC()
	var created particle.AuditEntry
	alice.must(http.StatusCreated, "POST", "/v1/policies", PolicyRequest{
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{EdgeType: particle.EdgeToolUse}},
		Why:  "visitors on the lab tour see no tool use",
	}, &created)
	if a := guest.askAs(q); hasToolUse(a) {
		t.Fatalf("the deny did not apply to the next request: %v", edgeNames(a))
	}
	planner1 := connectAs(t, d, "planner1", "planner-pass")
	if !hasToolUse(planner1.askAs(toolQuery)) {
		t.Fatal("the deny hid tool_use edges from a planner")
	}

	// Revoke over NATS as the operator user.
	body, _ := json.Marshal(PolicyRequest{Op: "revoke", ID: created.RuleID, Why: "tour is over"})
	reply, err := op.nc.Request("ctxgraph.policy.edit", body, 5*time.Second)
	if err != nil || reply.Header.Get("Status") != "" {
		t.Fatalf("revoke over NATS: %v %s", err, reply.Data)
	}
	if !hasToolUse(guest.askAs(toolQuery)) {
		t.Fatal("the revoke did not restore access on the next request")
	}

	var audit []particle.AuditEntry
	alice.must(http.StatusOK, "GET", "/v1/policies/audit?rule="+created.RuleID, nil, &audit)
	if len(audit) != 2 {
		t.Fatalf("audit = %+v, want the create and the revoke", audit)
	}
	c, r := audit[0], audit[1]
	if c.Op != particle.OpCreate || c.Who != "alice" || c.Why != "visitors on the lab tour see no tool use" || c.Before != nil || c.After.Status != particle.RuleActive {
		t.Errorf("create entry = %+v", c)
	}
	if r.Op != particle.OpRevoke || r.Who != "op" || r.Why != "tour is over" || r.Before.Status != particle.RuleActive || r.After.Status != particle.RuleRevoked {
		t.Errorf("revoke entry = %+v", r)
	}
	if c.At.Before(before.Add(-time.Second)) || r.At.Before(c.At) {
		t.Errorf("audit times: create %v, revoke %v (test began %v)", c.At, r.At, before)
	}
	// Exportable as JSON lines.
	resp, err := http.NewRequest("GET", alice.base+"/v1/policies/audit?format=jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer "+alice.key)
	hr, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if n := strings.Count(strings.TrimSpace(string(lines)), "\n") + 1; n < 2 {
		t.Errorf("audit export: %d lines", n)
	}
}

// TestAuthHTTP: no key 401, bad/expired/revoked key 401, a visitor key
// cannot edit policy (403), all recorded as denials.
func TestAuthHTTP(t *testing.T) {
	d := startDaemon(t, secureConfig(t))
	boot := newAPI(t, d, testBootstrapKey)
	visitor := newKey(t, d, KeySpec{Name: "tour-guest", Roles: []string{"visitor"}})
	short := newKey(t, d, KeySpec{Name: "short-lived", Roles: []string{"planner"}, TTL: Duration(time.Nanosecond)})
	revoked := newKey(t, d, KeySpec{Name: "leaked", Roles: []string{"planner"}})
	boot.must(http.StatusOK, "DELETE", "/v1/keys/"+revoked.APIKey.ID, nil, nil)

	for _, tc := range []struct {
		name, key string
		method    string
		path      string
		want      int
	}{
		{"no key", "", "GET", "/v1/stats", http.StatusUnauthorized},
		{"garbage key", "nope", "GET", "/v1/stats", http.StatusUnauthorized},
		{"forged key", "ctxg_" + visitor.APIKey.ID + "_forged", "GET", "/v1/stats", http.StatusUnauthorized},
		{"expired key", short.Key, "GET", "/v1/stats", http.StatusUnauthorized},
		{"revoked key", revoked.Key, "GET", "/v1/stats", http.StatusUnauthorized},
		{"visitor reads", visitor.Key, "GET", "/v1/stats", http.StatusOK},
		{"visitor lists policies", visitor.Key, "GET", "/v1/policies", http.StatusForbidden},
		{"visitor edits policy", visitor.Key, "POST", "/v1/policies", http.StatusForbidden},
		{"visitor creates a key", visitor.Key, "POST", "/v1/keys", http.StatusForbidden},
		{"visitor forgets", visitor.Key, "POST", "/v1/forget", http.StatusForbidden},
		{"health needs nothing", "", "GET", "/healthz", http.StatusOK},
	} {
		body := any(nil)
		if tc.method == "POST" {
			body = PolicyRequest{Rule: &particle.Rule{Effect: particle.EffectAllow, Roles: []string{"visitor"}, Target: particle.Target{Scope: "*"}}, Why: "let me in"}
		}
		resp := newAPI(t, d, tc.key).do(tc.method, tc.path, body, nil)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s %s: %s, want %d", tc.name, tc.method, tc.path, resp.Status, tc.want)
		}
		if tc.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	if got := len(d.Store().Rules("")); got != 0 {
		t.Errorf("a refused edit left %d rules", got)
	}
	var dens []particle.Denial
	boot.must(http.StatusOK, "GET", "/v1/policies/denials", nil, &dens)
	count := map[int]int{}
	for _, dn := range dens {
		count[dn.Status]++
	}
	if count[401] != 5 || count[403] != 4 {
		t.Errorf("denials recorded: %v (want 5×401, 4×403): %+v", count, dens)
	}
	forbidden := slices.IndexFunc(dens, func(dn particle.Denial) bool { return dn.Status == 403 && dn.Item == "POST /v1/policies" })
	if forbidden < 0 || dens[forbidden].Subject != "tour-guest" || !slices.Contains(dens[forbidden].Roles, "visitor") {
		t.Errorf("the 403 does not say who: %+v", dens)
	}
	var keys []APIKey
	boot.must(http.StatusOK, "GET", "/v1/keys", nil, &keys)
	for _, k := range keys {
		if k.Hash != "" {
			t.Errorf("key list shows a hash: %+v", k)
		}
		if k.ID == revoked.APIKey.ID && k.RevokedAt.IsZero() {
			t.Error("revoked key not marked revoked")
		}
	}
}

// TestAuthNATS: users need credentials; a controller may publish only
// its own agent's episodes and read nothing else (not the planner's
// requests, not its answers); a visitor may not edit policy.
func TestAuthNATS(t *testing.T) {
	d := startDaemon(t, secureConfig(t))
	op := connectAs(t, d, "op", "op-pass")

	if _, err := nats.Connect(d.NATSURL()); err == nil {
		t.Error("a connection without credentials was accepted")
	}
	if _, err := nats.Connect(d.NATSURL(), nats.UserInfo("alpha", "wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
	if _, err := nats.Connect(d.NATSURL(), nats.UserInfo("beta", "nope")); err == nil {
		t.Error("a wrong password (bcrypt) was accepted")
	}

	// The controllers publish their own episodes.
	msgs := readMessages(t, "episodes.jsonl")
	alpha := connectAs(t, d, "alpha", "alpha-pass")
	beta := connectAs(t, d, "beta", "beta-pass")
	for _, m := range msgs {
		c := alpha.controller
		if m.Agent == "franka-beta" {
			c = beta.controller
		}
		c.publishAll([]*rlds.Message{m})
	}
	op.waitApplied()
	if st := d.Store().Counts(); st.Steps != 32 {
		t.Fatalf("steps applied: %d, want 32", st.Steps)
	}

	// alpha cannot publish as franka-beta.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	forged := []byte(`{"kind":"episode_start","agent":"franka-beta","episode_id":"forged","start":{"start_time":"2026-01-01T00:00:00Z"}}`)
	if _, err := alpha.js.Publish(ctx, "ctxgraph.rlds.franka-beta.forged", forged); err == nil {
		t.Error("controller alpha published as franka-beta")
	}
	wantViolation(t, alpha.errs, "Publish")
	// Nor ask the planner, nor listen to it.
	if _, err := alpha.nc.Request("ctxgraph.planner.context", []byte(`{"query":"red block"}`), 500*time.Millisecond); err == nil {
		t.Error("a controller got a planner answer")
	}
	wantViolation(t, alpha.errs, "Publish")
	if _, err := alpha.nc.SubscribeSync("ctxgraph.planner.context"); err != nil {
		t.Fatal(err)
	}
	if err := alpha.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, alpha.errs, "Subscription")
	// Its inbox is its own: it hears nothing of another user's answers.
	spy, err := alpha.nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	planner1 := connectAs(t, d, "planner1", "planner-pass")
	if a := planner1.askAs(redBlockQuery); len(a.Edges) == 0 {
		t.Fatal("the planner user got an empty answer")
	}
	if err := alpha.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := spy.Pending(); n != 0 {
		t.Errorf("controller alpha overheard %d messages of another user", n)
	}
	if _, err := d.Store().Episode(particle.DefaultNamespace, "forged"); err == nil {
		t.Error("the forged episode reached the graph")
	}

	// A visitor may not edit policy over NATS: 403, recorded.
	guest := connectAs(t, d, "guest", "guest-pass")
	body, _ := json.Marshal(PolicyRequest{Op: "create", Why: "x",
		Rule: &particle.Rule{Effect: particle.EffectAllow, Roles: []string{"visitor"}, Target: particle.Target{Scope: "*"}}})
	reply, err := guest.nc.Request("ctxgraph.policy.edit", body, 5*time.Second)
	if err != nil || reply.Header.Get("Status") != "403" {
		t.Fatalf("visitor policy edit: %v status %q %s", err, reply.Header.Get("Status"), reply.Data)
	}
	// The planner's roles come from its user, not the request body.
	q := planner.Request{Query: "fixture calibration offset of the hole", Entities: []string{"fixture", "hole"}, Hops: 2, Budget: 500, Roles: []string{"operator"}}
	if findEdge(guest.askAs(q), "fixture", "calibration_offset", "hole") != nil {
		t.Error("a visitor claimed the operator role in the request body and got a denied edge")
	}
	if findEdge(planner1.askAs(q), "fixture", "calibration_offset", "hole") == nil {
		t.Error("the planner user should see the calibration edge")
	}

	d.sec.denials.flush()
	dens, err := d.Store().Denials(time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	has := func(action string, status int, subject string) bool {
		return slices.ContainsFunc(dens, func(dn particle.Denial) bool {
			return dn.Action == action && dn.Status == status && (subject == "" || dn.Subject == subject)
		})
	}
	for _, want := range []struct {
		action  string
		status  int
		subject string
	}{{"nats.connect", 401, ""}, {"nats.connect", 401, "alpha"}, {"nats.publish", 403, "alpha"}, {"nats.subscribe", 403, "alpha"}, {"nats", 403, "guest"}} {
		if !has(want.action, want.status, want.subject) {
			t.Errorf("no %s %d denial of %q recorded: %+v", want.action, want.status, want.subject, dens)
		}
	}
}

// wantViolation waits for the server's permission violation error.
func wantViolation(t *testing.T, errs chan error, kind string) {
	t.Helper()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "Permissions Violation") {
			t.Errorf("async error %v, want a permission violation", err)
		} else if !strings.Contains(err.Error(), kind) {
			t.Errorf("violation %v, want %s", err, kind)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no %s permission violation reported", kind)
	}
}

// TestDenialsTightenPolicy: a visitor denied the same node's facts three
// times gets a pending deny rule on that node; once an operator
// approves it, the whole node is gone for visitors.
func TestDenialsTightenPolicy(t *testing.T) {
	cfg := secureConfig(t)
	cfg.Security.Policy.TightenAfter = 3
	cfg.Security.Policy.TightenWindow = time.Hour
	d := startDaemon(t, cfg)
	op := connectAs(t, d, "op", "op-pass")
	op.publishAll(readMessages(t, "episodes.jsonl"))
	op.waitApplied()
	var calib, fixture string
	d.Store().Read(func(r particle.Reader) {
		fixture = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "fixture").ID
		r.Edges(func(e *particle.Edge) bool {
			if e.Predicate() == "calibration_offset" {
				calib = e.ID
			}
			return true
		})
	})
	visitor := newAPI(t, d, newKey(t, d, KeySpec{Name: "curious", Roles: []string{"visitor"}}).Key)
	boot := newAPI(t, d, testBootstrapKey)
	var node particle.Node
	visitor.must(http.StatusOK, "GET", "/v1/nodes/"+fixture, nil, &node)

	for i := range 3 {
		visitor.must(http.StatusNotFound, "GET", "/v1/edges/"+calib, nil, nil)
		var pending []particle.Rule
		boot.must(http.StatusOK, "GET", "/v1/policies?status=pending", nil, &pending)
		if i < 2 && len(pending) != 0 {
			t.Fatalf("proposal after %d denials", i+1)
		}
		if i == 2 {
			if len(pending) != 1 {
				t.Fatalf("after 3 denials: pending rules %+v, want one", pending)
			}
			p := pending[0]
			if p.Effect != particle.EffectDeny || !slices.Equal(p.Roles, []string{"visitor"}) || p.Target.Node != fixture ||
				p.Source != "tightening" || p.Proposal == nil || p.Proposal.Denials != 3 {
				t.Fatalf("proposal = %+v", p)
			}
			// Pending: no effect yet.
			visitor.must(http.StatusOK, "GET", "/v1/nodes/"+fixture, nil, nil)
			var a particle.AuditEntry
			boot.must(http.StatusOK, "POST", "/v1/policies/"+p.ID+"/approve", PolicyRequest{Why: "yes, keep visitors off the fixture"}, &a)
			if a.After.Status != particle.RuleActive || a.Who != "bootstrap" {
				t.Fatalf("approve = %+v", a)
			}
		}
	}
	visitor.must(http.StatusNotFound, "GET", "/v1/nodes/"+fixture, nil, nil)
	guest := connectAs(t, d, "guest", "guest-pass")
	a := guest.askAs(planner.Request{Query: "peg and fixture", Entities: []string{"fixture", "peg", "hole"}, Hops: 2, Budget: 500})
	for _, e := range a.Edges {
		if e.Source == fixture || e.Target == fixture {
			t.Errorf("visitor still gets %s -%s-> %s", e.SourceName, e.Predicate, e.TargetName)
		}
	}
	if !slices.ContainsFunc(a.Unknowns, func(u planner.Unknown) bool { return u.Name == "fixture" }) {
		t.Errorf("the hidden fixture should be unknown to the visitor: %+v", a.Unknowns)
	}
	var denials []particle.Denial
	boot.must(http.StatusOK, "GET", "/v1/policies/denials", nil, &denials)
	reads := 0
	for _, dn := range denials {
		if dn.Action == "read" && dn.Subject == "curious" && dn.Scope == fixture {
			reads++
			if dn.Rule == "" || dn.Reason == "" {
				t.Errorf("denial without its rule: %+v", dn)
			}
		}
	}
	if reads < 4 {
		t.Errorf("%d read denials recorded about the fixture, want ≥ 4", reads)
	}
	var audit []particle.AuditEntry
	boot.must(http.StatusOK, "GET", "/v1/policies/audit", nil, &audit)
	if len(audit) != 2 || audit[0].Op != particle.OpPropose || audit[0].Who != "denial-tightening" || audit[1].Op != particle.OpApprove {
		t.Errorf("audit = %+v", audit)
	}
}

// TestRateLimits: past its burst a principal gets 429 with Retry-After,
// over HTTP and NATS; another principal is unaffected.
func TestRateLimits(t *testing.T) {
	cfg := secureConfig(t)
	cfg.Security.RateLimit.Roles = map[string]RoleLimit{"visitor": {RequestsPerSecond: 0.001, Burst: 2}}
	d := startDaemon(t, cfg)
	v := newAPI(t, d, newKey(t, d, KeySpec{Name: "v", Roles: []string{"visitor"}}).Key)
	v.must(http.StatusOK, "GET", "/v1/stats", nil, nil)
	v.must(http.StatusOK, "GET", "/v1/stats", nil, nil)
	resp := v.must(http.StatusTooManyRequests, "GET", "/v1/stats", nil, nil)
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without a useful Retry-After: %q", ra)
	}
	newAPI(t, d, testBootstrapKey).must(http.StatusOK, "GET", "/v1/stats", nil, nil)

	guest := connectAs(t, d, "guest", "guest-pass")
	var last *nats.Msg
	for range 3 {
		m, err := guest.nc.Request("ctxgraph.planner.context", []byte(`{"query":"red block"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	if last.Header.Get("Status") != "429" || last.Header.Get("Retry-After") == "" {
		t.Errorf("third NATS request: status %q retry %q: %s", last.Header.Get("Status"), last.Header.Get("Retry-After"), last.Data)
	}
}

func TestRefusesToListenBeyondLoopbackWithoutAuth(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NATS.Addr = "0.0.0.0:0"
	_, err := Start(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "auth.enabled") {
		t.Fatalf("start on 0.0.0.0 without auth: %v", err)
	}
	cfg.HTTP.Addr, cfg.NATS.Addr = "0.0.0.0:0", "127.0.0.1:0"
	if _, err := Start(context.Background(), cfg, nil); err == nil {
		t.Fatal("HTTP on 0.0.0.0 without auth started")
	}
	sc := secureConfig(t)
	sc.NATS.Addr = "0.0.0.0:0"
	d := startDaemon(t, sc)
	if !strings.Contains(d.NATSURL(), ":") {
		t.Fatal(fmt.Sprint("no NATS URL: ", d.NATSURL()))
	}
}
