package particle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// edgesOf lists the ids Out and In give for node id, and the edges
// EdgeBySeq finds for them.
func edgesOf(s *Store, id string) (out, in []string, bySeq bool) {
	bySeq = true
	s.Read(func(r Reader) {
		r.Out(id, func(e *Edge) bool { out = append(out, e.ID); bySeq = bySeq && r.EdgeBySeq(e.Seq) == e; return true })
		r.In(id, func(e *Edge) bool { in = append(in, e.ID); bySeq = bySeq && r.EdgeBySeq(e.Seq) == e; return true })
	})
	return out, in, bySeq
}

func TestViewSeqIndexFollowsDeletesMergesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	var block, gripper *Node
	s.Read(func(r Reader) {
		block, gripper = r.Lookup(DefaultNamespace, NodeEntity, "red block"), r.Lookup(DefaultNamespace, NodeEntity, "gripper")
	})
	out, in, ok := edgesOf(s, block.ID)
	if len(out) != 1 || len(in) != 2 || !ok {
		t.Fatalf("red block: out %v in %v (by seq %v), want 1 out and 2 in, each found by seq", out, in, ok)
	}
	var newest []string
	s.Read(func(r Reader) {
		r.InNewestFacts(block.ID, func(seq uint64, _ *EdgeFacts, _ uint64) bool {
			newest = append(newest, r.EdgeBySeq(seq).ID)
			return true
		})
		if r.NodeBySeq(block.Seq) != block || r.EdgeBySeq(block.Seq) != nil || r.NodeBySeq(1<<40) != nil {
			t.Errorf("NodeBySeq/EdgeBySeq disagree with the node's seq %d", block.Seq)
		}
	})
	if !slices.Equal(newest, []string{in[1], in[0]}) {
		t.Errorf("InNewestFacts %v, want In reversed %v", newest, in)
	}

	// Deleting an edge takes it out of the adjacency and the seq index.
	gone := in[0]
	var goneSeq uint64
	s.Read(func(r Reader) { goneSeq = r.Edge(gone).Seq })
	_, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteEdge(gone) })
	mustOK(t, err)
	out, in, ok = edgesOf(s, block.ID)
	if slices.Contains(in, gone) || len(in) != 1 || len(out) != 1 || !ok {
		t.Errorf("after deleting %s: out %v in %v (by seq %v)", gone, out, in, ok)
	}
	s.Read(func(r Reader) {
		if r.EdgeBySeq(goneSeq) != nil {
			t.Errorf("deleted edge still found by its seq %d", goneSeq)
		}
	})

	// Merging the gripper into the block moves or drops its edges; the
	// view stays consistent with Badger, and so does a reopened one.
	_, err = s.MergeNodes(context.Background(), block.ID, gripper.ID, "test", "same thing")
	mustOK(t, err)
	s.Read(func(r Reader) {
		if r.NodeBySeq(gripper.Seq) != nil {
			t.Errorf("merged node still found by its seq %d", gripper.Seq)
		}
	})
	checkOK(t, s)
	mustOK(t, s.Close())
	checkOK(t, openScratchStore(t, dir))
}

func checkOK(t *testing.T, s *Store) {
	t.Helper()
	r, err := s.Check(context.Background())
	mustOK(t, err)
	if !r.OK() {
		t.Fatalf("check after delete and merge:\n%s", problemList(r))
	}
}

func TestCheckFindsAViewSeqIndexOutOfStep(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	// A node left at a seq it no longer has (a bug in publishing).
	s.mu.Lock()
	for _, n := range s.v.nodes {
		s.v.nodeSeq = setSeq(s.v.nodeSeq, n.Seq+1<<20, n)
		break
	}
	s.mu.Unlock()
	r, err := s.Check(context.Background())
	mustOK(t, err)
	if !strings.Contains(problemList(r), "view-seq") {
		t.Errorf("want a view-seq problem, got:\n%s", problemList(r))
	}
}

// adjacencyKeyedByNodes reports the keys of the adjacency lists of a
// node that are not its own record's id string (the same bytes at
// another address).
func adjacencyKeyedByNodes(s *Store) (stale []string) {
	s.Read(func(r Reader) {
		r.v.awaitLinks()
		for _, lists := range []map[string][]adjEdge{r.v.out, r.v.in} {
			for k := range lists {
				if n := r.v.nodes[k]; n != nil && unsafe.StringData(k) != unsafe.StringData(n.ID) {
					stale = append(stale, k)
				}
			}
		}
	})
	return stale
}

// The expansion looks a node's adjacency lists up by the id of the node
// record it holds: the lists are keyed by that very string, after the
// edges are written, after the node's record is replaced, and after a
// reopen, so that the lookup compares pointers rather than bytes.
func TestAdjacencyIsKeyedByTheNodesOwnIDs(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	if stale := adjacencyKeyedByNodes(s); len(stale) > 0 {
		t.Fatalf("after the writes, lists keyed by copies of %v", stale)
	}
	var block *Node
	s.Read(func(r Reader) { block = r.Lookup(DefaultNamespace, NodeEntity, "red block") })
	// A new record of the node, its id in bytes of its own.
	_, err := s.Update(context.Background(), func(b *Batch) error {
		n := *b.Node(block.ID)
		n.ID = strings.Clone(n.ID)
		n.Aliases = append(slices.Clone(n.Aliases), "the red one")
		return b.PutNode(&n)
	})
	mustOK(t, err)
	var now *Node
	s.Read(func(r Reader) { now = r.Node(block.ID) })
	if unsafe.StringData(now.ID) == unsafe.StringData(block.ID) {
		t.Fatal("the node's new record shares its id's bytes with the old one: nothing to rekey")
	}
	if stale := adjacencyKeyedByNodes(s); len(stale) > 0 {
		t.Fatalf("after the node's record was replaced, lists keyed by copies of %v", stale)
	}
	out, in, ok := edgesOf(s, block.ID)
	if len(out) != 1 || len(in) != 2 || !ok {
		t.Fatalf("red block: out %v in %v (by seq %v)", out, in, ok)
	}
	mustOK(t, s.Close())
	s = openScratchStore(t, dir)
	if stale := adjacencyKeyedByNodes(s); len(stale) > 0 {
		t.Fatalf("after a reopen, lists keyed by copies of %v", stale)
	}
	checkOK(t, s)
}

// edgeEndsAgree reports the edges whose EdgeEnds differ from their ends
// looked up by id, and how many edges had both ends' seqs noted.
func edgeEndsAgree(s *Store) (wrong []string, bySeq int) {
	s.Read(func(r Reader) {
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			src, dst := r.EdgeEnds(e)
			if src != r.Node(e.Source) || dst != r.Node(e.Target) {
				wrong = append(wrong, e.ID)
			}
			if e.Seq < uint64(len(r.v.ends)) {
				if x := r.v.ends[e.Seq]; x.source != 0 && x.target != 0 {
					bySeq++
				}
			}
			return true
		})
	})
	return wrong, bySeq
}

// EdgeEnds finds an edge's end nodes by the seqs noted when it was
// linked, and agrees with the lookups by id after the edges are written,
// after a node's record is replaced, after a node is deleted, and after
// a reopen.
func TestEdgeEndsFollowTheNodes(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	check := func(when string, wantBySeq int) {
		t.Helper()
		wrong, bySeq := edgeEndsAgree(s)
		if len(wrong) > 0 || bySeq != wantBySeq {
			t.Fatalf("%s: edges %v found other ends than by id; %d edges with both ends' seqs, want %d", when, wrong, bySeq, wantBySeq)
		}
	}
	check("after the writes", 3)
	var block, gripper *Node
	s.Read(func(r Reader) {
		block, gripper = r.Lookup(DefaultNamespace, NodeEntity, "red block"), r.Lookup(DefaultNamespace, NodeEntity, "gripper")
	})
	_, err := s.Update(context.Background(), func(b *Batch) error {
		n := *b.Node(block.ID)
		n.Aliases = append(slices.Clone(n.Aliases), "the red one")
		return b.PutNode(&n)
	})
	mustOK(t, err)
	check("after a node's record was replaced", 3)
	var renamed *Node
	s.Read(func(r Reader) {
		renamed = r.Node(block.ID)
		if src, _ := r.EdgeEnds(r.Edge(firstOut(r, block.ID))); src != renamed {
			t.Errorf("an edge's source is %p, the node's new record %p", src, renamed)
		}
	})
	mustOK(t, s.Close())
	s = openScratchStore(t, dir)
	check("after a reopen", 3)
	// Merging the gripper away rewrites its edges; none is left pointing
	// at a node that is gone.
	_, err = s.MergeNodes(context.Background(), block.ID, gripper.ID, "test", "same thing")
	mustOK(t, err)
	wrong, _ := edgeEndsAgree(s)
	if len(wrong) > 0 {
		t.Fatalf("after a merge: edges %v found other ends than by id", wrong)
	}
	checkOK(t, s)
}

// firstOut is the id of the first edge leaving node id.
func firstOut(r Reader, id string) (first string) {
	r.Out(id, func(e *Edge) bool { first = e.ID; return false })
	return first
}
