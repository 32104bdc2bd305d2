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

// TestKeySlabCopiesKeys copies keys into a slab: each reads as the
// bytes given, whatever is done to them after; consecutive keys share one
// buffer, and a key longer than the room left starts another, leaving the
// keys before it as they were.
func TestKeySlabCopiesKeys(t *testing.T) {
	var s keySlab
	scratch := []byte("first key")
	var got []string
	for _, k := range []string{"first key", "node-2\x00assertion\x00next to@lab 3\x00node-3", "x"} {
		scratch = append(scratch[:0], k...)
		got = append(got, s.add(scratch))
		scratch[0] = '!' // the caller's scratch written again
		if got[len(got)-1] != k {
			t.Fatalf("key %q read back as %q", k, got[len(got)-1])
		}
	}
	for i := 1; i < len(got); i++ {
		if unsafe.StringData(got[i]) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(got[i-1])), len(got[i-1]))) {
			t.Fatalf("key %d does not follow key %d in one buffer", i, i-1)
		}
	}
	before := strings.Clone(got[len(got)-1])
	big := []byte(strings.Repeat("k", cap(s.buf)-len(s.buf)+1))
	if k := s.add(big); k != string(big) {
		t.Fatal("a key longer than the room left was not copied whole")
	}
	if got[len(got)-1] != before {
		t.Fatal("a key changed after a later one took a buffer of its own")
	}
}
