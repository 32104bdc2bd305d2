package particle

import (
	"strings"
	"testing"
	"unsafe"
)

// TestKeySlabBuildsTheSameKeys builds identity keys in a slab: each is
// the key edgeIdentity builds, consecutive keys share one buffer, and a
// key whose canonical predicate outgrows the room left (a lower case
// longer in UTF-8, "Ⱥ" to "ⱥ") leaves the keys before it as they were.
func TestKeySlabBuildsTheSameKeys(t *testing.T) {
	type in struct {
		src, pred, dst string
		t              EdgeType
	}
	ins := []in{
		{"a", "on", "b", EdgeAssertion},
		{"node-2", "Next  To", "node-3", EdgeAssertion},
		{"x", "", "y", EdgeMembership},
	}
	var s keySlab
	var got []string
	for _, c := range ins {
		got = append(got, s.edgeIdentity(DefaultNamespace, c.src, c.t, c.pred, c.dst))
	}
	for i, c := range ins {
		if want := edgeIdentity(DefaultNamespace, c.src, c.t, c.pred, c.dst); got[i] != want {
			t.Fatalf("key %d: %q, want %q", i, got[i], want)
		}
	}
	for i := 1; i < len(got); i++ {
		if unsafe.StringData(got[i]) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(got[i-1])), len(got[i-1]))) {
			t.Fatalf("key %d does not follow key %d in one buffer", i, i-1)
		}
	}

	// Fill the buffer to a few bytes short of its end, then build a key
	// whose predicate grows when made canonical.
	before := strings.Clone(got[len(got)-1])
	left := cap(s.buf) - len(s.buf)
	const upper, lower = "ȺȺȺ", "ⱥⱥⱥ"
	if Canonical(upper) != lower {
		t.Fatalf("Canonical(%q) = %q, want %q", upper, Canonical(upper), lower)
	}
	room := len(DefaultNamespace) + len("s") + len(EdgeAssertion) + len(upper) + len("d") + 4 // what the slab sizes it by
	pad := strings.Repeat("p", left-len(DefaultNamespace)-len("a")-len("b")-len(EdgeAssertion)-4-room)
	filler := s.edgeIdentity(DefaultNamespace, "a", EdgeAssertion, pad, "b")
	if cap(s.buf)-len(s.buf) != room {
		t.Fatalf("%d bytes left, want %d", cap(s.buf)-len(s.buf), room)
	}
	grown := s.edgeIdentity(DefaultNamespace, "s", EdgeAssertion, upper, "d")
	if want := edgeIdentity(DefaultNamespace, "s", EdgeAssertion, upper, "d"); grown != want {
		t.Fatalf("grown key %q, want %q", grown, want)
	}
	if got[len(got)-1] != before || filler != edgeIdentity(DefaultNamespace, "a", EdgeAssertion, pad, "b") {
		t.Fatal("a key changed after a later one grew the buffer")
	}
}
