package particle

import (
	"strings"
	"testing"
)

// edgesByID returns v's edges as the map by id to the edge that edgeIDs
// replaced, for tests to range over and index.
func edgesByID(v *view) map[string]*Edge {
	out := make(map[string]*Edge, v.edges.len())
	v.edges.each(v, func(id string, e *Edge) bool {
		out[id] = e
		return true
	})
	return out
}

// TestEdgeIDsFollowsTheEdges puts, replaces, renumbers and removes edges
// as the view does (the map first, then the slice by seq), with seqs and
// without: each is found by id as its latest version, a new version at
// the same seq leaves the map as it was, and checkEdgeSeqs finds the map
// and the slice consistent throughout.
func TestEdgeIDsFollowsTheEdges(t *testing.T) {
	v := newView()
	put := func(e *Edge) *Edge {
		t.Helper()
		old := v.edges.put(v, e)
		if old != nil && old.Seq != e.Seq {
			v.edgeSeq = unsetSeq(v.edgeSeq, old.Seq, old)
		}
		v.edgeSeq = setSeq(v.edgeSeq, e.Seq, e)
		return old
	}
	consistent := func(want int) {
		t.Helper()
		r := &CheckReport{}
		checkEdgeSeqs(r, v)
		if p := problemList(r); p != "" {
			t.Fatalf("check:\n%s", p)
		}
		if n := v.edges.len(); n != want {
			t.Fatalf("%d edges held, want %d", n, want)
		}
	}
	a1 := &Edge{ID: "a", Seq: 3}
	b1 := &Edge{ID: "b"} // no seq: an earlier format's
	if put(a1) != nil || put(b1) != nil {
		t.Fatal("new edges replaced something")
	}
	consistent(2)
	a2 := &Edge{ID: "a", Seq: 3}
	if old := put(a2); old != a1 {
		t.Fatalf("a's new version replaced %v, want the first", old)
	}
	if len(v.edges.bySeq) != 1 || v.edges.get(v, "a") != a2 || v.edges.get(v, "b") != b1 {
		t.Fatalf("after a new version: by seq %v, a %v, b %v", v.edges.bySeq, v.edges.get(v, "a"), v.edges.get(v, "b"))
	}
	// Renumbered, and given a seq.
	a3, b2 := &Edge{ID: "a", Seq: 9}, &Edge{ID: "b", Seq: 5}
	if put(a3) != a2 || put(b2) != b1 {
		t.Fatal("renumbered edges did not replace their versions")
	}
	consistent(2)
	if v.edges.get(v, "a") != a3 || v.edges.get(v, "b") != b2 || len(v.edges.unseq) != 0 {
		t.Fatalf("after renumbering: a %v, b %v, %d without a seq", v.edges.get(v, "a"), v.edges.get(v, "b"), len(v.edges.unseq))
	}
	seen := map[string]*Edge{}
	v.edges.each(v, func(id string, e *Edge) bool { seen[id] = e; return true })
	if len(seen) != 2 || seen["a"] != a3 || seen["b"] != b2 {
		t.Fatalf("each gave %v", seen)
	}
	v.edges.remove("a")
	v.edgeSeq = unsetSeq(v.edgeSeq, a3.Seq, a3)
	consistent(1)
	if v.edges.get(v, "a") != nil {
		t.Fatal("a removed, still found")
	}
	// A map that names a seq holding another edge is inconsistent.
	v.edges.bySeq["c"] = 5
	r := &CheckReport{}
	checkEdgeSeqs(r, v)
	if !strings.Contains(problemList(r), "view-seq") {
		t.Fatalf("an id at another edge's seq: no view-seq problem in %q", problemList(r))
	}
}
