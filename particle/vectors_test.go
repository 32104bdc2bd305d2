package particle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// putEmbedded stores entity name with embedding emb (nil: keeps its own)
// and tag, and returns its id.
func putEmbedded(t *testing.T, s *Store, name string, emb []float32, tag string) string {
	t.Helper()
	var id string
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		n, _, err := b.Resolve(DefaultNamespace, NodeEntity, name)
		if err != nil {
			return err
		}
		if emb != nil {
			n.Embedding = emb
		}
		if tag != "" {
			AddTag(n, tag)
		}
		id = n.ID
		return b.PutNode(n)
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func nodeEmbedding(s *Store, id string) (emb []float32) {
	s.Read(func(r Reader) {
		if n := r.Node(id); n != nil {
			emb = n.Embedding
		}
	})
	return emb
}

func mustCheck(t *testing.T, s *Store) *CheckReport {
	t.Helper()
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("check:\n%s", problemList(r))
	}
	return r
}

// TestEmbeddingStoredOnceApart: a node's embedding is written under its
// own key when it is new or changes, not with each rewrite of the node;
// it reads back after a reopen from Badger and from the view snapshot,
// and through a Snapshot; a node that loses its embedding, or is
// deleted, loses its key.
func TestEmbeddingStoredOnceApart(t *testing.T) {
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprintf("view-snapshot=%v", snapshots), func(t *testing.T) {
			dir := t.TempDir()
			s := openSnapshots(t, dir, snapshots)
			first := []float32{1, 2, 3, 4}
			id := putEmbedded(t, s, "cup", first, "")
			k := nodeKey(DefaultNamespace, id)
			vectorBytes := int64(len(vectorKey(k)) + 4*len(first))
			nodeBytes := func() int64 {
				var n *Node
				s.Read(func(r Reader) { n = r.Node(id) })
				v, err := encodeNodeV2(n, nil, true)
				if err != nil {
					t.Fatal(err)
				}
				return int64(len(k) + len(v))
			}
			if w := s.Written(); w.Nodes != nodeBytes()+vectorBytes {
				t.Fatalf("a new node wrote %d bytes, want %d and its embedding's %d", w.Nodes, nodeBytes(), vectorBytes)
			}
			for i := range 3 { // rewrites that leave the embedding alone
				w0 := s.Written()
				putEmbedded(t, s, "cup", nil, fmt.Sprint("seen-", i))
				if w := s.Written().Sub(w0); w.Nodes != nodeBytes() {
					t.Fatalf("rewrite %d wrote %d node bytes, want %d (the record alone)", i, w.Nodes, nodeBytes())
				}
			}
			if r := mustCheck(t, s); r.Vectors != 1 {
				t.Fatalf("%d embeddings stored apart, want 1", r.Vectors)
			}
			s.Close()

			s = openSnapshots(t, dir, snapshots)
			if s.fromSnapshot != snapshots {
				t.Fatalf("loaded from the view snapshot: %v, want %v", s.fromSnapshot, snapshots)
			}
			if got := nodeEmbedding(s, id); !slices.Equal(got, first) {
				t.Fatalf("after a reopen the embedding is %v, want %v", got, first)
			}
			w0 := s.Written()
			putEmbedded(t, s, "cup", nil, "after-reopen") // loaded as stored apart: not written again
			rewrite := s.Written().Sub(w0)
			if rewrite.Nodes != nodeBytes() {
				t.Fatalf("a rewrite after the reopen wrote %d node bytes, want %d", rewrite.Nodes, nodeBytes())
			}
			second := []float32{5, 6, 7, 8}
			w0 = s.Written()
			putEmbedded(t, s, "cup", second, "")
			w := s.Written().Sub(w0)
			if w.Nodes != nodeBytes()+vectorBytes {
				t.Fatalf("a new embedding wrote %d node bytes, want %d", w.Nodes, nodeBytes()+vectorBytes)
			}
			if rewrite.Keys == 0 || w.Keys != rewrite.Keys+1 {
				t.Fatalf("a new embedding set %d keys, a rewrite without one %d: want the embedding's key more", w.Keys, rewrite.Keys)
			}
			mustCheck(t, s)
			s.Close()

			s = openSnapshots(t, dir, snapshots)
			if got := nodeEmbedding(s, id); !slices.Equal(got, second) {
				t.Fatalf("after a second reopen the embedding is %v, want %v", got, second)
			}
			if err := s.Snapshot(context.Background(), func(sn *Snapshot) error {
				n, err := sn.Node(DefaultNamespace, id)
				if err != nil {
					return err
				}
				if !slices.Equal(n.Embedding, second) {
					return fmt.Errorf("Snapshot.Node: embedding %v, want %v", n.Embedding, second)
				}
				return sn.Nodes("", func(n *Node) error {
					if n.ID == id && !slices.Equal(n.Embedding, second) {
						return fmt.Errorf("Snapshot.Nodes: embedding %v, want %v", n.Embedding, second)
					}
					return nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			// Losing the embedding deletes its key.
			if _, err := s.Update(context.Background(), func(b *Batch) error {
				n := b.Node(id)
				n.Embedding = nil
				return b.PutNode(n)
			}); err != nil {
				t.Fatal(err)
			}
			if r := mustCheck(t, s); r.Vectors != 0 {
				t.Fatalf("%d embeddings stored apart after the node lost its own", r.Vectors)
			}
			putEmbedded(t, s, "cup", first, "")
			if _, err := s.Update(context.Background(), func(b *Batch) error { return b.DeleteNode(id) }); err != nil {
				t.Fatal(err)
			}
			if r := mustCheck(t, s); r.Vectors != 0 || r.Nodes != 0 {
				t.Fatalf("after the delete: %d nodes, %d embeddings", r.Nodes, r.Vectors)
			}
			s.Close()
		})
	}
}

// rewriteInline rewrites every edge (and with nodes every node) of s in
// format 2, its embedding inline, and drops the keys that held the
// embeddings apart: a store of an earlier format, made behind s's back.
func rewriteInline(t *testing.T, s *Store, nodes bool) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	mustOK(t, s.db.Update(func(txn *badger.Txn) error {
		inline := func(k, v []byte, err error) {
			mustOK(t, err)
			mustOK(t, txn.Set(k, v))
			mustOK(t, txn.Delete(vectorKey(k)))
		}
		if nodes {
			for _, n := range s.v.nodes {
				v, err := encodeNodeV2(n, nil, false)
				inline(nodeKey(n.Namespace, n.ID), v, err)
			}
		}
		for _, e := range edgesByID(s.v) {
			v, err := encodeEdgeV2(e, nil, false)
			inline(edgeKey(e.Namespace, e.ID), v, err)
		}
		return nil
	}))
}

// TestInlineEmbeddingsOfAnEarlierFormat: a store whose nodes and edges
// hold their embeddings inline (format 2, as earlier versions wrote them)
// opens with them; the first rewrite of each stores its unchanged
// embedding apart, so that it survives the next reopen.
func TestInlineEmbeddingsOfAnEarlierFormat(t *testing.T) {
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprintf("view-snapshot=%v", snapshots), func(t *testing.T) {
			dir := t.TempDir()
			s := openSnapshots(t, dir, snapshots)
			emb := []float32{0.5, 0.25}
			id := putEmbedded(t, s, "cup", emb, "")
			observeOn(t, s, "cup", "table")
			before, _, _ := snapshotView(s)
			rewriteInline(t, s, true)
			s.Close()

			s = openSnapshots(t, dir, snapshots)
			if r := mustCheck(t, s); r.Vectors != 0 {
				t.Fatalf("the earlier format's store holds %d embeddings apart", r.Vectors)
			}
			putEmbedded(t, s, "cup", nil, "rewritten")
			observeOn(t, s, "cup", "table")
			if r := mustCheck(t, s); r.Vectors != 2 {
				t.Fatalf("after one rewrite each: %d embeddings apart, want 2 (the cup and the edge)", r.Vectors)
			}
			s.Close()

			s = openSnapshots(t, dir, snapshots)
			defer s.Close()
			if s.fromSnapshot != snapshots {
				t.Fatalf("loaded from the view snapshot: %v, want %v", s.fromSnapshot, snapshots)
			}
			mustCheck(t, s)
			if got := nodeEmbedding(s, id); !slices.Equal(got, emb) {
				t.Fatalf("the rewritten node's embedding is %v, want %v", got, emb)
			}
			after, _, _ := snapshotView(s)
			for eid, e := range before {
				if got := after[eid]; got == nil || !slices.Equal(got.Embedding, e.Embedding) || len(e.Embedding) == 0 {
					t.Fatalf("edge %s: embedding %v after the rewrite, want %v", eid, got, e.Embedding)
				}
			}
		})
	}
}

// TestOpenRefusesLostEmbedding: a node whose embedding, stored apart, is
// gone does not load as a node without one: Open fails with ErrCorrupt
// and names it.
func TestOpenRefusesLostEmbedding(t *testing.T) {
	dir := t.TempDir()
	s := openSnapshots(t, dir, false)
	id := putEmbedded(t, s, "cup", []float32{1, 2}, "")
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Delete(vectorKey(nodeKey(DefaultNamespace, id)))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(DefaultOptions(dir))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	if want := "node " + id; !strings.Contains(err.Error(), want) {
		t.Fatalf("Open: %v, want it to name %q", err, want)
	}
}

// TestVectorJoinStepsOverOrphans: the join finds each record's vector
// when vectors without records lie between them, more than it steps over
// before it seeks, and reports none for records without one.
func TestVectorJoinStepsOverOrphans(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := func(i int) []byte { return nodeKey("ns", fmt.Sprintf("n%04d", i)) }
	want := map[int][]byte{}
	if err := db.Update(func(txn *badger.Txn) error {
		for i := range 200 {
			switch {
			case i%50 < 2*vectorSeekAfter: // orphans: no record is read for them
				mustOK(t, txn.Set(vectorKey(rec(i)), []byte{byte(i), 0, 0, 0}))
			case i%3 == 0: // a record without a vector
			default:
				want[i] = []byte{byte(i), 1, 2, 3}
				mustOK(t, txn.Set(vectorKey(rec(i)), want[i]))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(txn *badger.Txn) error {
		j := newVectorJoin(txn, prefixNode)
		defer j.close()
		for i := range 200 {
			if i%50 < 2*vectorSeekAfter {
				continue
			}
			got, err := j.of(rec(i))
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want[i]) {
				return fmt.Errorf("record %d: vector %v, want %v", i, got, want[i])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestSeqBits(t *testing.T) {
	var s seqBits
	s.set(0, true)
	s.set(3, true)
	s.set(700, true)
	s.set(900, false) // beyond the set: nothing to take out
	for _, c := range []struct {
		seq  uint64
		want bool
	}{{0, false}, {3, true}, {4, false}, {700, true}, {701, false}, {900, false}, {1 << 40, false}} {
		if got := s.has(c.seq); got != c.want {
			t.Errorf("has(%d) = %v, want %v", c.seq, got, c.want)
		}
	}
	s.set(3, false)
	if s.has(3) || !s.has(700) {
		t.Errorf("after taking 3 out: has(3) %v, has(700) %v", s.has(3), s.has(700))
	}
}

// TestFormat3RoundTrip: a node or edge encoded with its embedding apart
// decodes with the vector to what was encoded, keeps nil and empty
// embeddings apart, and without its vector, or with one of another
// length, is refused as corrupt.
func TestFormat3RoundTrip(t *testing.T) {
	for _, emb := range [][]float32{nil, {}, {1.5, -2, 3e-9}} {
		n := &Node{ID: "n1", Namespace: "ns", Type: NodeEntity, Name: "cup", Embedding: emb, Seq: 7}
		b, err := encodeNodeV2(n, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		var vec []byte
		if len(emb) > 0 {
			vec = vectorValue(emb, nil)
		}
		got, err := decodeNode(b, vec)
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("embedding %#v: decoded %+v (%v)", emb, got, err)
		}
		if dims, err := embeddingLen(b); err != nil || dims != len(emb) {
			t.Fatalf("embedding %#v: embeddingLen %d (%v)", emb, dims, err)
		}
		e := &Edge{ID: "e1", Namespace: "ns", Type: EdgeCausal, Source: "a", Target: "b", Embedding: emb, Seq: 8}
		if b, err = encodeEdgeV2(e, nil, true); err != nil {
			t.Fatal(err)
		}
		if got, err := decodeEdge(b, vec); err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("embedding %#v: decoded %+v (%v)", emb, got, err)
		}
		if len(emb) == 0 {
			continue
		}
		for _, bad := range [][]byte{nil, vec[:len(vec)-4], append(slices.Clone(vec), 0, 0, 0, 0)} {
			if _, err := decodeEdge(b, bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a vector of %d bytes for %d floats: %v, want ErrCorrupt", len(bad), len(emb), err)
			}
		}
	}
}
