package particle

import (
	"errors"
	"slices"
	"unicode"
	"unicode/utf8"
)

// RoleOperator is the role that administers policy: the only role that
// sees policy nodes and the edges that attach them.
const RoleOperator = "operator"

// Principal is who reads, and in what setting. Every read path passes
// the principal of the caller to the one evaluation function
// ([Reader.EdgeVisible], [Reader.NodeVisible], [Reader.EpisodeVisible],
// or their [Store] forms).
type Principal struct {
	// Roles are the roles the caller holds (from its API key or NATS
	// user when authentication is on).
	Roles []string `json:"roles,omitempty"`
	// Agent is the robot the caller speaks for, if any: an audience or
	// a personal item naming the agent admits it.
	Agent string `json:"agent,omitempty"`
	// Subject is who the caller is (key name, NATS user): personal and
	// sensitive items about the subject are visible to it.
	Subject string `json:"subject,omitempty"`
	// Context is the context the read serves (a session id, an agent):
	// a non-portable item is visible only in the context it came from.
	Context string `json:"context,omitempty"`
	// Shared is set when the result goes to more than one reader (a
	// shared screen, a session push): sensitive items are left out.
	Shared bool `json:"shared,omitempty"`
	// Export is set when the result leaves ctxgraph (training export):
	// non-portable items never do.
	Export bool `json:"export,omitempty"`
}

// HasRole reports whether p holds role r.
func (p Principal) HasRole(r string) bool { return hasAny(p.Roles, r) }

// is reports whether name is the principal itself (subject or agent).
func (p *Principal) is(name string) bool {
	return name != "" && (name == p.Subject || name == p.Agent)
}

// Sensitivity is how private an item is.
type Sensitivity string

// Sensitivity levels. The empty value is public.
const (
	// SensitivityPublic items are visible to every role that policy
	// admits.
	SensitivityPublic Sensitivity = "public"
	// SensitivityPersonal items are about one subject: visible to that
	// subject, and to others only through an allow rule that names one
	// of their roles.
	SensitivityPersonal Sensitivity = "personal"
	// SensitivitySensitive items are personal and, besides, never shown
	// in a shared context, not even to their subject.
	SensitivitySensitive Sensitivity = "sensitive"
)

// Valid reports whether s is a known sensitivity (or empty: public).
func (s Sensitivity) Valid() bool {
	switch s {
	case "", SensitivityPublic, SensitivityPersonal, SensitivitySensitive:
		return true
	}
	return false
}

// Reason says why an item is not visible.
type Reason string

// Reasons of a [Decision].
const (
	// ReasonDenied: a deny rule or deny list names one of the roles.
	ReasonDenied Reason = "denied"
	// ReasonNotAllowed: the most specific allow rules admit none of the
	// roles.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonAudience: the item's audience names neither a role nor the
	// agent.
	ReasonAudience Reason = "audience"
	// ReasonSensitivity: a personal or sensitive item of another
	// subject, or a sensitive item in a shared context.
	ReasonSensitivity Reason = "sensitivity"
	// ReasonNotPortable: a non-portable item outside its context.
	ReasonNotPortable Reason = "not_portable"
	// ReasonEndpoint: the edge touches a node the caller may not see.
	ReasonEndpoint Reason = "endpoint"
	// ReasonMissing: there is no such item.
	ReasonMissing Reason = "missing"
)

// Rule names of decisions taken by an item's own fields rather than by
// a stored [Rule].
const (
	RuleItemPolicy = "item-policy" // the edge's policy{allow_roles, deny_roles}
	RuleAudience   = "audience"    // the edge's scope.audience
)

// Decision is the evaluation of one item for one principal, with the
// reason and the deciding rule when it is not visible.
type Decision struct {
	Visible bool   `json:"visible"`
	Reason  Reason `json:"reason,omitempty"`
	// Rule is the id of the deciding rule, or RuleItemPolicy,
	// RuleAudience.
	Rule string `json:"rule,omitempty"`
	// Scope is the node the denial is about: the node itself, the
	// subject (source) of an edge, or the hidden endpoint. Denial
	// tightening counts denials per role and scope.
	Scope string `json:"scope,omitempty"`
}

// EdgeVisible is the one policy check of an edge: every read path
// (planner answers, search hits, GET of an edge, diff, introspection
// counts, export, session pushes) keeps an edge only if it returns true.
//
// Deny beats allow at every level; among allow rules the most specific
// level that has any decides (edge: its own allow list and rules on its
// id; then tag rules on its location; then its edge type; then its
// namespace); audience, sensitivity and portability apply on top; and
// an edge is visible only if both its endpoint nodes are.
//
// It allocates nothing and, with no stored rules, costs a few
// comparisons: the planner calls it for every candidate edge.
func (r Reader) EdgeVisible(e *Edge, p Principal) bool {
	j := judge{pol: r.pol, v: r.v}
	return j.edge(e, &p, nil)
}

// NodeVisible is the one policy check of a node: rules on its id, on its
// tags (and "location:<name>" for a location node, the episode's
// location for an episode node), and on its namespace; sensitivity and
// portability labels from rules (subject and origin from the node's
// props "subject" and "origin", or its name for an agent node).
func (r Reader) NodeVisible(n *Node, p Principal) bool {
	j := judge{pol: r.pol, v: r.v}
	return j.node(n, &p, nil)
}

// EpisodeVisible is the one policy check of an episode: the policy of
// its node. Its Nodes and Edges lists still name items the caller may
// not see; [Reader.VisibleEpisode] returns a copy without them.
func (r Reader) EpisodeVisible(ep *Episode, p Principal) bool {
	j := judge{pol: r.pol, v: r.v}
	return j.episode(ep, &p, nil)
}

// ExplainEdge is [Reader.EdgeVisible] with its reason and deciding rule.
func (r Reader) ExplainEdge(e *Edge, p Principal) Decision {
	var d Decision
	j := judge{pol: r.pol, v: r.v}
	d.Visible = j.edge(e, &p, &d)
	return d
}

// ExplainNode is [Reader.NodeVisible] with its reason and deciding rule.
func (r Reader) ExplainNode(n *Node, p Principal) Decision {
	var d Decision
	j := judge{pol: r.pol, v: r.v}
	d.Visible = j.node(n, &p, &d)
	return d
}

// ExplainEpisode is [Reader.EpisodeVisible] with its reason and rule.
func (r Reader) ExplainEpisode(ep *Episode, p Principal) Decision {
	var d Decision
	j := judge{pol: r.pol, v: r.v}
	d.Visible = j.episode(ep, &p, &d)
	return d
}

// VisibleEpisode returns ep as p may see it: nil if the episode is not
// visible, else a copy whose Nodes and Edges lists hold only visible
// items (an item the caller may not see is absent, not redacted).
func (r Reader) VisibleEpisode(ep *Episode, p Principal) *Episode {
	j := judge{pol: r.pol, v: r.v}
	if !j.episode(ep, &p, nil) {
		return nil
	}
	c := *ep
	c.edgePos = nil // the writer's
	c.Nodes = make([]string, 0, len(ep.Nodes))
	for _, id := range ep.Nodes {
		if j.node(r.v.nodes[id], &p, nil) {
			c.Nodes = append(c.Nodes, id)
		}
	}
	c.Edges = make([]string, 0, len(ep.Edges))
	for _, id := range ep.Edges {
		if j.edge(r.v.edge(id), &p, nil) {
			c.Edges = append(c.Edges, id)
		}
	}
	return &c
}

// VisibleNode returns n as p may see it: nil if the node is not
// visible, else n, or a copy whose episode list names only episodes p
// may see.
func (r Reader) VisibleNode(n *Node, p Principal) *Node { return r.Guard(p).VisibleNode(n) }

// VisibleNode is [Reader.VisibleNode] for the guard's principal.
func (g *Guard) VisibleNode(n *Node) *Node {
	if !g.NodeVisible(n) {
		return nil
	}
	ids := g.VisibleEpisodeIDs(n.Namespace, n.Attributes.RLDSEpisodeIDs)
	if len(ids) == len(n.Attributes.RLDSEpisodeIDs) {
		return n
	}
	c := *n
	c.Attributes.RLDSEpisodeIDs = ids
	return &c
}

// VisibleEdge returns e as p may see it: nil if the edge is not
// visible, else e, or a copy whose provenance names only episodes p
// may see.
func (r Reader) VisibleEdge(e *Edge, p Principal) *Edge { return r.Guard(p).VisibleEdge(e) }

// VisibleEdge is [Reader.VisibleEdge] for the guard's principal.
func (g *Guard) VisibleEdge(e *Edge) *Edge {
	if !g.EdgeVisible(e) {
		return nil
	}
	prov := g.VisibleProvenance(e.Namespace, e.Provenance)
	if len(prov) == len(e.Provenance) {
		return e
	}
	c := *e
	c.Provenance = prov
	return &c
}

// EdgeVisible is [Reader.EdgeVisible] over a snapshot (an export): the
// policy is the one in force when the snapshot began, and the endpoint
// nodes are read from the snapshot.
func (sn *Snapshot) EdgeVisible(e *Edge, p Principal) bool {
	j := judge{pol: sn.pol, sn: sn}
	return j.edge(e, &p, nil)
}

// NodeVisible is [Reader.NodeVisible] over a snapshot.
func (sn *Snapshot) NodeVisible(n *Node, p Principal) bool {
	j := judge{pol: sn.pol, sn: sn}
	return j.node(n, &p, nil)
}

// EpisodeVisible is [Reader.EpisodeVisible] over a snapshot.
func (sn *Snapshot) EpisodeVisible(ep *Episode, p Principal) bool {
	j := judge{pol: sn.pol, sn: sn}
	return j.episode(ep, &p, nil)
}

// Guard is the evaluation function bound to one principal for the
// length of one read: the planner's form of [Reader.EdgeVisible] and
// friends, for many checks in a row. It remembers each node's verdict,
// so the endpoints that many candidate edges share are judged once.
// Same answers as the Reader methods; valid only inside the Store.Read
// that made it, and not safe for concurrent use.
//
// A Guard also works out, once per namespace, whether any rule could
// hide anything from its principal at all; when none can, an edge with
// no policy of its own is visible without further work, and endpoints
// are not looked up. This relies on the data model's invariant that an
// edge and its endpoints share a namespace (every writer keeps it;
// merges refuse to cross namespaces).
type Guard struct {
	j judge
	p Principal
	// episodes remembers EpisodeIDVisible's verdicts, by namespace and
	// id: provenance names the same few episodes over and over.
	episodes map[nsID]bool
}

// Guard returns the evaluation function bound to p for this read.
func (r Reader) Guard(p Principal) *Guard {
	return &Guard{j: judge{pol: r.pol, v: r.v, memo: map[*Node]bool{}, clear: &clearance{}}, p: p}
}

// Guard returns the evaluation function bound to p over the snapshot,
// valid while the snapshot is. It remembers no node verdicts (a
// snapshot decodes a new node at every read, and an export reads
// millions of them); it does remember episode verdicts, a few thousand.
func (sn *Snapshot) Guard(p Principal) *Guard {
	return &Guard{j: judge{pol: sn.pol, sn: sn, clear: &clearance{}}, p: p}
}

// clearance remembers, for one namespace, whether any rule can hide an
// edge or a node from the guard's principal at all: when none can, the
// checks reduce to the item's own policy.
type clearance struct {
	ns           string
	set          bool
	edges, nodes bool
	// scopeAllow: an allow on the whole namespace admits the principal
	// (every item is explicitly allowed); labels: a label rule applies.
	scopeAllow, labels bool
}

// of is the clearance for namespace ns.
func (c *clearance) of(rs *ruleSet, ns string, p *Principal) *clearance {
	if !c.set || c.ns != ns {
		*c = clearance{ns: ns, set: true, edges: true, nodes: true}
		if rs != nil {
			c.edges, c.scopeAllow, c.labels = clearsDetail(rs.forEdges, ns, p)
			c.nodes = !rs.nodeRules || clears(rs.forNodes, ns, p)
		}
	}
	return c
}

// EdgeVisible is [Reader.EdgeVisible] for the guard's principal.
func (g *Guard) EdgeVisible(e *Edge) bool {
	if e != nil && e.Type != EdgePolicy && (g.j.pol == nil || !g.j.pol.closed) {
		if c := g.j.clear.of(g.j.pol, e.Namespace, &g.p); c.edges && c.nodes {
			if plainEdge(e) {
				return true // no rule can hide it, and it carries no policy of its own
			}
			if !c.labels && !g.j.pol.onEdge(e.ID) {
				if v, ok := ownPolicy(e, &g.p, c.scopeAllow); ok {
					return v
				}
			}
		}
	}
	return g.j.edge(e, &g.p, nil)
}

// PlainEdgesVisible reports whether the guard's principal sees every
// plain edge of namespace ns: one with FactPlain in its [EdgeFacts] (no
// policy or audience of its own, not a policy edge), because no rule can
// hide it. It is EdgeVisible's answer for such an edge when true; when
// false, ask EdgeVisible.
func (g *Guard) PlainEdgesVisible(ns string) bool {
	if g.j.pol != nil && g.j.pol.closed {
		return false
	}
	c := g.j.clear.of(g.j.pol, ns, &g.p)
	return c.edges && c.nodes
}

// ownPolicy judges e by its own policy alone, for a principal no rule
// can hide anything from (rules then only allow, and label nothing):
// its deny and allow lists, audience, sensitivity and portability. ok
// is false when the answer needs the rules after all (a personal item
// without an allow list of its own, unless an allow on the whole
// namespace makes every item explicitly allowed).
func ownPolicy(e *Edge, p *Principal, scopeAllow bool) (visible, ok bool) {
	pol := &e.Policy
	if len(pol.DenyRoles) > 0 && matchAny(pol.DenyRoles, p.Roles) {
		return false, true
	}
	private := pol.Sensitivity == SensitivityPersonal || pol.Sensitivity == SensitivitySensitive
	allowed, explicit := true, scopeAllow
	if len(pol.AllowRoles) > 0 {
		allowed = matchAny(pol.AllowRoles, p.Roles)
		explicit = allowed
	} else if private && !scopeAllow {
		return false, false
	}
	subject, origin := pol.Subject, pol.Origin
	if len(e.Provenance) > 0 {
		if subject == "" {
			subject = e.Provenance[0].Agent
		}
		if origin == "" {
			origin = e.Provenance[0].Agent
		}
	}
	self := private && p.is(subject)
	if !allowed && !self {
		return false, true
	}
	if len(e.Scope.Audience) > 0 && !audienceAdmits(e.Scope.Audience, p) {
		return false, true
	}
	if private && ((!self && !explicit) || (pol.Sensitivity == SensitivitySensitive && p.Shared)) {
		return false, true
	}
	if pol.Portable != nil && !*pol.Portable && (p.Export || (origin != "" && origin != p.Context && !p.is(origin))) {
		return false, true
	}
	return true, true
}

// NodeVisible is [Reader.NodeVisible] for the guard's principal.
func (g *Guard) NodeVisible(n *Node) bool { return g.j.nodeMemo(n, &g.p) }

// onEdge reports whether a rule targets edge id itself (it joins the
// edge's own allow list, at the same level).
func (rs *ruleSet) onEdge(id string) bool {
	if rs == nil || len(rs.byEdge) == 0 {
		return false
	}
	_, ok := rs.byEdge[id]
	return ok
}

// plainEdge reports whether e carries no policy of its own.
func plainEdge(e *Edge) bool {
	pol := &e.Policy
	return len(e.Scope.Audience) == 0 && len(pol.AllowRoles) == 0 && len(pol.DenyRoles) == 0 && pol.Sensitivity == "" && pol.Portable == nil
}

// EpisodeVisible is [Reader.EpisodeVisible] for the guard's principal.
func (g *Guard) EpisodeVisible(ep *Episode) bool { return g.j.episode(ep, &g.p, nil) }

// EpisodesVisible reports whether the guard's principal sees every
// episode of namespace ns, because no rule can hide a node of ns from
// it (an episode is judged by its node). When false, ask
// EpisodeIDVisible.
func (g *Guard) EpisodesVisible(ns string) bool { return g.j.nodesClear(ns, &g.p) }

// EpisodeIDVisible is EpisodeVisible for the episode id of namespace
// ns, as an edge's provenance or a node's episode list names it. An
// episode the store does not hold is judged as one whose node is gone
// (by a stand-in node: rules on its namespace and type still apply).
func (g *Guard) EpisodeIDVisible(ns, id string) bool {
	k := nsID{ns, id}
	if v, ok := g.episodes[k]; ok {
		return v
	}
	ep := g.j.episodeOf(ns, id)
	if ep == nil {
		ep = &Episode{ID: id, Namespace: ns}
	}
	v := g.j.episode(ep, &g.p, nil)
	if g.episodes == nil {
		g.episodes = map[nsID]bool{}
	}
	g.episodes[k] = v
	return v
}

// VisibleProvenance is prov without the records of episodes the
// guard's principal may not see, so that what is read names no episode
// its reader could not read (the edge itself stands by its own policy,
// and its evidence count is the edge's). It is prov itself when
// nothing is hidden; in the common case, no rule that can hide a node
// of ns, that costs one check per namespace.
func (g *Guard) VisibleProvenance(ns string, prov []Provenance) []Provenance {
	if len(prov) == 0 || g.EpisodesVisible(ns) {
		return prov
	}
	return without(prov, func(p Provenance) bool { return p.EpisodeID != "" && !g.EpisodeIDVisible(ns, p.EpisodeID) })
}

// VisibleEpisodeIDs is ids (a node's episode list) without the
// episodes the guard's principal may not see; ids itself when nothing
// is hidden.
func (g *Guard) VisibleEpisodeIDs(ns string, ids []string) []string {
	if len(ids) == 0 || g.EpisodesVisible(ns) {
		return ids
	}
	return without(ids, func(id string) bool { return !g.EpisodeIDVisible(ns, id) })
}

// nsID is an id within a namespace, as a map key.
type nsID struct{ ns, id string }

// without returns s without the elements hide reports: s itself when
// there are none, else a copy (hide is asked once per element).
func without[T any](s []T, hide func(T) bool) []T {
	i := slices.IndexFunc(s, hide)
	if i < 0 {
		return s
	}
	out := append(make([]T, 0, len(s)-1), s[:i]...)
	for _, v := range s[i+1:] {
		if !hide(v) {
			out = append(out, v)
		}
	}
	return out
}

// Principal is the principal the guard judges for.
func (g *Guard) Principal() Principal { return g.p }

// judge evaluates policy over the view (v) or a snapshot (sn). With a
// memo (a Guard's) it remembers node verdicts for its one principal.
type judge struct {
	pol   *ruleSet
	v     *view
	sn    *Snapshot
	memo  map[*Node]bool
	clear *clearance // a Guard's: what no rule can hide from its principal
}

// nodeMemo is node(n, p, nil), remembered when the judge has a memo
// (only a Guard's judge, whose principal never changes).
func (j *judge) nodeMemo(n *Node, p *Principal) bool {
	if j.memo == nil || n == nil || j.pol == nil || (!j.pol.nodeRules && n.Type != NodePolicy) {
		return j.node(n, p, nil)
	}
	if n.Type != NodePolicy && j.nodesClear(n.Namespace, p) {
		return true // no rule can hide a node of this namespace from p
	}
	if v, ok := j.memo[n]; ok {
		return v
	}
	v := j.node(n, p, nil)
	j.memo[n] = v
	return v
}

// nodesClear reports whether no rule can hide a node of namespace ns
// (other than a policy node) from p; only a Guard's judge, which has a
// clearance, can tell.
func (j *judge) nodesClear(ns string, p *Principal) bool {
	rs := j.pol
	if rs == nil || !rs.nodeRules {
		return true
	}
	return j.clear != nil && !rs.closed && j.clear.of(rs, ns, p).nodes
}

func (j *judge) nodeOf(ns, id string) *Node {
	if j.v != nil {
		return j.v.nodes[id]
	}
	return j.sn.policyNode(ns, id)
}

func (j *judge) episodeOf(ns, id string) *Episode {
	if j.v != nil {
		return j.v.episodes[ns+"\x00"+id]
	}
	ep, _ := j.sn.Episode(ns, id)
	return ep
}

// EdgeVisible is [Reader.EdgeVisible] for callers outside [Store.Read]
// (an HTTP handler, an export streaming a [Snapshot]). It takes the
// read lock for the call: never call it inside Store.Read.
func (s *Store) EdgeVisible(e *Edge, p Principal) (ok bool) {
	s.Read(func(r Reader) { ok = r.EdgeVisible(e, p) })
	return ok
}

// NodeVisible is [Reader.NodeVisible] for callers outside [Store.Read].
func (s *Store) NodeVisible(n *Node, p Principal) (ok bool) {
	s.Read(func(r Reader) { ok = r.NodeVisible(n, p) })
	return ok
}

// EpisodeVisible is [Reader.EpisodeVisible] for callers outside
// [Store.Read].
func (s *Store) EpisodeVisible(ep *Episode, p Principal) (ok bool) {
	s.Read(func(r Reader) { ok = r.EpisodeVisible(ep, p) })
	return ok
}

// Levels of specificity, most specific first.
const (
	levelItem  = iota // the item itself: its own policy, rules on its id
	levelTag          // rules on its tags
	levelType         // rules on its edge type
	levelScope        // rules on its namespace, or on every namespace
	levelNone
)

// eval accumulates one evaluation. It lives on the stack.
type eval struct {
	roles []string

	denied   bool
	denyRule string

	// The most specific level with allow rules, and whether they admit.
	allowLevel int
	allowOK    bool
	allowRule  string
	// The level being evaluated: each target at it must admit.
	lvHas, lvOK bool
	lvRule      string

	// Labels: the most specific level that sets one decides; at that
	// level the most restrictive wins.
	sens      Sensitivity
	sensLevel int
	sensRule  string
	portable  int8 // 0 unset, 1 portable, -1 not portable
	portLevel int
	portRule  string
	levelOpen int
}

func (ev *eval) start(roles []string) {
	ev.roles = roles
	ev.allowLevel, ev.sensLevel, ev.portLevel = levelNone, levelNone, levelNone
}

// beginLevel starts a level; endLevel records its allows if it is the
// first level that has any.
func (ev *eval) beginLevel(l int) { ev.levelOpen, ev.lvHas, ev.lvOK, ev.lvRule = l, false, true, "" }

func (ev *eval) endLevel() {
	if ev.lvHas && ev.allowLevel == levelNone {
		ev.allowLevel, ev.allowOK, ev.allowRule = ev.levelOpen, ev.lvOK, ev.lvRule
	}
}

// target folds one target's allow list: at one level every target that
// has allows must admit (an edge tagged two ways needs both).
func (ev *eval) target(has, ok bool, rule string) {
	if !has {
		return
	}
	ev.lvHas = true
	if !ok && ev.lvOK {
		ev.lvOK, ev.lvRule = false, rule
	}
	if ev.lvRule == "" {
		ev.lvRule = rule
	}
}

func (ev *eval) deny(rule string) {
	if !ev.denied {
		ev.denied, ev.denyRule = true, rule
	}
}

func (ev *eval) label(s Sensitivity, portable int8, rule string) {
	l := ev.levelOpen
	if s != "" && (ev.sensLevel == levelNone || (ev.sensLevel == l && sensRank(s) > sensRank(ev.sens))) {
		ev.sens, ev.sensLevel, ev.sensRule = s, l, rule
	}
	if portable != 0 && (ev.portLevel == levelNone || (ev.portLevel == l && portable < ev.portable)) {
		ev.portable, ev.portLevel, ev.portRule = portable, l, rule
	}
}

func sensRank(s Sensitivity) int {
	switch s {
	case SensitivityPersonal:
		return 1
	case SensitivitySensitive:
		return 2
	}
	return 0
}

// tgt accumulates the allow rules of one target: any of them admits.
type tgt struct {
	has, ok bool
	rule    string
}

// fold adds the rules g of one target, in namespace ns, to t.
func (ev *eval) fold(g []ruleEntry, ns string, t *tgt) {
	for i := range g {
		en := &g[i]
		if en.ns != "" && en.ns != ns {
			continue
		}
		switch en.effect {
		case EffectDeny:
			if matchAny(en.roles, ev.roles) {
				ev.deny(en.id)
			}
		case EffectAllow:
			if !t.has {
				t.rule = en.id
			}
			t.has = true
			if !t.ok && matchAny(en.roles, ev.roles) {
				t.ok, t.rule = true, en.id
			}
		case EffectLabel:
			ev.label(en.sens, en.portable, en.id)
		}
	}
}

// group folds the rules of one target.
func (ev *eval) group(g []ruleEntry, ns string) {
	var t tgt
	ev.fold(g, ns, &t)
	ev.target(t.has, t.ok, t.rule)
}

// verdict applies allow, sensitivity and portability once every level
// is folded. subject and origin name who the item is about and the
// context it came from.
func (ev *eval) verdict(p *Principal, d *Decision, subject, origin, scope string) bool {
	if ev.denied {
		return d.no(ReasonDenied, ev.denyRule, scope)
	}
	private := ev.sens == SensitivityPersonal || ev.sens == SensitivitySensitive
	if !private {
		if ev.allowLevel != levelNone && !ev.allowOK {
			return d.no(ReasonNotAllowed, ev.allowRule, scope)
		}
	} else {
		// Personal and sensitive items: their subject sees them (unless
		// denied); anyone else needs an allow rule naming a role.
		self := p.is(subject)
		explicit := ev.allowLevel != levelNone && ev.allowOK
		if !self && ev.allowLevel != levelNone && !ev.allowOK {
			return d.no(ReasonNotAllowed, ev.allowRule, scope)
		}
		if !self && !explicit {
			return d.no(ReasonSensitivity, ev.sensRule, scope)
		}
		if ev.sens == SensitivitySensitive && p.Shared {
			return d.no(ReasonSensitivity, ev.sensRule, scope)
		}
	}
	if ev.portable < 0 {
		if p.Export || (origin != "" && origin != p.Context && !p.is(origin)) {
			return d.no(ReasonNotPortable, ev.portRule, scope)
		}
	}
	return true
}

// no records a negative decision (when explaining) and returns false.
func (d *Decision) no(reason Reason, rule, scope string) bool {
	if d != nil {
		d.Reason, d.Rule, d.Scope = reason, rule, scope
	}
	return false
}

func (j *judge) edge(e *Edge, p *Principal, d *Decision) bool {
	if e == nil {
		return d.no(ReasonMissing, "", "")
	}
	rs := j.pol
	pol := &e.Policy
	if (rs == nil || !rs.edgeRules) && e.Type != EdgePolicy && plainEdge(e) {
		return true // nothing speaks about this edge: the common case
	}
	if rs != nil && rs.closed {
		return d.no(ReasonDenied, RuleUnavailable, e.Source)
	}
	var ev eval
	ev.start(p.Roles)

	// The edge itself: its own policy and rules on its id, one target.
	ev.beginLevel(levelItem)
	if len(pol.DenyRoles) > 0 && matchAny(pol.DenyRoles, p.Roles) {
		ev.deny(RuleItemPolicy)
	}
	var own tgt
	if len(pol.AllowRoles) > 0 {
		own = tgt{has: true, ok: matchAny(pol.AllowRoles, p.Roles), rule: RuleItemPolicy}
	}
	ev.label(pol.Sensitivity, portableFlag(pol.Portable), RuleItemPolicy)
	if rs != nil && len(rs.byEdge) > 0 {
		if g, ok := rs.byEdge[e.ID]; ok {
			ev.fold(g, e.Namespace, &own)
		}
	}
	ev.target(own.has, own.ok, own.rule)
	ev.endLevel()

	if rs != nil {
		if len(rs.locations) > 0 && e.Scope.Location != "" {
			ev.beginLevel(levelTag)
			rs.locationGroups(&ev, e.Scope.Location, e.Namespace)
			ev.endLevel()
		}
		if rs.typed {
			if g := rs.byType[edgeTypeCode(e.Type)]; len(g) > 0 {
				ev.beginLevel(levelType)
				ev.group(g, e.Namespace)
				ev.endLevel()
			}
		}
		rs.scopeGroups(&ev, e.Namespace)
	}

	if len(e.Scope.Audience) > 0 && !audienceAdmits(e.Scope.Audience, p) && !ev.denied {
		return d.no(ReasonAudience, RuleAudience, e.Source)
	}
	subject, origin := pol.Subject, pol.Origin
	if subject == "" || origin == "" {
		first := ""
		if len(e.Provenance) > 0 {
			first = e.Provenance[0].Agent
		}
		if subject == "" {
			subject = first
		}
		if origin == "" {
			origin = first
		}
	}
	if !ev.verdict(p, d, subject, origin, e.Source) {
		return false
	}
	if (rs != nil && rs.nodeRules && (j.clear == nil || !j.clear.of(rs, e.Namespace, p).nodes)) || e.Type == EdgePolicy {
		for _, id := range [2]string{e.Source, e.Target} {
			n := j.nodeOf(e.Namespace, id)
			if n == nil {
				continue // a dangling end hides nothing
			}
			if !j.nodeMemo(n, p) {
				return d.no(ReasonEndpoint, j.endpointRule(n, p, d), id)
			}
		}
	}
	return true
}

// endpointRule names the rule that hides endpoint n (only when
// explaining: it evaluates n again).
func (j *judge) endpointRule(n *Node, p *Principal, d *Decision) string {
	if d == nil {
		return ""
	}
	var nd Decision
	j.node(n, p, &nd)
	return nd.Rule
}

func (j *judge) node(n *Node, p *Principal, d *Decision) bool {
	if n == nil {
		return d.no(ReasonMissing, "", "")
	}
	if ruleNode(n) && !p.HasRole(RoleOperator) {
		return d.no(ReasonNotAllowed, n.Attributes.Props["rule"], n.ID)
	}
	rs := j.pol
	if rs == nil || !rs.nodeRules {
		return true
	}
	if rs.closed {
		return d.no(ReasonDenied, RuleUnavailable, n.ID)
	}
	var ev eval
	ev.start(p.Roles)

	ev.beginLevel(levelItem)
	if g, ok := rs.byNode[n.ID]; ok {
		ev.group(g, n.Namespace)
	}
	ev.endLevel()

	ev.beginLevel(levelTag)
	if len(rs.byTag) > 0 {
		for _, t := range n.Attributes.Tags {
			if g, ok := rs.byTag[t]; ok {
				ev.group(g, n.Namespace)
			}
		}
	}
	if len(rs.locations) > 0 {
		switch n.Type {
		case NodeLocation:
			rs.locationGroups(&ev, n.Name, n.Namespace)
		case NodeEpisode:
			if ep := j.episodeOf(n.Namespace, n.Name); ep != nil && ep.Location != "" {
				rs.locationGroups(&ev, ep.Location, n.Namespace)
			}
		}
	}
	ev.endLevel()

	rs.scopeGroups(&ev, n.Namespace)

	subject, origin := n.Attributes.Props["subject"], n.Attributes.Props["origin"]
	if subject == "" && n.Type == NodeAgent {
		subject = n.Name
	}
	return ev.verdict(p, d, subject, origin, n.ID)
}

func (j *judge) episode(ep *Episode, p *Principal, d *Decision) bool {
	if ep == nil {
		return d.no(ReasonMissing, "", "")
	}
	n := j.nodeOf(ep.Namespace, ep.NodeID)
	if n == nil {
		// An episode whose node is gone: judge it by a stand-in.
		n = &Node{ID: ep.NodeID, Namespace: ep.Namespace, Type: NodeEpisode, Name: ep.ID}
	}
	return j.node(n, p, d)
}

// matchAny reports whether any of roles is in list.
func matchAny(list, roles []string) bool {
	for _, r := range roles {
		for _, l := range list {
			if l == r {
				return true
			}
		}
	}
	return false
}

func hasAny(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func audienceAdmits(aud []string, p *Principal) bool {
	if p.Agent != "" && hasAny(aud, p.Agent) {
		return true
	}
	if p.Subject != "" && hasAny(aud, p.Subject) {
		return true
	}
	return matchAny(aud, p.Roles)
}

func portableFlag(b *bool) int8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 1
	}
	return -1
}

// canonEqual reports whether Canonical(s) == c without allocating; c is
// already canonical.
func canonEqual(s, c string) bool {
	i := 0
	space := false
	started := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = started
			continue
		}
		if space {
			if i >= len(c) || c[i] != ' ' {
				return false
			}
			i++
			space = false
		}
		started = true
		lr := unicode.ToLower(r)
		if lr < utf8.RuneSelf {
			if i >= len(c) || c[i] != byte(lr) {
				return false
			}
			i++
			continue
		}
		cr, size := utf8.DecodeRuneInString(c[i:])
		if cr != lr {
			return false
		}
		i += size
	}
	return i == len(c)
}

// policyNode reads node id of namespace ns for a policy check, once per
// snapshot.
func (sn *Snapshot) policyNode(ns, id string) *Node {
	if n, ok := sn.policyNodes[id]; ok {
		return n
	}
	n, err := sn.Node(ns, id)
	switch {
	case errors.Is(err, ErrNotFound):
		n = nil // missing: nothing to hide
	case err != nil:
		// Unreadable: judge it as a node no one but operators sees.
		n = &Node{ID: id, Namespace: ns, Type: NodePolicy, Attributes: Attributes{Props: map[string]string{"rule": RuleUnavailable}}}
	}
	if sn.policyNodes == nil {
		sn.policyNodes = map[string]*Node{}
	}
	sn.policyNodes[id] = n
	return n
}

// edgeTypeCode is EdgeType.Code as a switch (no slice scan).
func edgeTypeCode(t EdgeType) int {
	switch t {
	case EdgeCausal:
		return 1
	case EdgeTemporal:
		return 2
	case EdgeMembership:
		return 3
	case EdgePolicy:
		return 4
	case EdgeToolUse:
		return 5
	case EdgeAssertion:
		return 6
	}
	return 0
}
