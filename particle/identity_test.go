package particle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// identityNames are names and predicates of every shape the canonical
// form cares about.
var identityNames = []string{
	"", " ", "a", "red cup 3", "next_to", "lab 3", " a", "a ", "a  b", "A b", "a\tb", "a\nb", "\ta", "a\r",
	"a\vb", "a\fb", "x\x1fy", "x\x00y", "éclair", "ÉCLAIR", "a\u00a0b", "a\u0085b", "a\u2003b", "\xff", "a\xffb",
	"Next To", "  Located   In ", "@", "a@b",
}

// randomName draws a name from an alphabet of spaces, cases, ASCII
// controls, Latin-1 and invalid UTF-8.
func randomName(r *rand.Rand) string {
	const alphabet = "aZ 0_@\t\n\x1f\x00"
	extra := []string{"é", "É", "\u00a0", "\u0085", "\u2003", "\xff", "İ"}
	var b []byte
	for range r.IntN(8) {
		if r.IntN(4) == 0 {
			b = append(b, extra[r.IntN(len(extra))]...)
		} else {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
	}
	return string(b)
}

// testNames is identityNames and n random names.
func testNames(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 2))
	names := append([]string(nil), identityNames...)
	for range n {
		names = append(names, randomName(r))
	}
	return names
}

func TestAppendCanonicalIsCanonical(t *testing.T) {
	for _, s := range testNames(1, 20000) {
		want := Canonical(s)
		if got := string(appendCanonical([]byte("x"), s)); got != "x"+want {
			t.Fatalf("appendCanonical(%q) = %q, want %q", s, got[1:], want)
		}
		if isCanonical(s) && want != s {
			t.Fatalf("isCanonical(%q), but Canonical gives %q", s, want)
		}
	}
}

// TestAppendKeysMatch pins the key layouts (alias keys are stored) and
// checks that an observed edge's identity, built in place, is the one
// edgeIdentity makes of the edge.
func TestAppendKeysMatch(t *testing.T) {
	names := testNames(3, 2000)
	for i, name := range names {
		loc := names[(i*7+3)%len(names)]
		if got, want := string(appendAliasKey(nil, "t/p", NodeEntity, name)), "t/p\x00entity\x00"+Canonical(name); got != want || aliasKey("t/p", NodeEntity, name) != want {
			t.Fatalf("appendAliasKey(%q) = %q, want %q", name, got, want)
		}
		if got, want := string(appendEdgeIdentity(nil, "t/p", "s", EdgeCausal, name, "d")), "t/p\x00s\x00causal\x00"+Canonical(name)+"\x00d"; got != want || edgeIdentity("t/p", "s", EdgeCausal, name, "d") != want {
			t.Fatalf("appendEdgeIdentity(%q) = %q, want %q", name, got, want)
		}
		reg := &Predicate{Name: Canonical(name)}
		got := string(appendObservedIdentity(nil, "t/p", "s", EdgeAssertion, reg, loc, "d"))
		if want := edgeIdentity("t/p", "s", EdgeAssertion, factKey(reg.Name, loc), "d"); got != want {
			t.Fatalf("appendObservedIdentity(%q, %q) = %q, want %q", name, loc, got, want)
		}
		e := &Edge{Type: EdgeAssertion, Assertion: &Assertion{Predicate: Canonical(reg.Name)}, Scope: Scope{Location: loc}}
		if want := edgeIdentity("t/p", "s", EdgeAssertion, identityPredicate(e), "d"); got != want {
			t.Fatalf("appendObservedIdentity(%q, %q) = %q, but the edge's identity is %q", name, loc, got, want)
		}
	}
}

// TestObserveKeysItsEdgesAsTheViewDoes checks that the identity a batch
// files a new edge under is the one edgeIdentity makes of the edge, for
// facts whose predicate and location are not in canonical form.
func TestObserveKeysItsEdgesAsTheViewDoes(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	for round := range 2 {
		_, err := s.Update(context.Background(), func(b *Batch) error {
			a, _, err := b.Resolve(DefaultNamespace, NodeEntity, "Red  Cup")
			if err != nil {
				return err
			}
			c, _, err := b.Resolve(DefaultNamespace, NodeEntity, "blue bowl")
			if err != nil {
				return err
			}
			for _, ob := range []Observation{
				{Source: a.ID, Target: c.ID, Type: EdgeAssertion, Predicate: "  Next   To ", Location: " Lab\t3 "},
				{Source: a.ID, Target: c.ID, Type: EdgeAssertion, Predicate: "ON_TOP_OF"},
				{Source: a.ID, Target: c.ID, Type: EdgeAssertion, Predicate: "éTAGÈRE", Location: "Küche"},
				{Source: a.ID, Target: c.ID, Type: EdgeCausal, Predicate: "Pushes", Location: "lab 3"},
			} {
				e, created, err := b.Observe(ob)
				if err != nil {
					return err
				}
				if created != (round == 0) {
					t.Errorf("round %d: %s %q: created %v", round, ob.Type, ob.Predicate, created)
				}
				ik := edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)
				if round == 0 && b.identity[ik] != e.ID {
					t.Errorf("%s %q: the batch files the edge under another identity than %q", ob.Type, ob.Predicate, ik)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.v.edges.len(); n != 4 {
		t.Errorf("%d edges, want 4", n)
	}
}

func TestIndexOfIsSlicesIndex(t *testing.T) {
	ids := []string{"ep-000001", "ep-000002", "", "ep-000003", "ep-000002", "ep-01", "x", "ep-000013"}
	for _, id := range append(slices.Clone(ids), "ep-000004", "ep-000012", "ep-0000013", "y", "1") {
		if got, want := indexOf(ids, id), slices.Index(ids, id); got != want {
			t.Errorf("indexOf(%q) = %d, want %d", id, got, want)
		}
	}
	if indexOf(nil, "a") != -1 || indexOf(nil, "") != -1 {
		t.Error("indexOf of an empty list")
	}
}

func TestHasIDIsContains(t *testing.T) {
	ids := []string{"0199a3b2-0001", "0199a3b2-0002", "", "0199a3b2-0012", "x"}
	for _, id := range append(slices.Clone(ids), "0199a3b2-0003", "0199a3b2-00012", "y", "2") {
		if got, want := HasID(ids, id), slices.Contains(ids, id); got != want {
			t.Errorf("HasID(%q) = %v, want %v", id, got, want)
		}
	}
	if HasID(nil, "a") || HasID(nil, "") {
		t.Error("HasID of an empty list")
	}
}

// BenchmarkIndexOf looks up an episode id in a node's full list of 64
// (found last, found midway, absent), against slices.Index.
func BenchmarkIndexOf(b *testing.B) {
	var ids []string
	for i := range MaxAttributeIDs {
		ids = append(ids, fmt.Sprintf("ep-%06d", 1000+i))
	}
	wanted := []string{ids[len(ids)-1], ids[len(ids)/2], "ep-999999"}
	for _, c := range []struct {
		name string
		f    func([]string, string) int
	}{{"indexOf", indexOf}, {"slices.Index", slices.Index[[]string]}} {
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				for _, id := range wanted {
					n += c.f(ids, id)
				}
			}
			_ = n
		})
	}
}
