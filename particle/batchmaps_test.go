package particle

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
)

// TestBatchMapsKeptEmptyBetweenBatches: a batch's maps are kept for the
// next batch (the same tables), and emptied: a node put by a batch that
// failed is not found by the next, and one that committed is read from
// the view, not from the last batch's map.
func TestBatchMapsKeptEmptyBetweenBatches(t *testing.T) {
	s := openSnapshots(t, t.TempDir(), false)
	defer s.Close()
	ctx := context.Background()
	var first, second uintptr
	failed := errors.New("refused")
	if _, err := s.Update(ctx, func(b *Batch) error {
		first = reflect.ValueOf(b.nodes).Pointer()
		if err := b.PutNode(&Node{ID: "lost", Type: NodeEntity, Name: "lost"}); err != nil {
			t.Fatal(err)
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("the failing batch returned %v", err)
	}
	if _, err := s.Update(ctx, func(b *Batch) error {
		second = reflect.ValueOf(b.nodes).Pointer()
		if len(b.nodes) != 0 || len(b.newNodes) != 0 {
			t.Errorf("the next batch starts with %d nodes, %d new", len(b.nodes), len(b.newNodes))
		}
		if n := b.Node("lost"); n != nil {
			t.Errorf("the failed batch's node is found: %+v", n)
		}
		return b.PutNode(&Node{ID: "kept", Type: NodeEntity, Name: "first"})
	}); err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("the next batch made new maps instead of keeping the last one's")
	}
	// A write outside the batch maps (here, a later batch's) must be what
	// the batch after reads.
	if _, err := s.Update(ctx, func(b *Batch) error {
		n := b.Node("kept")
		if n == nil {
			t.Fatal("the committed node is not found")
		}
		n.Name = "second"
		return b.PutNode(n)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, func(b *Batch) error {
		if n := b.Node("kept"); n == nil || n.Name != "second" {
			t.Errorf("the node read back: %+v", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBatchMapsOutsizedLetGo: maps of more entries than keptMapEntries
// are not kept.
func TestBatchMapsOutsizedLetGo(t *testing.T) {
	m := newBatchMaps()
	for i := range keptMapEntries + 1 {
		m.applied[strconv.Itoa(i)] = true
	}
	if m.clear() {
		t.Error("maps of more than keptMapEntries entries were kept")
	}
	m = newBatchMaps()
	m.applied["a"], m.aliases["b"] = true, "c"
	if !m.clear() || len(m.applied) != 0 || len(m.aliases) != 0 {
		t.Errorf("small maps: kept and emptied? %d %d", len(m.applied), len(m.aliases))
	}
}
