package particle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// codeState is the state word of the code at seq (codeStale where its
// chunk is not made).
func codeState(r Reader, seq uint64) uint32 {
	if st := r.v.codes.stateAt(seq); st != nil {
		return st.Load()
	}
	return codeStale
}

// checkCodesMade checks that every edge with an embedding has its code
// made, without making any (EmbeddingCode would), and that it is the code of
// its embedding.
func checkCodesMade(t *testing.T, s *Store, when string) {
	t.Helper()
	s.Read(func(r Reader) {
		n := 0
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			if len(e.Embedding) == 0 {
				return true
			}
			n++
			switch st := codeState(r, e.Seq); st {
			case codeStale, codeBusy, codeNone:
				t.Fatalf("%s: edge %s (seq %d): code state %#x, not made", when, e.ID, e.Seq, st)
			}
			code, scale, ok := r.EmbeddingCode(e.Seq)
			want := make([]int8, len(e.Embedding))
			if ws := wave.Quantize(e.Embedding, want); !ok || ws != scale || !slices.Equal(code, want) {
				t.Fatalf("%s: edge %s: code is not its embedding's", when, e.ID)
			}
			return true
		})
		if n == 0 {
			t.Fatalf("%s: no edge with an embedding", when)
		}
	})
}

// observeEdges observes n edges between things of ns, the i-th with
// embedding emb(i).
func observeEdges(t *testing.T, s *Store, n int, emb func(i int) []float32) {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		ids, err := putThings(b, DefaultNamespace, n+1)
		if err != nil {
			return err
		}
		for i := range n {
			_, _, err := b.Observe(Observation{Namespace: DefaultNamespace, Source: ids[i], Target: ids[i+1], Type: EdgeAssertion,
				Predicate: "near", Confidence: 0.5, At: t0.Add(time.Duration(i) * time.Minute),
				Provenance: Provenance{EpisodeID: "ep-1", Agent: "ur5-alpha", ObservedAt: t0},
				Embed:      func() ([]float32, error) { return emb(i), nil }})
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testEmbedding(i int) []float32 { return []float32{1, float32(i), -0.5, float32(i % 3)} }

// TestCoderMakesCommittedCodes: the codes of a commit's edges are made by
// the coder, not left for the first reader, more than a chunk of them.
func TestCoderMakesCommittedCodes(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 3*coderChunk/2, testEmbedding)
	s.syncCoder()
	checkCodesMade(t, s.Store, "committed")
}

// TestCodeAllAfterReopen: a reopened store's codes are all stale until
// CodeAll, which makes every one.
func TestCodeAllAfterReopen(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 3*coderChunk/2, testEmbedding)
	s.reload(t)
	s.syncCoder()
	s.Read(func(r Reader) {
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			if st := codeState(r, e.Seq); st != codeStale {
				t.Fatalf("reopened: edge %s has code state %#x before CodeAll", e.ID, st)
			}
			return true
		})
		// The load made every chunk of codes: no reader allocates one.
		for k := range r.v.codes.chunks {
			if r.v.codes.chunks[k].Load() == nil {
				t.Fatalf("reopened: chunk %d of %d of codes not made by the load", k, len(r.v.codes.chunks))
			}
		}
	})
	s.CodeAll()
	s.syncCoder()
	checkCodesMade(t, s.Store, "after CodeAll")
}

// TestReobservedEdgeKeepsCode: a commit that changes an edge but not its
// embedding keeps its code and gives the coder nothing; one that changes
// the embedding makes the code stale and gives the coder its seq.
func TestReobservedEdgeKeepsCode(t *testing.T) {
	s := openFactsStore(t)
	observeEdges(t, s.Store, 4, testEmbedding)
	s.syncCoder()
	// Stop the coder: what the commits below hand it stays in its queue.
	s.stopCoder()
	s.coder = &coder{queue: make(chan coderJob, coderQueue), stop: make(chan struct{}), done: make(chan struct{})}
	close(s.coder.done)

	var ids []string
	s.Read(func(r Reader) {
		r.EdgesBySeq(func(e *Edge, _ *EdgeFacts) bool {
			ids = append(ids, e.ID)
			return true
		})
	})
	change := func(fn func(e *Edge)) (queued []uint64) {
		t.Helper()
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			for _, id := range ids {
				e := b.Edge(id)
				fn(e)
				if err := b.PutEdge(e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case job := <-s.coder.queue:
			return job.seqs
		default:
			return nil
		}
	}
	if q := change(func(e *Edge) { e.Confidence = 0.9 }); len(q) != 0 {
		t.Fatalf("re-observed with the same embeddings: coder given %v", q)
	}
	checkCodesMade(t, s.Store, "re-observed")

	q := change(func(e *Edge) { e.Embedding = []float32{0, 1, 2, 3} })
	var want []uint64
	s.Read(func(r Reader) {
		for _, id := range ids {
			e := r.Edge(id)
			want = append(want, e.Seq)
			if st := codeState(r, e.Seq); st != codeStale {
				t.Fatalf("embedding changed: edge %s has code state %#x, want stale", id, st)
			}
		}
	})
	slices.Sort(q)
	slices.Sort(want)
	if !slices.Equal(q, want) {
		t.Fatalf("embeddings changed: coder given %v, want %v", q, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(fmt.Errorf("close with the coder stopped: %w", err))
	}
}

// TestNodeCodesFollowTheirEmbeddings: a node's embedding has its int8
// code at the node's seq, as an edge's has (nodes and edges are numbered
// from one sequence). The coder makes it after the commit that puts the
// node; a node put again (a new seq, a new embedding) has its code made
// at its new seq and none left at its old one; a removal drops it; after
// a reopen CodeAll makes every node's code. A node with no embedding has
// none.
func TestNodeCodesFollowTheirEmbeddings(t *testing.T) {
	fs := openFactsStore(t)
	ctx := context.Background()
	emb := func(i, v int) []float32 { return []float32{float32(i), 1, -0.25 * float32(v), float32(i % 3)} }
	put := func(v int, ids ...int) {
		t.Helper()
		if _, err := fs.Update(ctx, func(b *Batch) error {
			for _, i := range ids {
				n := &Node{ID: fmt.Sprintf("node-%d", i), Namespace: DefaultNamespace, Type: NodeEntity, Name: fmt.Sprintf("node %d", i)}
				if i%4 != 3 {
					n.Embedding = emb(i, v)
				}
				if err := b.PutNode(n); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// check finds every node's code made (by the coder, not by this
	// read) and the quantisation of the embedding the node has; want
	// maps a node to the version of its embedding, -1 once removed.
	// gone lists seqs that must hold no code now.
	seqs := map[int]uint64{}
	var gone []uint64
	check := func(when string, want map[int]int) {
		t.Helper()
		fs.syncCoder()
		fs.Read(func(r Reader) {
			for _, seq := range gone {
				if _, _, ok := r.EmbeddingCode(seq); ok {
					t.Fatalf("%s: a code at seq %d, whose node is gone from it", when, seq)
				}
			}
			for i, v := range want {
				n := r.Node(fmt.Sprintf("node-%d", i))
				if v < 0 {
					if n != nil {
						t.Fatalf("%s: node %d removed, still there", when, i)
					}
					continue
				}
				if n == nil || r.NodeBySeq(n.Seq) != n {
					t.Fatalf("%s: node %d not at its seq", when, i)
				}
				if old, ok := seqs[i]; ok && old != n.Seq {
					gone = append(gone, old)
				}
				seqs[i] = n.Seq
				if i%4 == 3 {
					if _, _, ok := r.EmbeddingCode(n.Seq); ok {
						t.Fatalf("%s: node %d has no embedding, yet a code", when, i)
					}
					continue
				}
				switch st := codeState(r, n.Seq); st {
				case codeStale, codeBusy, codeNone:
					t.Fatalf("%s: node %d (seq %d): code state %#x, not made", when, i, n.Seq, st)
				}
				code, scale, ok := r.EmbeddingCode(n.Seq)
				wantCode := make([]int8, 4)
				if ws := wave.Quantize(emb(i, v), wantCode); !ok || ws != scale || !slices.Equal(code, wantCode) {
					t.Fatalf("%s: node %d: code %v × %v, want %v × %v (embedding version %d)", when, i, code, scale, wantCode, ws, v)
				}
			}
		})
	}
	put(0, 0, 1, 2, 3, 4, 5, 6, 7)
	want := map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0}
	check("put", want)
	put(1, 1, 2) // new embeddings
	want[1], want[2] = 1, 1
	check("put again", want)
	if len(gone) == 0 {
		t.Fatal("no node put again moved to a new seq: the old seqs' codes are not checked")
	}
	check("put again, the old seqs", want)
	removed := seqs[5]
	if _, err := fs.Update(ctx, func(b *Batch) error { return b.DeleteNode("node-5") }); err != nil {
		t.Fatal(err)
	}
	want[5] = -1
	gone = append(gone, removed)
	check("removed", want)
	fs.reload(t)
	fs.CodeAll()
	check("reopened", want)
}
