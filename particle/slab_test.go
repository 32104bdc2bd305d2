package particle

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func TestValueSlabHandsOutDisjointBuffers(t *testing.T) {
	s := &valueSlab{}
	for round := range 3 {
		var bufs [][]byte
		for i := range 2000 {
			n := 1 + (i*7919)%(slabChunk/3) // some past a quarter chunk: their own
			b := s.alloc(n)
			if len(b) != 0 || cap(b) != n {
				t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
			}
			b = append(b, bytes.Repeat([]byte{byte(i)}, n)...)
			bufs = append(bufs, b)
		}
		// Appending past a buffer's room moves it, never into the next.
		grown := append(bufs[0], 0xee)
		grown[0] = 0xdd
		for i, b := range bufs {
			if i == 0 {
				if b[0] != 0 {
					t.Fatal("an append past the room wrote into the slab")
				}
			}
			for _, c := range b {
				if c != byte(i) {
					t.Fatalf("round %d: buffer %d was overwritten", round, i)
				}
			}
		}
		s.reset()
		if len(s.used) != 0 || len(s.free) > maxSlabChunks {
			t.Fatalf("after reset: %d used, %d free", len(s.used), len(s.free))
		}
	}
	var none *valueSlab
	if b := none.alloc(10); cap(b) != 10 {
		t.Fatal("a nil slab must allocate")
	}
	none.reset()
}

// TestSlabValuesSurviveLaterBatches writes nodes, edges and episodes in
// many batches (the slab's chunks reused by each) and reads every value
// back from Badger: it must be what the view holds.
func TestSlabValuesSurviveLaterBatches(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	emb := make([]float32, 384)
	for batch := range 12 {
		_, err := s.Update(context.Background(), func(b *Batch) error {
			for i := range 150 {
				for j := range emb {
					emb[j] = float32(batch*1000 + i + j)
				}
				a, _, err := b.Resolve(DefaultNamespace, NodeEntity, fmt.Sprintf("thing %d", i%40))
				if err != nil {
					return err
				}
				a.Embedding = append([]float32(nil), emb...)
				TouchNode(a, fmt.Sprintf("ep-%d", batch), "", 0, b.Now())
				if err := b.PutNode(a); err != nil {
					return err
				}
				c, _, err := b.Resolve(DefaultNamespace, NodeEntity, fmt.Sprintf("other %d", (i+batch)%50))
				if err != nil {
					return err
				}
				if _, _, err := b.Observe(Observation{Source: a.ID, Target: c.ID, Type: EdgeCausal,
					Embed: func() ([]float32, error) { return append([]float32(nil), emb...), nil }}); err != nil {
					return err
				}
			}
			ep := &Episode{ID: fmt.Sprintf("ep-%d", batch), Steps: batch, Metadata: map[string]any{"b": float64(batch)}}
			return b.PutEpisode(ep)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := s.db.View(func(txn *badger.Txn) error {
		get := func(k []byte) []byte {
			it, err := txn.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			v, err := it.ValueCopy(nil)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		vec := func(k []byte) []byte {
			v, err := getVector(txn, k)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		for _, n := range s.v.nodes {
			k := nodeKey(n.Namespace, n.ID)
			got, err := decodeNode(get(k), vec(k))
			if err != nil || !reflect.DeepEqual(got, n) {
				t.Fatalf("node %s reads back as %+v (%v), want %+v", n.ID, got, err, n)
			}
		}
		for _, e := range edgesByID(s.v) {
			k := edgeKey(e.Namespace, e.ID)
			got, err := decodeEdge(get(k), vec(k))
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Fatalf("edge %s reads back as %+v (%v), want %+v", e.ID, got, err, e)
			}
		}
		for _, e := range s.v.episodes {
			got, err := decodeEpisode(get(episodeKey(e.Namespace, e.ID)))
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Fatalf("episode %s reads back as %+v (%v), want %+v", e.ID, got, err, e)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
