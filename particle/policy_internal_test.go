package particle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// The compiled evaluator must agree with this direct reading of the
// rules on every item, for every principal: it is the specification.
//
// refVisible evaluates item kind "edge" or "node".
type refWorld struct {
	rules    []*Rule
	nodes    map[string]*Node
	episodes map[string]*Episode
}

type refTarget struct {
	key   string
	rules []*Rule
}

// levels returns the targets of an item at each level, most specific
// first, and the item's own policy (edges) as a pseudo-rule set.
func (w *refWorld) levels(ns string, node *Node, edge *Edge) [][]refTarget {
	out := make([][]refTarget, 4)
	match := func(r *Rule) bool {
		return r.Status == RuleActive && (r.Namespace == "" || r.Namespace == ns)
	}
	collect := func(level int, key string, pred func(t Target) bool) {
		var rs []*Rule
		for _, r := range w.rules {
			if match(r) && pred(r.Target) {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			out[level] = append(out[level], refTarget{key, rs})
		}
	}
	if edge != nil {
		var own []*Rule
		if len(edge.Policy.DenyRoles) > 0 {
			own = append(own, &Rule{ID: RuleItemPolicy, Effect: EffectDeny, Roles: edge.Policy.DenyRoles})
		}
		if len(edge.Policy.AllowRoles) > 0 {
			own = append(own, &Rule{ID: RuleItemPolicy, Effect: EffectAllow, Roles: edge.Policy.AllowRoles})
		}
		if edge.Policy.Sensitivity != "" || edge.Policy.Portable != nil {
			own = append(own, &Rule{ID: RuleItemPolicy, Effect: EffectLabel, Sensitivity: edge.Policy.Sensitivity, Portable: edge.Policy.Portable})
		}
		for _, r := range w.rules {
			if match(r) && r.Target.Edge == edge.ID {
				own = append(own, r)
			}
		}
		if len(own) > 0 {
			out[0] = append(out[0], refTarget{"edge", own})
		}
		if edge.Scope.Location != "" {
			collect(1, "loc", func(t Target) bool {
				return len(t.Tag) > 9 && t.Tag[:9] == "location:" && Canonical(t.Tag[9:]) == Canonical(edge.Scope.Location)
			})
		}
		collect(2, "type", func(t Target) bool { return t.EdgeType == edge.Type })
	} else {
		collect(0, "node", func(t Target) bool { return t.Node == node.ID })
		for _, tag := range node.Attributes.Tags {
			collect(1, "tag:"+tag, func(t Target) bool { return t.Tag == tag })
		}
		loc := ""
		switch node.Type {
		case NodeLocation:
			loc = node.Name
		case NodeEpisode:
			if ep := w.episodes[node.Namespace+"\x00"+node.Name]; ep != nil {
				loc = ep.Location
			}
		}
		if loc != "" {
			collect(1, "loc", func(t Target) bool {
				return len(t.Tag) > 9 && t.Tag[:9] == "location:" && Canonical(t.Tag[9:]) == Canonical(loc)
			})
		}
	}
	collect(3, "ns", func(t Target) bool { return t.Scope == ns })
	collect(3, "all", func(t Target) bool { return t.Scope == "*" })
	return out
}

func (w *refWorld) visible(node *Node, edge *Edge, p Principal) bool {
	ns := ""
	if edge != nil {
		ns = edge.Namespace
	} else {
		ns = node.Namespace
		if node.Type == NodePolicy && node.Attributes.Props["rule"] != "" && !slices.Contains(p.Roles, RoleOperator) {
			return false
		}
	}
	levels := w.levels(ns, node, edge)
	roleIn := func(list []string) bool {
		for _, r := range p.Roles {
			if slices.Contains(list, r) {
				return true
			}
		}
		return false
	}
	// Deny beats allow, anywhere.
	for _, lv := range levels {
		for _, t := range lv {
			for _, r := range t.rules {
				if r.Effect == EffectDeny && roleIn(r.Roles) {
					return false
				}
			}
		}
	}
	hasAllow, allowOK := false, false
	var sens Sensitivity
	portable := 0
	for _, lv := range levels {
		levelHas, levelOK := false, true
		levelSens := Sensitivity("")
		levelPort := 0
		for _, t := range lv {
			th, tok := false, false
			for _, r := range t.rules {
				switch r.Effect {
				case EffectAllow:
					th = true
					tok = tok || roleIn(r.Roles)
				case EffectLabel:
					if sensRank(r.Sensitivity) > sensRank(levelSens) || (levelSens == "" && r.Sensitivity != "") {
						levelSens = r.Sensitivity
					}
					if r.Portable != nil {
						v := 1
						if !*r.Portable {
							v = -1
						}
						if levelPort == 0 || v < levelPort {
							levelPort = v
						}
					}
				}
			}
			if th {
				levelHas = true
				levelOK = levelOK && tok
			}
		}
		if levelHas && !hasAllow {
			hasAllow, allowOK = true, levelOK
		}
		if levelSens != "" && sens == "" {
			sens = levelSens
		}
		if levelPort != 0 && portable == 0 {
			portable = levelPort
		}
	}
	var subject, origin string
	if edge != nil {
		if aud := edge.Scope.Audience; len(aud) > 0 {
			if !(p.Agent != "" && slices.Contains(aud, p.Agent)) && !(p.Subject != "" && slices.Contains(aud, p.Subject)) && !roleIn(aud) {
				return false
			}
		}
		first := ""
		if len(edge.Provenance) > 0 {
			first = edge.Provenance[0].Agent
		}
		subject, origin = edge.Policy.Subject, edge.Policy.Origin
		if subject == "" {
			subject = first
		}
		if origin == "" {
			origin = first
		}
	} else {
		subject, origin = node.Attributes.Props["subject"], node.Attributes.Props["origin"]
		if subject == "" && node.Type == NodeAgent {
			subject = node.Name
		}
	}
	self := subject != "" && (subject == p.Subject || subject == p.Agent)
	private := sens == SensitivityPersonal || sens == SensitivitySensitive
	if hasAllow && !allowOK && !(self && private) {
		return false
	}
	if private && !self && !(hasAllow && allowOK) {
		return false
	}
	if sens == SensitivitySensitive && p.Shared {
		return false
	}
	if portable < 0 && (p.Export || (origin != "" && origin != p.Context && origin != p.Subject && origin != p.Agent)) {
		return false
	}
	if edge != nil {
		for _, id := range []string{edge.Source, edge.Target} {
			if n := w.nodes[id]; n != nil && !w.visible(n, nil, p) {
				return false
			}
		}
	}
	return true
}

// randWorld is a random graph and random rules over it.
func randWorld(rng *rand.Rand) (*view, *refWorld) {
	v := newView()
	w := &refWorld{nodes: v.nodes, episodes: v.episodes}
	roles := []string{"operator", "planner", "visitor", "staff"}
	agents := []string{"ur5-alpha", "ur5-beta", ""}
	locs := []string{"Lab", "kitchen  lab", "hall"}
	tags := []string{"location:lab", "lighting:bright", "outcome:success", "zone:b"}
	namespaces := []string{DefaultNamespace, "acme/arm"}
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	subset := func(list []string, pr float64) []string {
		var out []string
		for _, s := range list {
			if rng.Float64() < pr {
				out = append(out, s)
			}
		}
		return out
	}
	boolp := func() *bool {
		switch rng.IntN(4) {
		case 0:
			b := false
			return &b
		case 1:
			b := true
			return &b
		}
		return nil
	}
	sens := func() Sensitivity {
		return []Sensitivity{"", "", SensitivityPublic, SensitivityPersonal, SensitivitySensitive}[rng.IntN(5)]
	}
	var nodes []*Node
	nn := 4 + rng.IntN(10)
	for i := range nn {
		t := NodeTypes[rng.IntN(len(NodeTypes))]
		ns := pick(namespaces)
		name := fmt.Sprintf("n%d", i)
		switch t {
		case NodeLocation:
			name = pick(locs)
		case NodeAgent:
			name = pick(agents[:2])
		}
		n := &Node{ID: fmt.Sprintf("node-%d", i), Namespace: ns, Type: t, Name: name, Seq: uint64(i + 1)}
		n.Attributes.Tags = subset(tags, 0.25)
		if rng.IntN(5) == 0 {
			n.Attributes.Props = map[string]string{"subject": pick(agents), "origin": pick(agents)}
		}
		if t == NodePolicy && rng.IntN(2) == 0 {
			n.Attributes.Props = map[string]string{"rule": "p-x"}
		}
		if t == NodeEpisode {
			v.putEpisode(&Episode{ID: name, Namespace: ns, NodeID: n.ID, Location: pick(append(locs, "")), Seq: uint64(1000 + i)})
		}
		v.putNode(n)
		nodes = append(nodes, n)
	}
	ne := rng.IntN(25)
	for i := range ne {
		// An edge joins nodes of its namespace, as every writer keeps it.
		src := nodes[rng.IntN(len(nodes))]
		dst := nodes[rng.IntN(len(nodes))]
		for dst.Namespace != src.Namespace {
			dst = nodes[rng.IntN(len(nodes))]
		}
		e := &Edge{ID: fmt.Sprintf("edge-%d", i), Namespace: src.Namespace, Source: src.ID, Target: dst.ID,
			Type: EdgeTypes[rng.IntN(len(EdgeTypes))], Seq: uint64(100 + i)}
		if ruleNode(src) || ruleNode(dst) {
			e.Type = EdgePolicy // only policy edges touch a rule's node
		}
		if rng.IntN(2) == 0 {
			e.Scope.Location = pick(locs)
		}
		if rng.IntN(4) == 0 {
			e.Scope.Audience = subset(append(slices.Clone(roles), agents[:2]...), 0.3)
		}
		e.Policy = Policy{AllowRoles: subset(roles, 0.15), DenyRoles: subset(roles, 0.1), Sensitivity: sens(), Portable: boolp()}
		if rng.IntN(3) == 0 {
			e.Policy.Subject = pick(agents)
		}
		if rng.IntN(3) == 0 {
			e.Policy.Origin = pick(agents)
		}
		if a := pick(agents); a != "" {
			e.Provenance = []Provenance{{Agent: a}}
		}
		v.putEdge(e)
	}
	nr := rng.IntN(8)
	for i := range nr {
		r := &Rule{ID: fmt.Sprintf("p-%02d", i), Status: RuleActive}
		if rng.IntN(8) == 0 {
			r.Status = []RuleStatus{RulePending, RuleRevoked, RuleRejected}[rng.IntN(3)]
		}
		switch rng.IntN(3) {
		case 0:
			r.Effect = EffectAllow
		case 1:
			r.Effect = EffectDeny
		default:
			r.Effect = EffectLabel
			r.Sensitivity, r.Portable = sens(), boolp()
		}
		if r.Effect != EffectLabel {
			r.Roles = subset(roles, 0.4)
			if len(r.Roles) == 0 {
				r.Roles = []string{pick(roles)}
			}
		}
		if rng.IntN(4) == 0 {
			r.Namespace = pick(namespaces)
		}
		switch rng.IntN(6) {
		case 0:
			r.Target.Node = nodes[rng.IntN(len(nodes))].ID
		case 1:
			r.Target.Edge = fmt.Sprintf("edge-%d", rng.IntN(ne+1))
		case 2:
			r.Target.EdgeType = EdgeTypes[rng.IntN(len(EdgeTypes))]
		case 3:
			r.Target.Tag = pick(append(tags, "location:hall", "location:Kitchen Lab"))
		case 4:
			r.Target.Scope = pick(namespaces)
		default:
			r.Target.Scope = "*"
		}
		w.rules = append(w.rules, r)
	}
	return v, w
}

func randPrincipal(rng *rand.Rand) Principal {
	roles := []string{"operator", "planner", "visitor", "staff"}
	var p Principal
	for _, r := range roles {
		if rng.IntN(3) == 0 {
			p.Roles = append(p.Roles, r)
		}
	}
	p.Agent = []string{"", "ur5-alpha", "ur5-beta"}[rng.IntN(3)]
	p.Subject = []string{"", "ur5-alpha", "alice"}[rng.IntN(3)]
	p.Context = []string{"", "ur5-alpha", "ur5-beta"}[rng.IntN(3)]
	p.Shared = rng.IntN(3) == 0
	p.Export = rng.IntN(4) == 0
	return p
}

// TestCompiledPolicyMatchesSpecification: thousands of random graphs,
// rule sets and principals, seeded; the compiled evaluator (Reader and
// Snapshot forms share it) agrees with the direct reading of the rules
// on every edge, node and episode, and explains every "no".
func TestCompiledPolicyMatchesSpecification(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260101, 6))
	cases, checks := 3000, 0
	if testing.Short() {
		cases = 300
	}
	for c := range cases {
		v, w := randWorld(rng)
		m := map[string]*Rule{}
		for _, r := range w.rules {
			m[r.ID] = r
		}
		r := Reader{v: v, pol: compile(1, m)}
		for range 4 {
			p := randPrincipal(rng)
			g := r.Guard(p) // judged twice through the guard: memo and clearance
			for _, e := range edgesByID(v) {
				want := w.visible(nil, e, p)
				d := r.ExplainEdge(e, p)
				if got, viaGuard, again := r.EdgeVisible(e, p), g.EdgeVisible(e), g.EdgeVisible(e); got != want || d.Visible != want || viaGuard != want || again != want {
					t.Fatalf("case %d: edge %+v principal %+v: visible %v (explained %+v), spec says %v\nrules: %s", c, e, p, got, d, want, dumpRules(w.rules))
				}
				if !want && (d.Reason == "" || d.Scope == "") {
					t.Fatalf("case %d: edge %s hidden without a reason: %+v", c, e.ID, d)
				}
				checks++
			}
			for _, n := range v.nodes {
				want := w.visible(n, nil, p)
				if got, viaGuard, again := r.NodeVisible(n, p), g.NodeVisible(n), g.NodeVisible(n); got != want || viaGuard != want || again != want {
					t.Fatalf("case %d: node %+v principal %+v: visible %v, spec says %v\nrules: %s", c, n, p, got, want, dumpRules(w.rules))
				}
				checks++
			}
			for _, ep := range v.episodes {
				want := w.visible(v.nodes[ep.NodeID], nil, p)
				if got, viaGuard := r.EpisodeVisible(ep, p), g.EpisodeVisible(ep); got != want || viaGuard != want {
					t.Fatalf("case %d: episode %+v: visible %v, spec says %v", c, ep, got, want)
				}
				if vis := r.VisibleEpisode(ep, p); (vis != nil) != want {
					t.Fatalf("case %d: VisibleEpisode disagrees with EpisodeVisible", c)
				}
			}
		}
	}
	t.Logf("%d cases, %d checks", cases, checks)
}

func dumpRules(rs []*Rule) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %s %v ns=%q sens=%q port=%v target=%s", r.ID, r.Status, r.Effect, r.Roles, r.Namespace, r.Sensitivity, r.Portable, r.Target))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

func TestCanonEqual(t *testing.T) {
	for _, tc := range []struct {
		s, c string
		want bool
	}{
		{"Kitchen  Lab", "kitchen lab", true},
		{"  kitchen lab ", "kitchen lab", true},
		{"kitchen\tLAB", "kitchen lab", true},
		{"kitchenlab", "kitchen lab", false},
		{"kitchen lab", "kitchen la", false},
		{"ÉCLAIR", "éclair", true},
		{"", "", true},
		{"a", "", false},
	} {
		if got := canonEqual(tc.s, tc.c); got != tc.want || (Canonical(tc.s) == tc.c) != tc.want {
			t.Errorf("canonEqual(%q, %q) = %v, want %v", tc.s, tc.c, got, tc.want)
		}
	}
}

// The fast path allocates nothing, with rules or without.
func TestEdgeVisibleAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	v, w := randWorld(rng)
	m := map[string]*Rule{}
	for _, r := range w.rules {
		m[r.ID] = r
	}
	m["x"] = &Rule{ID: "x", Status: RuleActive, Effect: EffectDeny, Roles: []string{"visitor"}, Target: Target{Tag: "location:lab"}}
	r := Reader{v: v, pol: compile(1, m)}
	p := Principal{Roles: []string{"planner", "staff"}, Agent: "ur5-alpha"}
	edges := edgesByID(v)
	allocs := testing.AllocsPerRun(100, func() {
		for _, e := range edges {
			r.EdgeVisible(e, p)
		}
		for _, n := range v.nodes {
			r.NodeVisible(n, p)
		}
	})
	if allocs != 0 {
		t.Errorf("policy checks allocate %v times per run", allocs)
	}
}

func BenchmarkEdgeVisible(b *testing.B) {
	e := &Edge{ID: "e1", Namespace: DefaultNamespace, Source: "a", Target: "b", Type: EdgeToolUse,
		Scope: Scope{Location: "kitchen lab"}, Provenance: []Provenance{{Agent: "ur5-alpha"}}}
	v := newView()
	v.putNode(&Node{ID: "a", Namespace: DefaultNamespace, Type: NodeAgent, Name: "ur5-alpha", Attributes: Attributes{Tags: []string{"zone:b"}}})
	v.putNode(&Node{ID: "b", Namespace: DefaultNamespace, Type: NodeTool, Name: "gripper"})
	v.putEdge(e)
	p := Principal{Roles: []string{"planner"}, Agent: "ur5-alpha"}
	rules := map[string]*Rule{
		"1": {ID: "1", Status: RuleActive, Effect: EffectDeny, Roles: []string{"visitor"}, Target: Target{EdgeType: EdgeToolUse}},
		"2": {ID: "2", Status: RuleActive, Effect: EffectDeny, Roles: []string{"visitor"}, Target: Target{Tag: "location:lab"}},
		"3": {ID: "3", Status: RuleActive, Effect: EffectAllow, Roles: []string{"planner", "operator"}, Target: Target{Node: "zzz"}},
	}
	for _, bc := range []struct {
		name  string
		rules map[string]*Rule
	}{{"no-rules", nil}, {"edge-type-rule", map[string]*Rule{"1": rules["1"]}}, {"node-and-tag-rules", rules}} {
		b.Run(bc.name, func(b *testing.B) {
			r := Reader{v: v, pol: compile(1, bc.rules)}
			for b.Loop() {
				if !r.EdgeVisible(e, p) {
					b.Fatal("hidden")
				}
			}
		})
		// The planner's form: a guard bound to the principal.
		for _, who := range []Principal{p, {Roles: []string{"visitor"}}} {
			b.Run(bc.name+"/guard-"+who.Roles[0], func(b *testing.B) {
				g := Reader{v: v, pol: compile(1, bc.rules)}.Guard(who)
				for b.Loop() {
					g.EdgeVisible(e)
				}
			})
		}
	}
}

// graphRuleEdges finds the same edges as a scan of every edge, by the
// facts and, when they do not account for every edge, by the scan.
func TestGraphRuleEdgesFromFacts(t *testing.T) {
	v := newView()
	edge := func(seq uint64, typ EdgeType, pol Policy, status Status) *Edge {
		return &Edge{ID: fmt.Sprintf("e%d", seq), Namespace: DefaultNamespace, Source: "a", Target: "b",
			Type: typ, Policy: pol, Status: status, Seq: seq}
	}
	deny := Policy{DenyRoles: []string{"planner"}}
	want := []*Edge{edge(3, EdgePolicy, deny, ""), edge(6, EdgePolicy, Policy{Sensitivity: "pii"}, "")}
	for _, e := range []*Edge{edge(1, EdgeTemporal, Policy{}, ""), edge(2, EdgeTemporal, deny, ""), want[0],
		edge(4, EdgePolicy, deny, StatusSuperseded), edge(5, EdgePolicy, Policy{}, ""), want[1]} {
		v.putEdge(e)
	}
	byID := func(es []*Edge) []string {
		var ids []string
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := byID(v.graphRuleEdges()); !slices.Equal(got, byID(want)) {
		t.Fatalf("graph rule edges %v, want %v", got, byID(want))
	}
	// An edge the facts do not hold (no seq): the edges are scanned.
	odd := edge(0, EdgePolicy, deny, "")
	odd.ID = "odd"
	v.putEdge(odd)
	if got := byID(v.graphRuleEdges()); !slices.Equal(got, byID(append(want, odd))) {
		t.Fatalf("with an edge outside the facts: %v", got)
	}
}
