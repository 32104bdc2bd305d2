package particle

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// identityEdge is an edge whose identity is (src, t, pred@location, dst)
// in the default namespace.
func identityEdge(src string, t EdgeType, pred, location, dst string) *Edge {
	e := &Edge{Namespace: DefaultNamespace, Source: src, Type: t, Target: dst, Scope: Scope{Location: location}}
	if t == EdgeAssertion {
		e.Assertion = &Assertion{Predicate: pred}
	}
	return e
}

// TestIdentityOfIsEdgeIdentity checks that identityOf, which writes the
// fact key in place, builds the key edgeIdentity builds of the fact key
// made first, on predicates and locations that need making canonical:
// upper case, runs of (Unicode) spaces, invalid UTF-8, a case change
// that lengthens them; and on random strings of such parts.
func TestIdentityOfIsEdgeIdentity(t *testing.T) {
	parts := []string{"", "a", "Next  To", " on ", "\u00a0x\u2003y ", "ȺȺȺ", "\xff", "İ", "ß", "@", "ǅ", "\t", "Ω", "z"}
	check := func(pred, location string, et EdgeType) {
		t.Helper()
		e := identityEdge("src-1", et, pred, location, "dst-2")
		want := edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)
		if got := identityOf(e); got != want {
			t.Fatalf("identityOf(%q @ %q, %s) = %q, want %q", pred, location, et, got, want)
		}
	}
	for _, p := range parts {
		for _, l := range parts {
			check(p, l, EdgeAssertion)
			check(p, l, EdgeMembership)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	random := func() string {
		var b strings.Builder
		for range r.IntN(5) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	}
	for range 5000 {
		check(random(), random(), EdgeAssertion)
	}
}

// TestKeySlabBuildsTheSameKeys builds identity keys in a slab: each is
// identityOf's, consecutive keys share one buffer, and a key whose
// canonical predicate outgrows the room left (a lower case longer in
// UTF-8, "Ⱥ" to "ⱥ") leaves the keys before it as they were.
func TestKeySlabBuildsTheSameKeys(t *testing.T) {
	edges := []*Edge{
		identityEdge("a", EdgeAssertion, "on", "", "b"),
		identityEdge("node-2", EdgeAssertion, "Next  To", "Lab 3", "node-3"),
		identityEdge("x", EdgeMembership, "", "", "y"),
	}
	var s keySlab
	var got []string
	for _, e := range edges {
		got = append(got, s.identityOf(e))
	}
	for i, e := range edges {
		if want := identityOf(e); got[i] != want {
			t.Fatalf("key %d: %q, want %q", i, got[i], want)
		}
	}
	for i := 1; i < len(got); i++ {
		if unsafe.StringData(got[i]) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(got[i-1])), len(got[i-1]))) {
			t.Fatalf("key %d does not follow key %d in one buffer", i, i-1)
		}
	}

	// Fill the buffer to the room the next key is sized for, then build
	// that key: its predicate grows when made canonical.
	const upper, lower = "ȺȺȺ", "ⱥⱥⱥ"
	if Canonical(upper) != lower {
		t.Fatalf("Canonical(%q) = %q, want %q", upper, Canonical(upper), lower)
	}
	grows := identityEdge("s", EdgeAssertion, upper, "", "d")
	room := identitySize(grows)
	if len(identityOf(grows)) <= room {
		t.Fatalf("%q is not longer than the %d bytes it is sized for", identityOf(grows), room)
	}
	before := strings.Clone(got[len(got)-1])
	pad := identityEdge("a", EdgeAssertion, "", "", "b")
	pad.Assertion.Predicate = strings.Repeat("p", cap(s.buf)-len(s.buf)-len(identityOf(pad))-room)
	filler := s.identityOf(pad)
	if cap(s.buf)-len(s.buf) != room {
		t.Fatalf("%d bytes left, want %d", cap(s.buf)-len(s.buf), room)
	}
	if grown := s.identityOf(grows); grown != identityOf(grows) {
		t.Fatalf("grown key %q, want %q", grown, identityOf(grows))
	}
	if got[len(got)-1] != before || filler != identityOf(pad) {
		t.Fatal("a key changed after a later one grew the buffer")
	}
}
