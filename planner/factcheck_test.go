package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// TestFactCheckAgreesWithAdmits stores edges with every kind of value
// the facts hold (zero, epoch and far-out times, superseded status,
// confidences around the minimums, no, one or several agents, locations
// in several spellings, plain and own policies) and asks, for requests
// under every constraint, whether factCheck.decide gives admits' answer
// whenever it decides. It also checks that the facts decide most edges
// of plain requests (else the expansion gains nothing).
func TestFactCheckAgreesWithAdmits(t *testing.T) {
	f := newFixture(t, false)
	r := rand.New(rand.NewPCG(7, 8))
	times := []time.Time{{}, time.Unix(0, 0).UTC(), t0, t0.Add(time.Hour), t0.Add(-time.Hour), t0.Add(24 * time.Hour),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}
	pick := func() time.Time { return times[r.IntN(len(times))] }
	// Two agents and two places whose keys collide: their facts keys
	// must not decide a match.
	agentA, agentB := keyCollision(wave.AgentKey, "robot-%d")
	siteA, siteB := keyCollision(func(s string) uint32 { return wave.SiteKey(particle.Canonical(s)) }, "site %d")
	agents := []string{"", "ur5-alpha", "ur5-beta", "spot-1", agentA, agentB}
	places := []string{"", "kitchen lab", "Kitchen  Lab", " kitchen lab ", "warehouse", "  ", siteA, siteB}
	policies := []particle.Policy{{}, {}, {}, {DenyRoles: []string{"visitor"}}, {AllowRoles: []string{"operator"}},
		{Sensitivity: particle.SensitivityPersonal}}

	_, err := f.store.Update(context.Background(), func(b *particle.Batch) error {
		var ids []string
		for i := range 12 {
			n := &particle.Node{ID: fmt.Sprintf("node-%d", i), Type: particle.NodeEntity, Name: fmt.Sprintf("thing %d", i)}
			if err := b.PutNode(n); err != nil {
				return err
			}
			ids = append(ids, n.ID)
		}
		for i := range 600 {
			e := &particle.Edge{Source: ids[r.IntN(len(ids))], Target: ids[r.IntN(len(ids))], Type: particle.EdgeAssertion,
				Assertion: &particle.Assertion{Predicate: fmt.Sprintf("p%d", i)}, Confidence: []float64{0, 0.3, 0.5, 0.5000001, 0.65, 0.9, 1}[r.IntN(7)],
				ValidFrom: pick(), ValidTo: pick(), EndedAt: pick(), Policy: policies[r.IntN(len(policies))]}
			e.Scope.TimeRange = particle.TimeRange{From: pick(), To: pick()}
			e.Scope.Location = places[r.IntN(len(places))]
			if r.IntN(6) == 0 {
				e.Scope.Audience = []string{"ops"}
			}
			if r.IntN(4) == 0 {
				e.Status = particle.StatusSuperseded
			}
			for range r.IntN(3) {
				e.Provenance = append(e.Provenance, particle.Provenance{EpisodeID: "ep-1", Agent: agents[r.IntN(len(agents))], ObservedAt: t0})
			}
			if err := b.PutEdge(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A rule hides the edges touching one node from visitors: for them,
	// plain edges are not all visible.
	if _, err := f.store.EditPolicy(context.Background(), particle.Edit{Op: particle.OpCreate, Who: "test", Why: "test",
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Node: "node-3"}}}); err != nil {
		t.Fatal(err)
	}

	var reqs []Request
	for _, roles := range [][]string{nil, {"visitor"}, {"operator"}} {
		for _, minConf := range []float64{0, 0.5, 0.65} {
			reqs = append(reqs, Request{Roles: roles, MinConfidence: minConf})
		}
		for _, tm := range times {
			at := tm
			reqs = append(reqs, Request{Roles: roles, AsOf: &at},
				Request{Roles: roles, TimeWindow: &TimeWindow{From: tm}},
				Request{Roles: roles, TimeWindow: &TimeWindow{To: tm}},
				Request{Roles: roles, TimeWindow: &TimeWindow{From: tm, To: tm.Add(time.Hour)}})
		}
		for _, place := range places {
			reqs = append(reqs, Request{Roles: roles, Location: place})
		}
		for _, agent := range agents {
			reqs = append(reqs, Request{Roles: roles, Agent: agent, SameAgent: true},
				Request{Roles: roles, Agent: agent, SameAgent: true, Location: "KITCHEN LAB", MinConfidence: 0.5})
		}
	}
	plainDecided, plainTotal := 0, 0
	// keyDecided counts, for same-agent and location requests whose key
	// stands for one name, the plain edges of that agent or place the
	// facts decide (by the view's key records), and for same-agent
	// requests the plain edges of several agents (by their agent sets).
	keyDecided, keyTotal := 0, 0
	for _, req := range reqs {
		f.store.Read(func(rd particle.Reader) {
			run := &run{p: f.p, req: &req, ns: rd.Namespace(testNS), principal: req.principal(), r: rd}
			defer run.release()
			fc := run.factCheck()
			unique := map[string]bool{"ur5-alpha": true, "ur5-beta": true, "spot-1": true, "kitchen lab": true, "warehouse": true}
			if req.SameAgent && unique[req.Agent] && !fc.agentIs || req.Location != "" && unique[particle.Canonical(req.Location)] && !fc.siteIs {
				t.Fatalf("request %+v: the key of an agent or place alone in its key is not taken as exact", req)
			}
			rd.Edges(func(e *particle.Edge) bool {
				facts := rd.EdgeFactsBySeq(e.Seq)
				if facts == nil {
					t.Fatalf("edge %s (seq %d) has no facts", e.ID, e.Seq)
				}
				admit, decided := fc.decide(e.Seq, facts)
				if want := run.admits(e); decided && admit != want {
					t.Fatalf("request %+v, edge %+v: facts say %v, admits %v", req, e, admit, want)
				}
				plain := fc.plainOK && req.AsOf == nil && req.TimeWindow == nil && plainPolicy(e.Policy) &&
					len(e.Scope.Audience) == 0 && facts.Flags&particle.FactExact != 0
				if plain && req.Location == "" && !req.SameAgent {
					plainTotal++
					if decided {
						plainDecided++
					}
				}
				if plain && req.MinConfidence == 0 && (req.SameAgent && req.Agent != "" && req.Location == "" &&
					(fc.agentIs && facts.Agent == fc.agent || wave.IsAgentSet(facts.Agent) && fc.agentSets) ||
					req.Location != "" && !req.SameAgent && fc.siteIs && facts.Site == fc.site) {
					keyTotal++
					if decided {
						keyDecided++
					}
				}
				if (req.SameAgent && (req.Agent == agentA || req.Agent == agentB) && fc.agentIs) ||
					(req.Location == siteA || req.Location == siteB) && fc.siteIs {
					t.Fatalf("request %+v: a key two names share is taken as exact", req)
				}
				return true
			})
		})
	}
	if plainTotal == 0 || plainDecided*10 < plainTotal*9 {
		t.Fatalf("the facts decided %d of %d plain edges under plain requests", plainDecided, plainTotal)
	}
	if keyTotal == 0 || keyDecided != keyTotal {
		t.Fatalf("the facts decided %d of %d plain edges of the asked agent or place by their keys", keyDecided, keyTotal)
	}
}

// keyCollision returns two names of the form pattern (with %d) that key
// maps to the same value.
func keyCollision(key func(string) uint32, pattern string) (string, string) {
	seen := map[uint32]string{}
	for i := 0; ; i++ {
		name := fmt.Sprintf(pattern, i)
		k := key(name)
		if other, ok := seen[k]; ok {
			return other, name
		}
		seen[k] = name
	}
}

func plainPolicy(p particle.Policy) bool {
	return len(p.AllowRoles) == 0 && len(p.DenyRoles) == 0 && p.Sensitivity == "" && p.Portable == nil
}

// An answer names no episode its caller may not see: a rule that hides
// an episode from visitors takes it out of every edge's provenance and
// every node's episode list (the facts stay, by their own policy), and
// leaves it for everyone else.
func TestAnswersHideEpisodesTheCallerCannotSee(t *testing.T) {
	f := lab(t, false)
	_, err := f.store.Update(context.Background(), func(b *particle.Batch) error {
		n, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEpisode, "ep-1")
		if err != nil {
			return err
		}
		if err := b.PutEpisode(&particle.Episode{ID: "ep-1", Namespace: particle.DefaultNamespace, NodeID: n.ID, Agent: "ur5-alpha"}); err != nil {
			return err
		}
		// The block was seen in ep-1 and in ep-2, which the store does
		// not hold (judged by the rules on episodes at large: visible).
		block, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "red block")
		if err != nil {
			return err
		}
		c := *block
		c.Attributes.RLDSEpisodeIDs = []string{"ep-1", "ep-2"}
		return b.PutNode(&c)
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := f.store.Episode(particle.DefaultNamespace, "ep-1")
	if err != nil || ep == nil {
		t.Fatalf("episode: %v %v", ep, err)
	}
	if _, err := f.store.EditPolicy(context.Background(), particle.Edit{Op: particle.OpCreate, Who: "test", Why: "test",
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"visitor"}, Target: particle.Target{Node: ep.NodeID}}}); err != nil {
		t.Fatal(err)
	}
	names := func(a *Answer) (prov, lists int) {
		for _, e := range a.Edges {
			for _, p := range e.Provenance {
				if p.EpisodeID == "ep-1" {
					prov++
				}
			}
		}
		for _, n := range a.Nodes {
			if slices.Contains(n.Episodes, "ep-1") {
				lists++
			}
		}
		return prov, lists
	}
	req := Request{Query: "where is the red block", Hops: 2}
	req.Roles = []string{"operator"}
	op := f.plan(req)
	if prov, lists := names(op); prov == 0 || lists == 0 {
		t.Fatalf("an operator's answer names ep-1 in %d provenance records and %d episode lists", prov, lists)
	}
	req.Roles = []string{"visitor"}
	vis := f.plan(req)
	if prov, lists := names(vis); prov != 0 || lists != 0 {
		t.Errorf("a visitor's answer names the hidden ep-1 in %d provenance records and %d episode lists", prov, lists)
	}
	for _, n := range vis.Nodes {
		if n.Name == "red block" && !slices.Equal(n.Episodes, []string{"ep-2"}) {
			t.Errorf("the visitor's red block lists episodes %v, want [ep-2]", n.Episodes)
		}
	}
	if len(vis.Edges) != len(op.Edges) {
		t.Errorf("the visitor sees %d edges, the operator %d: hiding an episode hid facts", len(vis.Edges), len(op.Edges))
	}
	for _, e := range vis.Edges {
		if e.Provenance == nil {
			t.Errorf("edge %s: provenance null, want a list", e.ID)
		}
	}
}
