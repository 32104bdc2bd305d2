package particle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// collidingNames returns two names of the form pattern (with %d) that
// key maps to the same value.
func collidingNames(key func(string) uint32, pattern string) (string, string) {
	seen := map[uint32]string{}
	for i := 0; ; i++ {
		name := fmt.Sprintf(pattern, i)
		if other, ok := seen[key(name)]; ok {
			return other, name
		}
		seen[key(name)] = name
	}
}

// TestKeyRecords stores edges of one agent, of several, and of two
// agents (and two places) whose keys collide, and checks what the key
// records say, in the live store and after a reopen: a key is exact for
// the one name behind it, never for a name it does not stand for, and
// never once two names share it.
func TestKeyRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	agentA, agentB := collidingNames(wave.AgentKey, "robot-%d")
	siteA, siteB := collidingNames(func(s string) uint32 { return wave.SiteKey(Canonical(s)) }, "site %d")
	at := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	edges := []struct {
		agents []string
		place  string
	}{
		{[]string{"ur5-alpha"}, "Kitchen  Lab"},
		{[]string{"ur5-alpha", "ur5-alpha"}, ""},
		{[]string{"spot-1", "ur5-beta"}, "warehouse"}, // a set: neither is recorded by it
		{[]string{agentA}, siteA},
		{[]string{agentB}, siteB},
		{nil, ""},
	}
	_, err = s.Update(context.Background(), func(b *Batch) error {
		for _, id := range []string{"a", "b"} {
			if err := b.PutNode(&Node{ID: id, Type: NodeEntity, Name: id}); err != nil {
				return err
			}
		}
		for i, c := range edges {
			e := &Edge{Source: "a", Target: "b", Type: EdgeAssertion, Assertion: &Assertion{Predicate: fmt.Sprintf("p%d", i)}, Confidence: 1}
			e.Scope.Location = c.place
			for _, a := range c.agents {
				e.Provenance = append(e.Provenance, Provenance{EpisodeID: "ep", Agent: a, ObservedAt: at})
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
	check := func(s *Store, when string) {
		s.Read(func(r Reader) {
			for _, c := range []struct {
				agent string
				want  bool
			}{{"ur5-alpha", true}, {"ur5-beta", false}, {"spot-1", false}, {agentA, false}, {agentB, false}, {"nobody", false}} {
				if got := r.AgentKeyIs(wave.AgentKey(c.agent), c.agent); got != c.want {
					t.Errorf("%s: AgentKeyIs(%q) = %v, want %v", when, c.agent, got, c.want)
				}
			}
			if r.AgentKeyIs(wave.AgentKey("ur5-alpha"), "ur5-beta") {
				t.Errorf("%s: a key is exact for a name it does not stand for", when)
			}
			// The edge of two agents: its set holds each, and no other.
			sets := 0
			r.Edges(func(e *Edge) bool {
				f := r.EdgeFactsBySeq(e.Seq)
				if !wave.IsAgentSet(f.Agent) {
					if _, known := r.EdgeHasAgent(e.Seq, 1); known {
						t.Errorf("%s: edge %s of one agent has an agent set", when, e.ID)
					}
					return true
				}
				sets++
				for _, c := range []struct {
					agent string
					want  bool
				}{{"spot-1", true}, {"ur5-beta", true}, {"ur5-alpha", false}, {"nobody", false}} {
					num, ok := r.AgentNumber(c.agent)
					has, known := r.EdgeHasAgent(e.Seq, num)
					if !ok || !known || has != c.want {
						t.Errorf("%s: edge %s: has %q = %v (number %d %v, known %v), want %v", when, e.ID, c.agent, has, num, ok, known, c.want)
					}
				}
				return true
			})
			if sets != 1 {
				t.Errorf("%s: %d edges of several agents, want 1", when, sets)
			}
			for _, c := range []struct {
				place string
				want  bool
			}{{"kitchen lab", true}, {"warehouse", true}, {Canonical(siteA), false}, {Canonical(siteB), false}, {"attic", false}} {
				if got := r.SiteKeyIs(wave.SiteKey(c.place), c.place); got != c.want {
					t.Errorf("%s: SiteKeyIs(%q) = %v, want %v", when, c.place, got, c.want)
				}
			}
		})
	}
	check(s, "live")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(DefaultOptions(dir)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, "reopened")
}
