package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
	"github.com/ctxgraph/ctxgraph/wave"
)

// TestNoReadPathReturnsOrCountsADeniedItem is the policy's property
// test: random graphs, random rules and random principals (seeded,
// reproducible), and every read path — planner answers, GET of nodes,
// edges and episodes, stats, introspection and its topics, diff — asked
// as each principal. Nothing a read path returns is denied by the
// evaluation function, what it counts is exactly what is visible, and
// a hidden name is as unknown as an absent one.
func TestNoReadPathReturnsOrCountsADeniedItem(t *testing.T) {
	seed := uint64(6)
	graphs, ruleSets, principals := 5, 8, 50 // 2000 cases
	if testing.Short() {
		graphs, ruleSets, principals = 2, 4, 10
	}
	rng := rand.New(rand.NewPCG(seed, 2026))
	d := startDaemon(t, testConfig(t.TempDir()))
	base := "http://" + d.HTTPAddr()
	ctx := context.Background()
	cases, checks := 0, 0

	for g := range graphs {
		ns := particle.Namespace(fmt.Sprintf("t%d", g), "lab")
		w := buildWorld(t, d, rng, ns)
		for range ruleSets {
			rules := randomRules(rng, w)
			var ids []string
			for _, r := range rules {
				a, err := d.Store().EditPolicy(ctx, particle.Edit{Op: particle.OpCreate, Rule: &r, Who: "prop", Why: "property test"})
				if err != nil {
					t.Fatalf("rule %+v: %v", r, err)
				}
				ids = append(ids, a.RuleID)
			}
			for range principals {
				p := randomPrincipal(rng)
				cases++
				checks += checkReadPaths(t, d, base, ns, w, p, rng)
				if t.Failed() {
					t.Fatalf("seed %d graph %d case %d: principal %+v, rules %+v", seed, g, cases, p, rules)
				}
			}
			for _, id := range ids {
				if _, err := d.Store().EditPolicy(ctx, particle.Edit{Op: particle.OpRevoke, ID: id, Who: "prop", Why: "next"}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d cases, %d checks", cases, checks)
}

// world is one random graph in its namespace.
type world struct {
	ns       string
	nodes    []*particle.Node
	edges    []*particle.Edge
	episodes []*particle.Episode
	tags     []string
}

var propRoles = []string{"operator", "planner", "visitor", "staff"}
var propAgents = []string{"ur5-alpha", "franka-beta"}

func buildWorld(t *testing.T, d *Daemon, rng *rand.Rand, ns string) *world {
	t.Helper()
	w := &world{ns: ns, tags: []string{"zone:a", "zone:b", "lighting:dim", "outcome:success", "location:lab"}}
	dim := d.index.Dim()
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		wave.Normalize(v)
		return v
	}
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
	_, err := d.Store().Update(context.Background(), func(b *particle.Batch) error {
		types := []particle.NodeType{particle.NodeEntity, particle.NodeEntity, particle.NodeTool, particle.NodeGoal, particle.NodeLocation, particle.NodeAgent, particle.NodeConcept}
		for i := range 14 + rng.IntN(10) {
			tp := types[rng.IntN(len(types))]
			name := fmt.Sprintf("thing %d", i)
			switch tp {
			case particle.NodeLocation:
				name = pick([]string{"Lab", "kitchen", "hall"})
			case particle.NodeAgent:
				name = pick(propAgents)
			}
			n, _, err := b.Resolve(ns, tp, name)
			if err != nil {
				return err
			}
			n.Embedding = vec()
			n.Attributes.Tags = subset(w.tags, 0.2)
			if rng.IntN(6) == 0 {
				n.Attributes.Props = map[string]string{"subject": pick(propAgents)}
			}
			if err := b.PutNode(n); err != nil {
				return err
			}
			if !slices.ContainsFunc(w.nodes, func(x *particle.Node) bool { return x.ID == n.ID }) {
				w.nodes = append(w.nodes, n)
			}
		}
		for i := range 3 {
			id := fmt.Sprintf("ep-%d", i)
			ep := &particle.Episode{ID: id, Namespace: ns, Agent: pick(propAgents), StartTime: time.Now().Add(-time.Hour),
				Location: pick([]string{"lab", "Kitchen", ""}), NodeID: particle.EpisodeNodeID(ns, id), Steps: 1 + rng.IntN(9), Embedding: vec()}
			n := &particle.Node{ID: ep.NodeID, Namespace: ns, Type: particle.NodeEpisode, Name: id, Embedding: vec()}
			n.Attributes.Tags = subset(w.tags, 0.3)
			if err := b.PutNode(n); err != nil {
				return err
			}
			w.nodes = append(w.nodes, n)
			for _, x := range w.nodes[:rng.IntN(len(w.nodes))] {
				ep.Nodes = append(ep.Nodes, x.ID)
			}
			if err := b.PutEpisode(ep); err != nil {
				return err
			}
			w.episodes = append(w.episodes, ep)
		}
		for range 40 + rng.IntN(30) {
			src, dst := w.nodes[rng.IntN(len(w.nodes))], w.nodes[rng.IntN(len(w.nodes))]
			if src.ID == dst.ID {
				continue
			}
			tp := particle.EdgeTypes[rng.IntN(len(particle.EdgeTypes))]
			if tp == particle.EdgePolicy {
				tp = particle.EdgeAssertion
			}
			o := particle.Observation{Namespace: ns, Source: src.ID, Target: dst.ID, Type: tp, Predicate: pick([]string{"near", "holds", "part_of", "uses"}),
				Confidence: 0.2 + 0.8*rng.Float64(), Reinforce: rng.Float64(), Location: pick([]string{"", "lab", "hall"}),
				Provenance: particle.Provenance{EpisodeID: pick([]string{"ep-0", "ep-1", "ep-2"}), Agent: pick(propAgents)},
				Policy:     particle.Policy{AllowRoles: subset(propRoles, 0.1), DenyRoles: subset(propRoles, 0.08)},
			}
			if rng.IntN(6) == 0 {
				o.Audience = subset(append(slices.Clone(propRoles), propAgents...), 0.4)
			}
			switch rng.IntN(8) {
			case 0:
				o.Policy.Sensitivity = particle.SensitivityPersonal
			case 1:
				o.Policy.Sensitivity = particle.SensitivitySensitive
			}
			if rng.IntN(8) == 0 {
				f := false
				o.Policy.Portable = &f
			}
			emb := vec()
			o.Embed = func() ([]float32, error) { return emb, nil }
			e, created, err := b.Observe(o)
			if err != nil {
				return err
			}
			if created {
				w.edges = append(w.edges, e)
			}
		}
		// A policy edge of the graph now and then.
		if rng.IntN(2) == 0 {
			src, dst := w.nodes[rng.IntN(len(w.nodes))], w.nodes[rng.IntN(len(w.nodes))]
			e, _, err := b.Observe(particle.Observation{Namespace: ns, Source: src.ID, Target: dst.ID, Type: particle.EdgePolicy,
				Predicate: "restricts", Policy: particle.Policy{DenyRoles: []string{pick(propRoles)}}})
			if err != nil {
				return err
			}
			w.edges = append(w.edges, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

func randomRules(rng *rand.Rand, w *world) []particle.Rule {
	var out []particle.Rule
	for range rng.IntN(5) {
		r := particle.Rule{Roles: []string{propRoles[rng.IntN(len(propRoles))]}}
		switch rng.IntN(5) {
		case 0, 1:
			r.Effect = particle.EffectDeny
		case 2, 3:
			r.Effect = particle.EffectAllow
			if rng.IntN(2) == 0 {
				r.Roles = append(r.Roles, propRoles[rng.IntN(len(propRoles))])
			}
		default:
			r.Effect, r.Roles = particle.EffectLabel, nil
			r.Sensitivity = []particle.Sensitivity{particle.SensitivityPersonal, particle.SensitivitySensitive, particle.SensitivityPublic}[rng.IntN(3)]
		}
		switch rng.IntN(5) {
		case 0:
			r.Target.Node = w.nodes[rng.IntN(len(w.nodes))].ID
		case 1:
			r.Target.Edge = w.edges[rng.IntN(len(w.edges))].ID
		case 2:
			r.Target.EdgeType = particle.EdgeTypes[rng.IntN(len(particle.EdgeTypes))]
		case 3:
			r.Target.Tag = w.tags[rng.IntN(len(w.tags))]
		default:
			r.Target.Scope = w.ns
		}
		out = append(out, r)
	}
	return out
}

func randomPrincipal(rng *rand.Rand) particle.Principal {
	var p particle.Principal
	for _, r := range propRoles {
		if rng.IntN(3) == 0 {
			p.Roles = append(p.Roles, r)
		}
	}
	if rng.IntN(2) == 0 {
		p.Agent = propAgents[rng.IntN(len(propAgents))]
	}
	return p
}

// getJSON GETs path as principal p (auth off: ?role=, ?agent=).
func getJSON(t *testing.T, base, path string, q url.Values, p particle.Principal, out any) int {
	t.Helper()
	for _, r := range p.Roles {
		q.Add("role", r)
	}
	if p.Agent != "" {
		q.Set("agent", p.Agent)
	}
	resp, err := http.Get(base + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

func nsQuery(ns string) url.Values {
	q := url.Values{}
	tenant, project, _ := cutNS(ns)
	q.Set("tenant", tenant)
	q.Set("project", project)
	return q
}

func cutNS(ns string) (string, string, bool) {
	for i := range ns {
		if ns[i] == '/' {
			return ns[:i], ns[i+1:], true
		}
	}
	return ns, "", false
}

// checkReadPaths asks every read path as p and checks it against the
// evaluation function; it returns the number of checks.
func checkReadPaths(t *testing.T, d *Daemon, base, ns string, w *world, p particle.Principal, rng *rand.Rand) int {
	t.Helper()
	checks := 0
	var visNodes, visEdges = map[string]bool{}, map[string]bool{}
	visEps := map[string]bool{}
	d.Store().Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			if n.Namespace == ns && r.NodeVisible(n, p) {
				visNodes[n.ID] = true
			}
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			if e.Namespace == ns && r.EdgeVisible(e, p) {
				visEdges[e.ID] = true
			}
			return true
		})
		for _, ep := range w.episodes {
			if r.EpisodeVisible(r.Episode(ns, ep.ID), p) {
				visEps[ep.ID] = true
			}
		}
	})

	// Planner answers: only visible nodes and edges; a hidden name is
	// unknown exactly like an absent one.
	named := []string{w.nodes[rng.IntN(len(w.nodes))].Name, w.nodes[rng.IntN(len(w.nodes))].Name, "no such thing"}
	tenant, project, _ := cutNS(ns)
	for _, strategy := range []string{"", "graph"} {
		req := &planner.Request{Query: named[0] + " " + named[1], Entities: named, Roles: p.Roles, Agent: p.Agent,
			Tenant: tenant, Project: project, Hops: 2, Budget: 200, K: 8, Strategy: strategy}
		ans, err := d.planner.Plan(context.Background(), req)
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		for _, n := range ans.Nodes {
			if !visNodes[n.ID] {
				t.Errorf("planner (%q) returned hidden node %s %q", strategy, n.ID, n.Name)
			}
			checks++
		}
		for _, e := range ans.Edges {
			if !visEdges[e.ID] {
				var dec particle.Decision
				var ee *particle.Edge
				d.Store().Read(func(r particle.Reader) { ee = r.Edge(e.ID); dec = r.ExplainEdge(ee, p) })
				t.Errorf("planner (%q) returned hidden edge %s (%s -%s-> %s) %+v; answer strategy %s", strategy, e.ID, e.SourceName, e.Predicate, e.TargetName, dec, ans.Strategy)
			}
			checks++
		}
		for _, name := range named {
			var n *particle.Node
			d.Store().Read(func(r particle.Reader) { n = r.LookupAny(ns, name) })
			unknown := slices.ContainsFunc(ans.Unknowns, func(u planner.Unknown) bool { return u.Name == name })
			if n != nil && !visNodes[n.ID] && !unknown {
				t.Errorf("planner: hidden %q is not unknown (its absence shows)", name)
			}
			checks++
		}
	}

	// GET by id: 200 exactly for what is visible.
	for range 6 {
		n := w.nodes[rng.IntN(len(w.nodes))]
		if code := getJSON(t, base, "/v1/nodes/"+n.ID, url.Values{}, p, nil); (code == http.StatusOK) != visNodes[n.ID] {
			t.Errorf("GET node %s: %d, visible %v", n.ID, code, visNodes[n.ID])
		}
		e := w.edges[rng.IntN(len(w.edges))]
		if code := getJSON(t, base, "/v1/edges/"+e.ID, url.Values{}, p, nil); (code == http.StatusOK) != visEdges[e.ID] {
			t.Errorf("GET edge %s: %d, visible %v", e.ID, code, visEdges[e.ID])
		}
		checks += 2
	}
	for _, ep := range w.episodes {
		var got particle.Episode
		code := getJSON(t, base, "/v1/episodes/"+ep.ID, nsQuery(ns), p, &got)
		if (code == http.StatusOK) != visEps[ep.ID] {
			t.Errorf("GET episode %s: %d, visible %v", ep.ID, code, visEps[ep.ID])
		}
		for _, id := range got.Nodes {
			if !visNodes[id] {
				t.Errorf("GET episode %s lists hidden node %s", ep.ID, id)
			}
		}
		checks++
	}

	// Counts: stats and introspection count exactly what is visible.
	wantNodes, wantEdges := map[particle.NodeType]int64{}, map[particle.EdgeType]int64{}
	d.Store().Read(func(r particle.Reader) {
		for id := range visNodes {
			wantNodes[r.Node(id).Type]++
		}
		for id := range visEdges {
			wantEdges[r.Edge(id).Type]++
		}
	})
	var ov Introspection
	if code := getJSON(t, base, "/v1/introspect", nsQuery(ns), p, &ov); code != http.StatusOK {
		t.Fatalf("introspect: %d", code)
	}
	for _, tp := range particle.NodeTypes {
		if int64(ov.NodeTypes[tp]) != wantNodes[tp] {
			t.Errorf("introspect counts %d %s nodes, %d visible", ov.NodeTypes[tp], tp, wantNodes[tp])
		}
	}
	for _, tp := range particle.EdgeTypes {
		if int64(ov.EdgeTypes[tp]) != wantEdges[tp] {
			t.Errorf("introspect counts %d %s edges, %d visible", ov.EdgeTypes[tp], tp, wantEdges[tp])
		}
	}
	checks += len(particle.NodeTypes) + len(particle.EdgeTypes)
	// Stats covers every namespace: compare with the visible items of all.
	var st Stats
	if code := getJSON(t, base, "/v1/stats", url.Values{}, p, &st); code != http.StatusOK {
		t.Fatalf("stats: %d", code)
	}
	var allEdges int64
	d.Store().Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if r.EdgeVisible(e, p) {
				allEdges++
			}
			return true
		})
	})
	if got := sumCounts(st.Counts.Edges); got != allEdges {
		t.Errorf("stats counts %d edges, %d visible", got, allEdges)
	}
	checks++

	// Topic: its node must be visible, its neighbours counted over
	// visible edges only.
	n := w.nodes[rng.IntN(len(w.nodes))]
	var topic particle.Topic
	code := getJSON(t, base, "/v1/introspect/"+url.PathEscape(n.ID), nsQuery(ns), p, &topic)
	if (code == http.StatusOK) != visNodes[n.ID] {
		t.Errorf("topic %s: %d, visible %v", n.ID, code, visNodes[n.ID])
	}
	if code == http.StatusOK {
		neighbors := map[string]bool{}
		d.Store().Read(func(r particle.Reader) {
			visit := func(e *particle.Edge) bool {
				if visEdges[e.ID] {
					other := e.Target
					if other == n.ID {
						other = e.Source
					}
					neighbors[other] = true
				}
				return true
			}
			r.Out(n.ID, visit)
			r.In(n.ID, visit)
		})
		if topic.Neighbors != len(neighbors) {
			t.Errorf("topic %s counts %d neighbours, %d over visible edges", n.ID, topic.Neighbors, len(neighbors))
		}
	}
	checks++

	// Export (every fourth case: it streams Arrow): exactly the items
	// visible to the principal as an exporter (non-portable ones stay).
	if rng.IntN(4) == 0 {
		// (Export's ?agent= is a filter of what to export, not who asks.)
		pe := particle.Principal{Roles: p.Roles, Export: true}
		for _, table := range []arrowexport.Table{arrowexport.TableEdges, arrowexport.TableNodes} {
			q := nsQuery(ns)
			q.Set("table", string(table))
			q.Set("format", string(arrowexport.FormatArrowStream))
			for _, r := range p.Roles {
				q.Add("role", r)
			}
			_, recs := arrowexporttest.Read(t, arrowexport.FormatArrowStream, getExport(t, d, q))
			got := map[string]bool{}
			if table == arrowexport.TableEdges {
				for _, e := range arrowexporttest.Decode(t, recs, arrowexport.DecodeEdges) {
					got[e.ID] = true
				}
			} else {
				for _, n := range arrowexporttest.Decode(t, recs, arrowexport.DecodeNodes) {
					got[n.ID] = true
				}
			}
			want := map[string]bool{}
			d.Store().Read(func(r particle.Reader) {
				if table == arrowexport.TableEdges {
					r.Edges(func(e *particle.Edge) bool {
						if e.Namespace == ns && r.EdgeVisible(e, pe) {
							want[e.ID] = true
						}
						return true
					})
				} else {
					r.Nodes(func(n *particle.Node) bool {
						if n.Namespace == ns && r.NodeVisible(n, pe) {
							want[n.ID] = true
						}
						return true
					})
				}
			})
			for id := range got {
				if !want[id] {
					t.Errorf("export (%s) holds %s, which the exporter may not see", table, id)
				}
				checks++
			}
			if len(got) != len(want) {
				t.Errorf("export (%s): %d rows, %d visible", table, len(got), len(want))
			}
		}
	}

	// Diff: only visible edges.
	body, _ := json.Marshal(DiffRequest{From: time.Now().Add(-48 * time.Hour), To: time.Now().Add(time.Hour), Roles: p.Roles, Tenant: tenant, Project: project})
	q := url.Values{}
	if p.Agent != "" {
		q.Set("agent", p.Agent)
	}
	resp, err := http.Post(base+"/v1/diff?"+q.Encode(), "application/json", bytesReader(body))
	if err == nil {
		var diff particle.Diff
		if resp.StatusCode == http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&diff)
		}
		resp.Body.Close()
		for _, l := range [][]*particle.Edge{diff.Added, diff.Ended, diff.Superseded} {
			for _, e := range l {
				if !visEdges[e.ID] {
					t.Errorf("diff returned hidden edge %s", e.ID)
				}
				checks++
			}
		}
	}
	return checks
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
