package particle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// lab builds a small graph: ur5-alpha uses a gripper that acts on the
// fixture; the fixture has a calibration offset to the hole; the
// episode ran in the kitchen lab.
func lab(t *testing.T, s *particle.Store) map[string]*particle.Edge {
	t.Helper()
	edges := map[string]*particle.Edge{}
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		ns := particle.DefaultNamespace
		res := func(tp particle.NodeType, name string) *particle.Node {
			n, _, err := b.Resolve(ns, tp, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PutNode(n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		agent, tool := res(particle.NodeAgent, "ur5-alpha"), res(particle.NodeTool, "gripper")
		fixture, hole := res(particle.NodeEntity, "fixture"), res(particle.NodeEntity, "hole")
		loc := res(particle.NodeLocation, "Kitchen Lab")
		fixture.Attributes.Tags = []string{"zone:b"}
		prov := particle.Provenance{EpisodeID: "ep-1", Agent: "ur5-alpha"}
		for name, o := range map[string]particle.Observation{
			"uses":   {Source: agent.ID, Target: tool.ID, Type: particle.EdgeToolUse, Predicate: "uses"},
			"acts":   {Source: tool.ID, Target: fixture.ID, Type: particle.EdgeToolUse, Predicate: "acts_on", Location: "kitchen lab"},
			"calib":  {Source: fixture.ID, Target: hole.ID, Type: particle.EdgeAssertion, Predicate: "calibration_offset", Value: "0.4mm", Policy: particle.Policy{DenyRoles: []string{"visitor"}}},
			"at":     {Source: agent.ID, Target: loc.ID, Type: particle.EdgeTemporal, Predicate: "located_at"},
			"inhole": {Source: hole.ID, Target: fixture.ID, Type: particle.EdgeMembership, Predicate: "part_of"},
		} {
			o.Namespace, o.Provenance = ns, prov
			e, _, err := b.Observe(o)
			if err != nil {
				t.Fatal(err)
			}
			edges[name] = e
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return edges
}

func visible(s *particle.Store, e *particle.Edge, roles ...string) bool {
	cur, err := s.Edge(e.ID)
	if err != nil {
		return false
	}
	return s.EdgeVisible(cur, particle.Principal{Roles: roles})
}

func edit(t *testing.T, s *particle.Store, ed particle.Edit) *particle.AuditEntry {
	t.Helper()
	a, err := s.EditPolicy(context.Background(), ed)
	if err != nil {
		t.Fatalf("edit %+v: %v", ed, err)
	}
	return a
}

func TestPolicyEditsApplyAtOnceAndAreAudited(t *testing.T) {
	s := openStore(t, t.TempDir())
	e := lab(t, s)
	if !visible(s, e["uses"], "visitor") || visible(s, e["calib"], "visitor") || !visible(s, e["calib"], "planner") {
		t.Fatal("before any rule: only the edge's own deny list applies")
	}

	// Deny visitors every tool_use edge.
	a := edit(t, s, particle.Edit{Op: particle.OpCreate, Who: "alice", Why: "visitors see no tool use",
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{EdgeType: particle.EdgeToolUse}}})
	id := a.RuleID
	if a.Before != nil || a.After == nil || a.After.Status != particle.RuleActive || a.Who != "alice" {
		t.Fatalf("audit of a create: %+v", a)
	}
	if visible(s, e["uses"], "visitor") || visible(s, e["acts"], "visitor") || !visible(s, e["uses"], "planner") {
		t.Fatal("deny rule not applied at once")
	}
	if !visible(s, e["at"], "visitor") {
		t.Fatal("deny rule hid an edge of another type")
	}
	// Deny beats allow, even a more specific allow.
	edit(t, s, particle.Edit{Op: particle.OpCreate, Who: "alice", Why: "visitors may see this one",
		Rule: &particle.Rule{Effect: particle.EffectAllow, Roles: []string{"visitor"}, Target: particle.Target{Edge: e["uses"].ID}}})
	if visible(s, e["uses"], "visitor") {
		t.Fatal("an allow beat a deny")
	}

	// The rule is in the graph: a policy node, operators only.
	pn, err := s.Node(particle.PolicyNodeID(particle.DefaultNamespace, id))
	if err != nil || pn.Type != particle.NodePolicy || pn.Attributes.Props["target"] != "edge_type:tool_use" {
		t.Fatalf("policy node: %+v %v", pn, err)
	}
	if s.NodeVisible(pn, particle.Principal{Roles: []string{"planner"}}) || !s.NodeVisible(pn, particle.Principal{Roles: []string{"operator"}}) {
		t.Error("policy nodes are for operators only")
	}

	// Revoke restores.
	edit(t, s, particle.Edit{Op: particle.OpRevoke, ID: id, Who: "bob", Why: "demo over"})
	if !visible(s, e["uses"], "visitor") {
		t.Fatal("revoke did not restore access")
	}
	if _, err := s.EditPolicy(context.Background(), particle.Edit{Op: particle.OpRevoke, ID: id, Who: "bob", Why: "again"}); !errors.Is(err, particle.ErrInvalid) {
		t.Errorf("revoking twice: %v, want ErrInvalid", err)
	}
	log, err := s.PolicyAudit(id, 0)
	if err != nil || len(log) != 2 || log[0].Op != particle.OpCreate || log[1].Op != particle.OpRevoke ||
		log[1].Who != "bob" || log[1].Why != "demo over" || log[1].Before.Status != particle.RuleActive || log[1].After.Status != particle.RuleRevoked {
		t.Fatalf("audit of the rule: %+v %v", log, err)
	}
	if !log[0].At.Before(log[1].At) && !log[0].At.Equal(log[1].At) {
		t.Error("audit out of order")
	}

	// Who and why are required; bad rules are refused.
	for _, ed := range []particle.Edit{
		{Op: particle.OpCreate, Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}, Target: particle.Target{Tag: "t"}}},
		{Op: particle.OpCreate, Who: "a", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}, Target: particle.Target{Tag: "t"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Target: particle.Target{Tag: "t"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}, Target: particle.Target{Tag: "t", Node: "n"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: "maybe", Roles: []string{"v"}, Target: particle.Target{Tag: "t"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectLabel, Target: particle.Target{Tag: "t"}}},
		{Op: particle.OpCreate, Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}, Target: particle.Target{EdgeType: "teleport"}}},
		{Op: particle.OpApprove, ID: id, Who: "a", Why: "x"},
		{Op: particle.OpUpdate, ID: "p-nope", Who: "a", Why: "x", Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"v"}, Target: particle.Target{Tag: "t"}}},
	} {
		if _, err := s.EditPolicy(context.Background(), ed); err == nil {
			t.Errorf("edit %+v accepted", ed)
		}
	}
}

func TestPolicyTargets(t *testing.T) {
	s := openStore(t, t.TempDir())
	e := lab(t, s)
	var fixture, locNode *particle.Node
	s.Read(func(r particle.Reader) {
		fixture = r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "fixture")
		locNode = r.Lookup(particle.DefaultNamespace, particle.NodeLocation, "kitchen lab")
	})
	rule := func(r particle.Rule) string {
		return edit(t, s, particle.Edit{Op: particle.OpCreate, Who: "op", Why: "test", Rule: &r}).RuleID
	}
	revoke := func(id string) { edit(t, s, particle.Edit{Op: particle.OpRevoke, ID: id, Who: "op", Why: "test"}) }

	// A node: the node and every edge touching it.
	id := rule(particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Node: fixture.ID}})
	if s.NodeVisible(fixture, particle.Principal{Roles: []string{"visitor"}}) || visible(s, e["acts"], "visitor") || visible(s, e["inhole"], "visitor") {
		t.Error("node deny must hide the node and its edges")
	}
	if !visible(s, e["uses"], "visitor") {
		t.Error("node deny hid an unrelated edge")
	}
	// The rule is attached in the graph by a policy edge.
	var governs int
	s.Read(func(r particle.Reader) {
		r.In(fixture.ID, func(pe *particle.Edge) bool {
			if pe.Type == particle.EdgePolicy && pe.Source == particle.PolicyNodeID(particle.DefaultNamespace, id) {
				governs++
			}
			return true
		})
	})
	if governs != 1 {
		t.Errorf("policy edges from the rule's node to the fixture: %d, want 1", governs)
	}
	revoke(id)
	governs = 0
	s.Read(func(r particle.Reader) {
		r.In(fixture.ID, func(pe *particle.Edge) bool {
			if pe.Type == particle.EdgePolicy {
				governs++
			}
			return true
		})
	})
	if governs != 0 {
		t.Error("a revoked rule must not stay attached")
	}

	// A tag, including the derived location tag.
	id = rule(particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Tag: "zone:b"}})
	if s.NodeVisible(fixture, particle.Principal{Roles: []string{"visitor"}}) || visible(s, e["acts"], "visitor") {
		t.Error("tag deny must hide tagged nodes and their edges")
	}
	revoke(id)
	id = rule(particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Tag: "location:KITCHEN  lab"}})
	if s.NodeVisible(locNode, particle.Principal{Roles: []string{"visitor"}}) || visible(s, e["acts"], "visitor") || visible(s, e["at"], "visitor") {
		t.Error("location tag must hide the location node, edges at it and edges to it")
	}
	if !visible(s, e["calib"], "planner") {
		t.Error("location tag hid an edge elsewhere")
	}
	revoke(id)

	// A scope: most specific allow wins.
	id = rule(particle.Rule{Effect: particle.EffectAllow, Roles: []string{"operator"}, Target: particle.Target{Scope: particle.DefaultNamespace}})
	if visible(s, e["uses"], "planner") || !visible(s, e["uses"], "operator") {
		t.Error("scope allow must admit only its roles")
	}
	// A type-level allow is more specific than the scope's, but the
	// endpoints are still under the scope's allow.
	id2 := rule(particle.Rule{Effect: particle.EffectAllow, Roles: []string{"planner"}, Target: particle.Target{EdgeType: particle.EdgeToolUse}})
	if visible(s, e["uses"], "planner") {
		t.Error("an edge between nodes the caller may not see must stay hidden")
	}
	revoke(id)
	if !visible(s, e["uses"], "planner") || visible(s, e["uses"], "visitor") {
		t.Error("edge type allow: planner only")
	}
	revoke(id2)

	// Labels: a personal item is its subject's.
	id = rule(particle.Rule{Effect: particle.EffectLabel, Sensitivity: particle.SensitivitySensitive, Target: particle.Target{Edge: e["at"].ID}})
	at, _ := s.Edge(e["at"].ID)
	if s.EdgeVisible(at, particle.Principal{Roles: []string{"planner"}}) {
		t.Error("a sensitive edge is hidden from others")
	}
	if !s.EdgeVisible(at, particle.Principal{Roles: []string{"planner"}, Agent: "ur5-alpha"}) {
		t.Error("a sensitive edge is visible to its subject (the observing agent)")
	}
	if s.EdgeVisible(at, particle.Principal{Roles: []string{"planner"}, Agent: "ur5-alpha", Shared: true}) {
		t.Error("a sensitive edge is hidden in a shared context")
	}
	revoke(id)
	f := false
	id = rule(particle.Rule{Effect: particle.EffectLabel, Portable: &f, Target: particle.Target{Edge: e["at"].ID}})
	if !s.EdgeVisible(at, particle.Principal{Agent: "ur5-alpha"}) || s.EdgeVisible(at, particle.Principal{Agent: "ur5-beta"}) ||
		s.EdgeVisible(at, particle.Principal{Agent: "ur5-alpha", Export: true}) {
		t.Error("a non-portable edge stays in its context and never leaves in an export")
	}
	revoke(id)
	if got := len(s.Rules(particle.RuleActive)); got != 0 {
		t.Errorf("%d active rules after revoking all", got)
	}
}

func TestPolicyPersistsAndSnapshotsEnforceIt(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	e := lab(t, s)
	a := edit(t, s, particle.Edit{Op: particle.OpPropose, Who: "tightening", Why: "5 denials",
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{EdgeType: particle.EdgeTemporal}, Source: "tightening"}})
	if a.After.Status != particle.RulePending || !visible(s, e["at"], "visitor") {
		t.Fatal("a pending rule must not apply")
	}
	edit(t, s, particle.Edit{Op: particle.OpApprove, ID: a.RuleID, Who: "alice", Why: "yes"})
	if visible(s, e["at"], "visitor") {
		t.Fatal("an approved rule applies")
	}
	// A policy edge of the graph attaches roles to its target.
	_, err := s.Update(context.Background(), func(b *particle.Batch) error {
		pol, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "lab privacy")
		if err != nil {
			return err
		}
		if err := b.PutNode(pol); err != nil {
			return err
		}
		_, _, err = b.Observe(particle.Observation{Namespace: particle.DefaultNamespace, Source: pol.ID, Target: e["calib"].Target,
			Type: particle.EdgePolicy, Predicate: "restricts", Policy: particle.Policy{DenyRoles: []string{"planner"}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if visible(s, e["calib"], "planner") || visible(s, e["inhole"], "planner") {
		t.Fatal("a policy edge of the graph must hide its target node for the denied role")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	if visible(s, e["at"], "visitor") || visible(s, e["calib"], "planner") {
		t.Fatal("rules lost on reopen")
	}
	// The approved rule and the graph policy edge's deny.
	if rs := s.Rules(particle.RuleActive); len(rs) != 2 || rs[0].Source == rs[1].Source {
		t.Errorf("active rules after reopen: %+v", rs)
	}
	err = s.Snapshot(context.Background(), func(sn *particle.Snapshot) error {
		return sn.Edges(particle.DefaultNamespace, func(x *particle.Edge) error {
			if x.ID == e["at"].ID && sn.EdgeVisible(x, particle.Principal{Roles: []string{"visitor"}}) {
				t.Error("snapshot evaluation ignores a rule")
			}
			if x.ID == e["inhole"].ID && sn.EdgeVisible(x, particle.Principal{Roles: []string{"planner"}}) {
				t.Error("snapshot evaluation ignores a hidden endpoint")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDenialsAreRecorded(t *testing.T) {
	s := openStore(t, t.TempDir())
	now := time.Now().UTC()
	ds := []particle.Denial{
		{At: now.Add(-time.Hour), Subject: "v1", Roles: []string{"visitor"}, Action: "read", Item: "edge:x", Status: 404, Reason: "denied", Rule: "item-policy", Scope: "n1"},
		{At: now, Subject: "", Action: "http", Item: "GET /v1/policies", Status: 401, Reason: "no credentials"},
	}
	if err := s.RecordDenials(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	all, err := s.Denials(time.Time{}, 0)
	if err != nil || len(all) != 2 || all[0].Subject != "v1" || all[1].Status != 401 || all[0].Seq == "" || all[0].Seq >= all[1].Seq {
		t.Fatalf("denials: %+v %v", all, err)
	}
	recent, _ := s.Denials(now.Add(-time.Minute), 0)
	if len(recent) != 1 {
		t.Errorf("denials since a minute ago: %d, want 1", len(recent))
	}
}
