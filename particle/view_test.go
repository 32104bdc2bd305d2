package particle

import (
	"context"
	"slices"
	"strings"
	"testing"
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
