package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
)

// TestPolicyAndKeysThroughTheCLI: the first operator key made offline on
// the data dir, then keys and policy edits through a running daemon
// with auth on, each edit in the audit log.
func TestPolicyAndKeysThroughTheCLI(t *testing.T) {
	t.Setenv(keyEnv, "")
	dir := t.TempDir()
	secure := func(c *daemon.Config) {
		c.Data = dir
		c.Security.Auth.Enabled = true
		c.Security.Auth.BootstrapKeyEnv = ""
	}
	// Create the store, stop, then make the first key offline.
	d := testDaemon(t, secure)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "keys", "create", "--data", dir, "--name", "alice", "--role", "operator")
	if err != nil {
		t.Fatalf("offline keys create: %v %s", err, errOut)
	}
	alice := strings.TrimSpace(out)
	if !strings.HasPrefix(alice, "ctxg_") || !strings.Contains(errOut, "not shown again") {
		t.Fatalf("offline key: %q %q", out, errOut)
	}

	d = testDaemon(t, secure)
	url := "http://" + d.HTTPAddr()
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCLI(t, append(args, "--http", url, "--key", alice)...)
		if err != nil {
			t.Fatalf("ctxgraph %v: %v\n%s", args, err, errOut)
		}
		return out
	}
	if _, _, err := runCLI(t, "policy", "list", "--http", url, "--key", "ctxg_nope_nope"); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("a bad key: %v", err)
	}
	visitor := strings.TrimSpace(cli("keys", "create", "--name", "guest", "--role", "visitor", "--ttl", "8h"))
	if _, _, err := runCLI(t, "policy", "deny", "--role", "visitor", "--edge-type", "tool_use", "--why", "x", "--http", url, "--key", visitor); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("a visitor edited policy: %v", err)
	}

	out = cli("policy", "deny", "--role", "visitor", "--edge-type", "tool_use", "--why", "lab tour")
	m := regexp.MustCompile(`create (p-[0-9a-f]+) -> active \(by alice`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("policy deny printed %q", out)
	}
	id := m[1]
	if rules := d.Store().Rules(particle.RuleActive); len(rules) != 1 || rules[0].Target.EdgeType != particle.EdgeToolUse || rules[0].CreatedBy != "alice" {
		t.Fatalf("rules after the CLI deny: %+v", rules)
	}
	if out := cli("policy", "list"); !strings.Contains(out, id) || !strings.Contains(out, "edge_type:tool_use") || !strings.Contains(out, "lab tour") {
		t.Errorf("policy list: %s", out)
	}
	cli("policy", "label", "--sensitivity", "sensitive", "--portable", "false", "--tag", "location:lab", "--why", "lab data stays here")
	if out := cli("policy", "revoke", id, "--why", "tour over"); !strings.Contains(out, "revoke "+id+" -> revoked") {
		t.Errorf("policy revoke printed %q", out)
	}
	var show daemon.PolicyShow
	if err := json.Unmarshal([]byte(cli("policy", "show", id)), &show); err != nil || len(show.Audit) != 2 {
		t.Fatalf("policy show: %+v %v", show, err)
	}
	audit := cli("policy", "audit")
	for _, want := range []string{"lab tour", "tour over", "lab data stays here", "alice"} {
		if !strings.Contains(audit, want) {
			t.Errorf("policy audit lacks %q:\n%s", want, audit)
		}
	}
	if lines := strings.Count(cli("policy", "audit", "--jsonl"), "\n"); lines != 3 {
		t.Errorf("audit --jsonl: %d lines, want 3", lines)
	}

	keys := cli("keys", "list")
	if !strings.Contains(keys, "alice") || !strings.Contains(keys, "guest") || strings.Contains(keys, "ctxg_") {
		t.Errorf("keys list: %s", keys)
	}
	var list []daemon.APIKey
	if err := json.Unmarshal([]byte(cli("keys", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	var guestID string
	for _, k := range list {
		if k.Name == "guest" {
			guestID = k.ID
		}
	}
	get := func(key string) int {
		req, _ := http.NewRequest("GET", url+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(visitor); got != http.StatusOK {
		t.Fatalf("visitor key before revoke: %d", got)
	}
	cli("keys", "revoke", guestID)
	if got := get(visitor); got != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", got)
	}
}
