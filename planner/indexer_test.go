package planner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// countingIndex counts the calls the Indexer makes to a Flat.
type countingIndex struct {
	*wave.Flat
	adds, sets int
}

func (c *countingIndex) Add(id uint64, v []float32, m wave.Meta) error {
	c.adds++
	return c.Flat.Add(id, v, m)
}

func (c *countingIndex) SetMeta(id uint64, m wave.Meta) bool {
	c.sets++
	return c.Flat.SetMeta(id, m)
}

// countingIndexer is an Indexer of f's store over a countingIndex,
// closed when the test ends.
func countingIndexer(t *testing.T, f *fixture) (*countingIndex, *Indexer) {
	t.Helper()
	idx := &countingIndex{Flat: wave.NewFlat(384)}
	ix, err := NewIndexer(f.store, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	return idx, ix
}

// TestIndexerRefreshesEdgeScope re-observes an edge two hours later: its
// vector is not re-added, but its indexed time scope grows, so a window
// after the first sighting finds it.
func TestIndexerRefreshesEdgeScope(t *testing.T) {
	f := newFixture(t, false)
	idx, ix := countingIndexer(t, f)
	e := f.fact(particle.EdgeCausal, "cup", "spills", "table", "", t0, 0.9)
	if err := ix.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	later := &wave.Filter{Kinds: []wave.Kind{wave.KindEdge}, From: t0.Add(time.Hour).UnixNano()}
	if hits := idx.Search(e.Embedding, 1, later); len(hits) != 0 {
		t.Fatalf("edge seen only at t0 matched a window from t0+1h: %v", hits)
	}
	addsBefore := idx.adds
	f.fact(particle.EdgeCausal, "cup", "spills", "table", "", t0.Add(2*time.Hour), 0.9)
	if err := ix.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	hits := idx.Search(e.Embedding, 1, later)
	if len(hits) != 1 || hits[0].ID != e.Seq {
		t.Fatalf("re-observed edge not in the window from t0+1h: %v", hits)
	}
	if idx.adds != addsBefore {
		t.Errorf("re-observation re-added %d vectors, want only a Meta refresh", idx.adds-addsBefore)
	}
	if idx.sets == 0 {
		t.Error("no SetMeta call for the re-observed edge")
	}
	inside := &wave.Filter{From: t0.Add(30 * time.Minute).UnixNano(), To: t0.Add(90 * time.Minute).UnixNano()}
	if hits := idx.Search(e.Embedding, 1, inside); len(hits) != 1 {
		t.Fatalf("a window inside the edge's scope [t0, t0+2h] missed it: %v", hits)
	}
}

// gatedIndex is a Flat whose Adds wait while its gate is held.
type gatedIndex struct {
	*wave.Flat
	gate sync.RWMutex
}

func (g *gatedIndex) Add(id uint64, v []float32, m wave.Meta) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.Flat.Add(id, v, m)
}

// TestIndexerSyncThroughABatch holds the indexer inside a second batch:
// the first batch's mark is reached while the indexer is still busy
// (Sync, which waits for it to be idle, is not done), the second's only
// once the gate opens, and then its edge is found.
func TestIndexerSyncThroughABatch(t *testing.T) {
	f := newFixture(t, false)
	idx := &gatedIndex{Flat: wave.NewFlat(384)}
	ix, err := NewIndexer(f.store, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	// A subscription after the indexer's reads the mark of the batch
	// being committed.
	var seen []uint64
	f.store.Subscribe(func(particle.Changes) { seen = append(seen, ix.Queued()) })
	ctx := context.Background()
	f.fact(particle.EdgeCausal, "cup", "spills", "table", "", t0, 0.9)
	first := ix.Queued()
	if err := ix.SyncThrough(ctx, first); err != nil {
		t.Fatal(err)
	}
	idx.gate.Lock()
	e := f.fact(particle.EdgeCausal, "mug", "tips", "shelf", "", t0, 0.8)
	second := ix.Queued()
	if second != first+1 || !slices.Equal(seen, []uint64{first, second}) {
		t.Fatalf("marks %d then %d, seen in a later subscription as %v: want consecutive, the same", first, second, seen)
	}
	if err := ix.SyncThrough(ctx, first); err != nil {
		t.Fatalf("through the first batch while the second is held: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := ix.Sync(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync with a batch held in the index: %v, want the deadline", err)
	}
	if err := ix.SyncThrough(short, second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SyncThrough the held batch: %v, want the deadline", err)
	}
	idx.gate.Unlock()
	if err := ix.SyncThrough(ctx, second); err != nil {
		t.Fatal(err)
	}
	if hits := idx.Search(e.Embedding, 1, nil); len(hits) != 1 || hits[0].ID != e.Seq {
		t.Fatalf("the second batch's edge after SyncThrough: %v", hits)
	}
}

// TestIndexerMetas checks the scopes given to nodes, edges and episodes.
func TestIndexerMetas(t *testing.T) {
	n := &particle.Node{Type: particle.NodeEntity, CreatedAt: t0}
	if m := NodeMeta(n); m.Time != 0 || m.End != 0 || m.Kind != wave.KindNode {
		t.Errorf("node meta %+v: want no time scope", m)
	}
	e := &particle.Edge{Type: particle.EdgeCausal, Scope: particle.Scope{TimeRange: particle.TimeRange{From: t0, To: t0.Add(time.Hour)}}}
	if m := EdgeMeta(e); m.Time != t0.UnixNano() || m.End != t0.Add(time.Hour).UnixNano() {
		t.Errorf("edge meta %+v: want its scope's range", m)
	}
	if m := EdgeMeta(&particle.Edge{Type: particle.EdgeCausal}); m.Time != 0 || m.End != 0 {
		t.Errorf("edge without a range: meta %+v, want open bounds", m)
	}
	ep := &particle.Episode{StartTime: t0}
	if m := EpisodeMeta(ep); m.Time != t0.UnixNano() || m.End != 0 {
		t.Errorf("running episode meta %+v: want [start, open]", m)
	}
}

// countingIVF counts the vectors an Indexer adds to an IVF.
type countingIVF struct {
	*wave.IVF
	adds int
}

func (c *countingIVF) Add(id uint64, v []float32, m wave.Meta) error {
	c.adds++
	return c.IVF.Add(id, v, m)
}

// TestIndexerFillsFromIVFSnapshot reopens an IVF from its snapshot (no
// float vectors): the fill pass re-attaches every vector and refreshes
// Meta without adding any, so searches score exactly again. It runs with
// the fill's batches as large as every vector, and as small as two or
// three (many batches through the fill's attacher, the last one short).
func TestIndexerFillsFromIVFSnapshot(t *testing.T) {
	defer func(b int) { fillBatch = b }(fillBatch)
	for _, batch := range []int{fillBatch, 2, 3} {
		fillBatch = batch
		t.Run(fmt.Sprint(batch), testIndexerFillsFromIVFSnapshot)
	}
}

func testIndexerFillsFromIVFSnapshot(t *testing.T) {
	f := newFixture(t, false)
	e := f.fact(particle.EdgeCausal, "cup", "spills", "table", "", t0, 0.9)
	f.fact(particle.EdgeCausal, "robot", "drops", "cup", "", t0.Add(time.Minute), 0.9)
	first := wave.NewIVF(384, wave.IVFOptions{})
	ix, err := NewIndexer(f.store, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	var b bytes.Buffer
	if _, err := first.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	snap := b.Bytes()
	loaded, err := wave.ReadIVF(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	idx := &countingIVF{IVF: loaded}
	ix2, err := NewIndexer(f.store, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ix2.Close()
	if idx.adds != 0 || idx.Len() != first.Len() || first.Len() == 0 {
		t.Fatalf("fill over a loaded IVF added %d vectors (Len %d, want %d)", idx.adds, idx.Len(), first.Len())
	}
	hits := idx.Search(e.Embedding, 1, &wave.Filter{Kinds: []wave.Kind{wave.KindEdge}, From: t0.UnixNano(), To: t0.UnixNano()})
	if len(hits) != 1 || hits[0].ID != e.Seq || hits[0].Score != wave.Dot(e.Embedding, e.Embedding) {
		t.Fatalf("edge after the fill: %v, want seq %d with its exact float score", hits, e.Seq)
	}

	// An edge the snapshot does not hold is added by the fill.
	later := f.fact(particle.EdgeCausal, "lamp", "lights", "table", "", t0.Add(2*time.Minute), 0.9)
	loaded, err = wave.ReadIVF(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	idx = &countingIVF{IVF: loaded}
	ix3, err := NewIndexer(f.store, idx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ix3.Close()
	if idx.adds == 0 || !idx.Has(later.Seq) {
		t.Fatalf("the fill added %d vectors; has the new edge: %v", idx.adds, idx.Has(later.Seq))
	}
	hits = idx.Search(later.Embedding, 1, &wave.Filter{Kinds: []wave.Kind{wave.KindEdge}})
	if len(hits) != 1 || hits[0].ID != later.Seq || hits[0].Score != wave.Dot(later.Embedding, later.Embedding) {
		t.Fatalf("new edge after the fill: %v, want seq %d with its exact float score", hits, later.Seq)
	}
}

// TestIndexerRemembersVectorsBySeq: the indexer adds a vector once per
// id, skips it while the id keeps the same vector, and adds it again
// after a removal, for ids below and far above those it has seen.
func TestIndexerRemembersVectorsBySeq(t *testing.T) {
	f := newFixture(t, false)
	idx, ix := countingIndexer(t, f)
	vec := f.embed("a cup")
	other := f.embed("a plate")
	for _, id := range []uint64{3, 1 << 20, 2} {
		adds := idx.adds
		for range 2 {
			if err := ix.add(id, vec, wave.Meta{Kind: wave.KindNode}); err != nil {
				t.Fatal(err)
			}
		}
		if idx.adds != adds+1 {
			t.Fatalf("id %d: %d adds for the same vector twice, want 1", id, idx.adds-adds)
		}
		ix.remove(id)
		if err := ix.add(id, vec, wave.Meta{Kind: wave.KindNode}); err != nil {
			t.Fatal(err)
		}
		if hits := idx.Search(vec, 1, nil); len(hits) != 1 || hits[0].ID != id {
			t.Fatalf("id %d added again after its removal: search gives %v", id, hits)
		}
		if err := ix.add(id, other, wave.Meta{Kind: wave.KindNode}); err != nil {
			t.Fatal(err)
		}
		if idx.adds != adds+3 {
			t.Fatalf("id %d: %d adds, want 3 (once, after the removal, for a new vector)", id, idx.adds-adds)
		}
		ix.remove(id)
	}
}
