package particle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Effect is what a rule does to what it targets.
type Effect string

// Rule effects.
const (
	// EffectAllow admits only the rule's roles (at its level of
	// specificity: a more specific allow overrides it).
	EffectAllow Effect = "allow"
	// EffectDeny hides the target from the rule's roles, whatever else
	// allows it.
	EffectDeny Effect = "deny"
	// EffectLabel sets the target's sensitivity and/or portability.
	EffectLabel Effect = "label"
)

// RuleStatus is where a rule is in its life.
type RuleStatus string

// Rule statuses: only active rules are evaluated.
const (
	RuleActive   RuleStatus = "active"
	RulePending  RuleStatus = "pending" // proposed (denial tightening), awaiting an operator
	RuleRejected RuleStatus = "rejected"
	RuleRevoked  RuleStatus = "revoked"
)

// Target is what a rule governs; exactly one field is set.
type Target struct {
	// Node is a node id: the node and every edge touching it.
	Node string `json:"node,omitempty"`
	// Edge is one edge id.
	Edge string `json:"edge,omitempty"`
	// EdgeType is every edge of that type.
	EdgeType EdgeType `json:"edge_type,omitempty"`
	// Tag is every node carrying the tag and every edge touching one.
	// "location:<name>" also matches location nodes of that name,
	// episodes and edges at that location.
	Tag string `json:"tag,omitempty"`
	// Scope is a whole namespace ("tenant/project"), or "*" for all.
	Scope string `json:"scope,omitempty"`
}

// String is the target as the CLI writes it: node:<id>, edge:<id>,
// edge_type:<type>, tag:<tag>, scope:<namespace>.
func (t Target) String() string {
	switch {
	case t.Node != "":
		return "node:" + t.Node
	case t.Edge != "":
		return "edge:" + t.Edge
	case t.EdgeType != "":
		return "edge_type:" + string(t.EdgeType)
	case t.Tag != "":
		return "tag:" + t.Tag
	case t.Scope != "":
		return "scope:" + t.Scope
	}
	return ""
}

func (t Target) count() int {
	n := 0
	for _, s := range []string{t.Node, t.Edge, string(t.EdgeType), t.Tag, t.Scope} {
		if s != "" {
			n++
		}
	}
	return n
}

// Rule is one policy rule: an operator's edit, a tightening proposal, or
// a policy edge of the graph (id "edge:<edge id>", read only).
type Rule struct {
	ID     string `json:"id"`
	Effect Effect `json:"effect"`
	// Roles the rule allows or denies.
	Roles  []string `json:"roles,omitempty"`
	Target Target   `json:"target"`
	// Namespace limits the rule to one tenant/project; empty: all.
	Namespace string `json:"namespace,omitempty"`
	// Sensitivity and Portable are what a label rule sets.
	Sensitivity Sensitivity `json:"sensitivity,omitempty"`
	Portable    *bool       `json:"portable,omitempty"`
	Status      RuleStatus  `json:"status"`
	// Source is "operator", "tightening" or "graph".
	Source    string    `json:"source"`
	Why       string    `json:"why"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Proposal is the evidence of a tightening proposal.
	Proposal *Proposal `json:"proposal,omitempty"`
}

// Proposal is why denial tightening proposed a rule.
type Proposal struct {
	Role    string        `json:"role"`
	Scope   string        `json:"scope"`
	Denials int           `json:"denials"`
	Window  time.Duration `json:"window"`
	First   time.Time     `json:"first"`
	Last    time.Time     `json:"last"`
}

// Validate checks what an operator sets on a rule.
func (r *Rule) Validate() error {
	var errs []error
	switch r.Effect {
	case EffectAllow, EffectDeny:
		if len(r.Roles) == 0 {
			errs = append(errs, fmt.Errorf("%s rule needs at least one role", r.Effect))
		}
	case EffectLabel:
		if r.Sensitivity == "" && r.Portable == nil {
			errs = append(errs, errors.New("label rule needs a sensitivity or a portable flag"))
		}
	default:
		errs = append(errs, fmt.Errorf("effect %q (want allow, deny or label)", r.Effect))
	}
	for _, role := range r.Roles {
		if strings.TrimSpace(role) == "" || strings.ContainsAny(role, ", \t") {
			errs = append(errs, fmt.Errorf("role %q", role))
		}
	}
	if !r.Sensitivity.Valid() {
		errs = append(errs, fmt.Errorf("sensitivity %q (want public, personal or sensitive)", r.Sensitivity))
	}
	switch n := r.Target.count(); {
	case n == 0:
		errs = append(errs, errors.New("target: name one of node, edge, edge_type, tag, scope"))
	case n > 1:
		errs = append(errs, fmt.Errorf("target %+v: name exactly one of node, edge, edge_type, tag, scope", r.Target))
	}
	if t := r.Target.EdgeType; t != "" && !t.Valid() {
		errs = append(errs, fmt.Errorf("target edge_type %q", t))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: rule: %w", ErrInvalid, errors.Join(errs...))
}

// EditOp is a kind of policy edit.
type EditOp string

// Policy edits.
const (
	OpCreate  EditOp = "create"  // a new active rule
	OpUpdate  EditOp = "update"  // change an active or pending rule
	OpRevoke  EditOp = "revoke"  // end an active or pending rule
	OpPropose EditOp = "propose" // a new pending rule
	OpApprove EditOp = "approve" // pending -> active
	OpReject  EditOp = "reject"  // pending -> rejected
)

// Edit is one policy edit, as an operator (or denial tightening) makes
// it. Who and Why are required: every edit is audited.
type Edit struct {
	Op   EditOp `json:"op"`
	ID   string `json:"id,omitempty"`
	Rule *Rule  `json:"rule,omitempty"`
	Who  string `json:"who"`
	Why  string `json:"why"`
}

// AuditEntry records one policy edit: who, when, why, before and after.
type AuditEntry struct {
	Seq    string    `json:"seq"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Why    string    `json:"why"`
	Op     EditOp    `json:"op"`
	RuleID string    `json:"rule_id"`
	Before *Rule     `json:"before"`
	After  *Rule     `json:"after"`
}

// Denial records that a principal was refused something: a read the
// policy hid (404 to the caller), a request without valid credentials
// (401) or with the wrong role (403).
type Denial struct {
	Seq       string    `json:"seq"`
	At        time.Time `json:"at"`
	Subject   string    `json:"subject,omitempty"`
	Roles     []string  `json:"roles,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Action    string    `json:"action"`
	Item      string    `json:"item,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Status    int       `json:"status,omitempty"`
	Reason    string    `json:"reason"`
	Rule      string    `json:"rule,omitempty"`
	// Scope is the node the denied read was about (see Decision.Scope).
	Scope string `json:"scope,omitempty"`
}

// Record kinds of the policy (0x0D record | kind | key).
const (
	RecordPolicyRule   = "policy.rule"   // rule id -> Rule
	RecordPolicyAudit  = "policy.audit"  // seq (16 hex) -> AuditEntry
	RecordPolicyDenial = "policy.denial" // seq (16 hex) -> Denial
)

// PolicyNodeID is the id of the policy node that stands for rule id in
// the graph.
func PolicyNodeID(ns, ruleID string) string { return EntityID(ns, NodePolicy, "rule "+ruleID) }

// governs is the predicate of the policy edge from a rule's node to the
// node it targets.
const governs = "governs"

// ruleEntry is a rule compiled for evaluation.
type ruleEntry struct {
	id       string
	ns       string
	effect   Effect
	roles    []string
	sens     Sensitivity
	portable int8
	// scope is the namespace of a scope rule ("*" for all), else "".
	scope string
}

// ruleSet is the compiled policy at one instant: immutable, swapped
// atomically on every edit, so an edit applies to the very next read.
type ruleSet struct {
	version   uint64
	byEdge    map[string][]ruleEntry
	byNode    map[string][]ruleEntry
	byTag     map[string][]ruleEntry
	locations []locationRules
	byType    [8][]ruleEntry
	byScope   map[string][]ruleEntry
	all       []ruleEntry
	// nodeRules is set when any rule can apply to a node: then node
	// checks run and edges check their endpoints.
	nodeRules bool
	typed     bool // any edge-type rule
	edgeRules bool // any rule that can apply to an edge
	// closed denies everything (the rules could not be loaded).
	closed bool
	// forEdges and forNodes are every entry that can apply to an edge
	// (on its id, type, location or namespace) or to a node: a Guard
	// reads them to know when no rule can hide anything from its
	// principal.
	forEdges, forNodes []ruleEntry
}

// clears reports whether no rule among entries can hide anything of
// namespace ns from p: no deny names its roles, every allow admits it
// (and one on the whole namespace makes every item explicitly allowed,
// as personal and sensitive labels need), no label keeps items in
// their context, and no sensitive label meets a shared context.
func clears(entries []ruleEntry, ns string, p *Principal) bool {
	ok, _, _ := clearsDetail(entries, ns, p)
	return ok
}

// clearsDetail is clears, also saying whether an allow on the whole
// namespace admits p and whether any label rule applies in ns.
func clearsDetail(entries []ruleEntry, ns string, p *Principal) (ok, scopeAllow, labels bool) {
	private := false
	for i := range entries {
		en := &entries[i]
		if (en.ns != "" && en.ns != ns) || (en.scope != "" && en.scope != "*" && en.scope != ns) {
			continue
		}
		switch en.effect {
		case EffectDeny:
			if matchAny(en.roles, p.Roles) {
				return false, false, false
			}
		case EffectAllow:
			if !matchAny(en.roles, p.Roles) {
				return false, false, false
			}
			scopeAllow = scopeAllow || en.scope != ""
		case EffectLabel:
			labels = true
			if en.portable < 0 || (en.sens == SensitivitySensitive && p.Shared) {
				return false, false, false
			}
			private = private || en.sens == SensitivityPersonal || en.sens == SensitivitySensitive
		}
	}
	return !private || scopeAllow, scopeAllow, labels
}

type locationRules struct {
	loc string // canonical
	g   []ruleEntry
}

func (rs *ruleSet) locationGroups(ev *eval, loc, ns string) {
	for i := range rs.locations {
		if canonEqual(loc, rs.locations[i].loc) {
			ev.group(rs.locations[i].g, ns)
		}
	}
}

func (rs *ruleSet) scopeGroups(ev *eval, ns string) {
	if len(rs.byScope) == 0 && len(rs.all) == 0 {
		return
	}
	g := rs.byScope[ns]
	if len(g) == 0 && len(rs.all) == 0 {
		return
	}
	ev.beginLevel(levelScope)
	if len(g) > 0 {
		ev.group(g, ns)
	}
	if len(rs.all) > 0 {
		ev.group(rs.all, ns)
	}
	ev.endLevel()
}

// compile builds a rule set from active rules.
func compile(version uint64, rules ...map[string]*Rule) *ruleSet {
	rs := &ruleSet{version: version}
	add := func(m *map[string][]ruleEntry, k string, en ruleEntry) {
		if *m == nil {
			*m = map[string][]ruleEntry{}
		}
		(*m)[k] = append((*m)[k], en)
	}
	var ids []string
	all := map[string]*Rule{}
	for _, m := range rules {
		for id, r := range m {
			all[id] = r
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // deterministic: explanations name the same rule
	for _, id := range ids {
		r := all[id]
		if r.Status != RuleActive {
			continue
		}
		en := ruleEntry{id: r.ID, ns: r.Namespace, effect: r.Effect, roles: r.Roles, sens: r.Sensitivity,
			portable: portableFlag(r.Portable), scope: r.Target.Scope}
		t := r.Target
		switch {
		case t.Node != "":
			add(&rs.byNode, t.Node, en)
			rs.nodeRules = true
			rs.forNodes = append(rs.forNodes, en)
		case t.Edge != "":
			add(&rs.byEdge, t.Edge, en)
			rs.forEdges = append(rs.forEdges, en)
		case t.EdgeType != "":
			if c := edgeTypeCode(t.EdgeType); c != 0 {
				rs.byType[c] = append(rs.byType[c], en)
				rs.typed = true
				rs.forEdges = append(rs.forEdges, en)
			}
		case t.Tag != "":
			add(&rs.byTag, t.Tag, en)
			rs.forNodes = append(rs.forNodes, en)
			if loc, ok := strings.CutPrefix(t.Tag, "location:"); ok {
				rs.forEdges = append(rs.forEdges, en)
				c := Canonical(loc)
				i := slices.IndexFunc(rs.locations, func(l locationRules) bool { return l.loc == c })
				if i < 0 {
					rs.locations = append(rs.locations, locationRules{loc: c})
					i = len(rs.locations) - 1
				}
				rs.locations[i].g = append(rs.locations[i].g, en)
			}
			rs.nodeRules = true
		case t.Scope == "*":
			rs.all = append(rs.all, en)
			rs.nodeRules = true
			rs.forEdges, rs.forNodes = append(rs.forEdges, en), append(rs.forNodes, en)
		case t.Scope != "":
			add(&rs.byScope, t.Scope, en)
			rs.nodeRules = true
			rs.forEdges, rs.forNodes = append(rs.forEdges, en), append(rs.forNodes, en)
		}
	}
	rs.edgeRules = rs.nodeRules || rs.typed || len(rs.byEdge) > 0 || len(rs.locations) > 0
	return rs
}

// policyState is a store's policy: its rules, the compiled set readers
// use, and the edit lock.
type policyState struct {
	once   sync.Once
	cur    atomic.Pointer[ruleSet]
	editMu sync.Mutex // serialises edits (held across the write)

	mu      sync.Mutex       // guards the maps and version
	rules   map[string]*Rule // stored rules, every status
	graph   map[string]*Rule // from policy edges of the graph, by edge id
	version uint64
}

// policies returns the compiled rule set, loading the store's rules on
// first use. It must not be called with s.mu held.
func (s *Store) policies() *ruleSet {
	s.pol.once.Do(s.loadPolicies)
	return s.pol.cur.Load()
}

// denyAll is the rule set of a store whose rules could not be loaded:
// nothing is visible to anyone until they can be (fail closed).
var denyAll = &ruleSet{closed: true, nodeRules: true, edgeRules: true}

// RuleUnavailable names the decision of a store whose rules could not be
// loaded.
const RuleUnavailable = "policy-unavailable"

func (s *Store) loadPolicies() {
	st := &s.pol
	st.rules, st.graph = map[string]*Rule{}, map[string]*Rule{}
	// Subscribe first: a policy edge committed during the scan below is
	// seen by one or the other (or both: the map makes it idempotent).
	s.Subscribe(s.policyEdgesChanged)
	err := s.Records(RecordPolicyRule, func(_ string, raw []byte) error {
		var r Rule
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%w: policy rule: %v", ErrCorrupt, err)
		}
		st.rules[r.ID] = &r
		return nil
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		s.log.Error("policy rules unavailable: every read is denied", "err", err)
		st.cur.Store(denyAll)
		return
	}
	s.mu.RLock()
	graph := s.v.graphRuleEdges()
	s.mu.RUnlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range graph {
		for _, r := range graphRules(e) {
			st.graph[r.ID] = r
		}
	}
	s.recompileLocked()
}

// recompileLocked compiles the active rules and publishes them. s.pol.mu
// is held.
func (s *Store) recompileLocked() {
	st := &s.pol
	st.version++
	st.cur.Store(compile(st.version, st.rules, st.graph))
}

// graphRuleEdges returns v's graph rule edges. Only an edge whose facts
// are not plain can be one: the facts, a dense slice, are read for all
// and the edges for those alone (a scan of the edges' map, cache misses
// on a million edges, took a third of a second of a reopen on which
// every reader waited). Should the facts not account for every edge
// (some have no seq), the map is scanned instead.
func (v *view) graphRuleEdges() []*Edge {
	var graph []*Edge
	if v.unseq > 0 {
		v.indexLoaded()
		v.edges.each(v, func(_ string, e *Edge) bool {
			if e != nil && graphRuleEdge(e) {
				graph = append(graph, e)
			}
			return true
		})
		return graph
	}
	for seq := range v.edgeFacts {
		f := &v.edgeFacts[seq]
		if f.Flags&FactLive == 0 || f.Flags&FactPlain != 0 {
			continue
		}
		if e := atSeq(v.edgeSeq, uint64(seq)); e != nil && graphRuleEdge(e) {
			graph = append(graph, e)
		}
	}
	return graph
}

// graphRuleEdge reports whether e is a policy edge of the graph that
// attaches roles or labels to its target node.
func graphRuleEdge(e *Edge) bool {
	return e.Type == EdgePolicy && e.Status != StatusSuperseded &&
		(len(e.Policy.AllowRoles) > 0 || len(e.Policy.DenyRoles) > 0 || e.Policy.Sensitivity != "" || e.Policy.Portable != nil)
}

// graphRules are the rules a policy edge attaches to its target node.
func graphRules(e *Edge) []*Rule {
	mk := func(suffix string, eff Effect) *Rule {
		return &Rule{ID: "edge:" + e.ID + suffix, Effect: eff, Target: Target{Node: e.Target}, Namespace: e.Namespace,
			Status: RuleActive, Source: "graph", Why: "policy edge " + e.ID, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	}
	var out []*Rule
	if len(e.Policy.DenyRoles) > 0 {
		r := mk("/deny", EffectDeny)
		r.Roles = slices.Clone(e.Policy.DenyRoles)
		out = append(out, r)
	}
	if len(e.Policy.AllowRoles) > 0 {
		r := mk("/allow", EffectAllow)
		r.Roles = slices.Clone(e.Policy.AllowRoles)
		out = append(out, r)
	}
	if e.Policy.Sensitivity != "" || e.Policy.Portable != nil {
		r := mk("/label", EffectLabel)
		r.Sensitivity, r.Portable = e.Policy.Sensitivity, e.Policy.Portable
		out = append(out, r)
	}
	return out
}

// policyEdgesChanged keeps the graph's policy edges compiled: it runs
// after every committed batch.
func (s *Store) policyEdgesChanged(ch Changes) {
	touched := false
	for _, e := range ch.Edges {
		if e.Type == EdgePolicy {
			touched = true
		}
	}
	for _, e := range ch.RemovedEdges {
		if e.Type == EdgePolicy {
			touched = true
		}
	}
	if !touched {
		return
	}
	st := &s.pol
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.graph == nil {
		return // not loaded yet: the load will scan the view
	}
	changed := false
	drop := func(e *Edge) {
		for _, suffix := range []string{"/deny", "/allow", "/label"} {
			if _, ok := st.graph["edge:"+e.ID+suffix]; ok {
				delete(st.graph, "edge:"+e.ID+suffix)
				changed = true
			}
		}
	}
	for _, e := range ch.Edges {
		if e.Type != EdgePolicy {
			continue
		}
		drop(e)
		if graphRuleEdge(e) {
			for _, r := range graphRules(e) {
				st.graph[r.ID] = r
			}
			changed = true
		}
	}
	for _, e := range ch.RemovedEdges {
		if e.Type == EdgePolicy {
			drop(e)
		}
	}
	if changed {
		s.recompileLocked()
	}
}

// PolicyVersion is the version of the compiled policy: it grows with
// every edit.
func (s *Store) PolicyVersion() uint64 { return s.policies().version }

// Rules returns every rule, stored and from the graph, oldest first.
// status filters when not empty.
func (s *Store) Rules(status RuleStatus) []Rule {
	s.policies()
	st := &s.pol
	st.mu.Lock()
	var out []Rule
	for _, m := range []map[string]*Rule{st.rules, st.graph} {
		for _, r := range m {
			if status == "" || r.Status == status {
				out = append(out, cloneRule(r))
			}
		}
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Rule returns rule id.
func (s *Store) Rule(id string) (Rule, error) {
	s.policies()
	st := &s.pol
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.rules[id]
	if r == nil {
		r = st.graph[id]
	}
	if r == nil {
		return Rule{}, fmt.Errorf("policy rule %s: %w", id, ErrNotFound)
	}
	return cloneRule(r), nil
}

func cloneRule(r *Rule) Rule {
	c := *r
	c.Roles = slices.Clone(r.Roles)
	if r.Portable != nil {
		b := *r.Portable
		c.Portable = &b
	}
	if r.Proposal != nil {
		p := *r.Proposal
		c.Proposal = &p
	}
	return c
}

// EditPolicy applies one policy edit: the rule, its audit entry and its
// policy node (and, for a node target, the policy edge to that node) are
// written in one transaction; then the compiled policy is swapped, so
// the very next read evaluates the new rules.
func (s *Store) EditPolicy(ctx context.Context, ed Edit) (*AuditEntry, error) {
	s.policies()
	st := &s.pol
	if strings.TrimSpace(ed.Who) == "" {
		return nil, fmt.Errorf("%w: policy edit: who is required", ErrInvalid)
	}
	if strings.TrimSpace(ed.Why) == "" {
		return nil, fmt.Errorf("%w: policy edit: why is required", ErrInvalid)
	}
	st.editMu.Lock()
	defer st.editMu.Unlock()

	st.mu.Lock()
	var before *Rule
	if ed.Op != OpCreate && ed.Op != OpPropose {
		if strings.HasPrefix(ed.ID, "edge:") {
			st.mu.Unlock()
			return nil, fmt.Errorf("%w: rule %s comes from a policy edge of the graph: edit the edge", ErrInvalid, ed.ID)
		}
		if r := st.rules[ed.ID]; r != nil {
			c := cloneRule(r)
			before = &c
		}
	}
	st.mu.Unlock()

	now := time.Now().UTC()
	after, err := nextRule(ed, before, now)
	if err != nil {
		return nil, err
	}
	entry := &AuditEntry{At: now, Who: ed.Who, Why: ed.Why, Op: ed.Op, RuleID: after.ID, Before: before, After: after}
	_, err = s.Update(ctx, func(b *Batch) error {
		entry.Seq = seqKey(b.nextSeq())
		raw, err := json.Marshal(after)
		if err != nil {
			return err
		}
		if err := b.PutRecord(RecordPolicyRule, after.ID, raw); err != nil {
			return err
		}
		raw, err = json.Marshal(entry)
		if err != nil {
			return err
		}
		if err := b.PutRecord(RecordPolicyAudit, entry.Seq, raw); err != nil {
			return err
		}
		return b.putRuleNode(after)
	})
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	st.rules[after.ID] = after
	s.recompileLocked()
	st.mu.Unlock()
	return entry, nil
}

// nextRule is the rule after an edit.
func nextRule(ed Edit, before *Rule, now time.Time) (*Rule, error) {
	switch ed.Op {
	case OpCreate, OpPropose:
		if ed.Rule == nil {
			return nil, fmt.Errorf("%w: %s needs a rule", ErrInvalid, ed.Op)
		}
		r := cloneRule(ed.Rule)
		if err := r.Validate(); err != nil {
			return nil, err
		}
		r.ID = newRuleID()
		r.Status = RuleActive
		if ed.Op == OpPropose {
			r.Status = RulePending
		}
		if r.Source == "" {
			r.Source = "operator"
		}
		r.Why, r.CreatedBy, r.CreatedAt, r.UpdatedBy, r.UpdatedAt = ed.Why, ed.Who, now, ed.Who, now
		return &r, nil
	}
	if before == nil {
		return nil, fmt.Errorf("policy rule %q: %w", ed.ID, ErrNotFound)
	}
	r := cloneRule(before)
	open := before.Status == RuleActive || before.Status == RulePending
	switch ed.Op {
	case OpUpdate:
		if !open {
			return nil, fmt.Errorf("%w: rule %s is %s", ErrInvalid, ed.ID, before.Status)
		}
		if ed.Rule == nil {
			return nil, fmt.Errorf("%w: update needs a rule", ErrInvalid)
		}
		u := cloneRule(ed.Rule)
		if err := u.Validate(); err != nil {
			return nil, err
		}
		r.Effect, r.Roles, r.Target, r.Namespace, r.Sensitivity, r.Portable = u.Effect, u.Roles, u.Target, u.Namespace, u.Sensitivity, u.Portable
	case OpRevoke:
		if !open {
			return nil, fmt.Errorf("%w: rule %s is already %s", ErrInvalid, ed.ID, before.Status)
		}
		r.Status = RuleRevoked
	case OpApprove, OpReject:
		if before.Status != RulePending {
			return nil, fmt.Errorf("%w: rule %s is %s, not pending", ErrInvalid, ed.ID, before.Status)
		}
		r.Status = RuleActive
		if ed.Op == OpReject {
			r.Status = RuleRejected
		}
	default:
		return nil, fmt.Errorf("%w: policy edit op %q", ErrInvalid, ed.Op)
	}
	r.UpdatedBy, r.UpdatedAt = ed.Who, now
	return &r, nil
}

func newRuleID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "p-" + hex.EncodeToString(b[:])
}

func seqKey(seq uint64) string { return fmt.Sprintf("%016x", seq) }

// putRuleNode writes the policy node that stands for r in the graph, and
// the policy edge from it to the node it targets while r is active. The
// node is visible to operators only.
func (b *Batch) putRuleNode(r *Rule) error {
	// The node lives where the rule applies: its namespace, or the
	// namespace of the node it targets (policy edges stay within one).
	ns := r.Namespace
	if t := b.Node(r.Target.Node); r.Target.Node != "" && t != nil {
		ns = t.Namespace
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	id := PolicyNodeID(ns, r.ID)
	n := b.Node(id)
	if n == nil {
		n = &Node{ID: id, Namespace: ns, Type: NodePolicy, Name: "rule " + r.ID, Belief: Belief{Score: 1, UpdatedAt: b.now}}
	}
	n.Attributes.Tags = []string{"policy:" + string(r.Effect), "policy:" + string(r.Status)}
	n.Attributes.Props = map[string]string{
		"rule": r.ID, "effect": string(r.Effect), "roles": strings.Join(r.Roles, ","),
		"target": r.Target.String(), "status": string(r.Status), "why": r.Why, "source": r.Source,
	}
	if r.Sensitivity != "" {
		n.Attributes.Props["sensitivity"] = string(r.Sensitivity)
	}
	if r.Portable != nil {
		n.Attributes.Props["portable"] = fmt.Sprint(*r.Portable)
	}
	if err := b.PutNode(n); err != nil {
		return err
	}
	if r.Target.Node == "" {
		return nil
	}
	e := b.FindEdge(ns, id, EdgePolicy, "", r.Target.Node)
	if r.Status != RuleActive {
		if e != nil {
			return b.DeleteEdge(e.ID)
		}
		return nil
	}
	if e != nil || b.Node(r.Target.Node) == nil {
		return nil // already attached, or nothing to attach to yet
	}
	return b.PutEdge(&Edge{
		Namespace: ns, Source: id, Target: r.Target.Node, Type: EdgePolicy,
		Assertion: &Assertion{Predicate: governs, Value: string(r.Effect)}, Confidence: 1,
		Belief: Belief{Score: 1, Evidence: 1, UpdatedAt: b.now}, Evidence: 1, ValidFrom: b.now,
		Provenance: []Provenance{{ObservedAt: b.now}},
	})
}

// ruleNode reports whether n stands for a policy rule (operators only).
func ruleNode(n *Node) bool { return n.Type == NodePolicy && n.Attributes.Props["rule"] != "" }

// PolicyAudit returns the audit log, oldest first: every entry, or those
// of one rule; limit > 0 keeps the most recent limit.
func (s *Store) PolicyAudit(ruleID string, limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	err := s.Records(RecordPolicyAudit, func(_ string, raw []byte) error {
		var a AuditEntry
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("%w: policy audit: %v", ErrCorrupt, err)
		}
		if ruleID == "" || a.RuleID == ruleID {
			out = append(out, a)
		}
		return nil
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, err
}

// RecordDenials stores denials (their Seq is assigned here).
func (s *Store) RecordDenials(ctx context.Context, ds []Denial) error {
	if len(ds) == 0 {
		return nil
	}
	_, err := s.Update(ctx, func(b *Batch) error {
		for i := range ds {
			ds[i].Seq = seqKey(b.nextSeq())
			raw, err := json.Marshal(&ds[i])
			if err != nil {
				return err
			}
			if err := b.PutRecord(RecordPolicyDenial, ds[i].Seq, raw); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// Denials returns recorded denials at or after since, oldest first;
// limit > 0 keeps the most recent limit.
func (s *Store) Denials(since time.Time, limit int) ([]Denial, error) {
	var out []Denial
	err := s.Records(RecordPolicyDenial, func(_ string, raw []byte) error {
		var d Denial
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("%w: denial: %v", ErrCorrupt, err)
		}
		if !d.At.Before(since) {
			out = append(out, d)
		}
		return nil
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, err
}
