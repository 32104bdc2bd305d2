package particle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
)

// growEpisode appends n edge ids to episode ep of s, per ids at a time,
// one batch each, and returns the episode bytes each batch wrote.
func growEpisode(t *testing.T, s *Store, ep string, from, n, per int) []int64 {
	t.Helper()
	var out []int64
	for i := from; i < from+n; i += per {
		before := s.Written()
		_, err := s.Update(context.Background(), func(b *Batch) error {
			e := b.Episode(DefaultNamespace, ep)
			if e == nil {
				e = &Episode{ID: ep, Agent: "robot-1"}
			}
			for j := i; j < min(from+n, i+per); j++ {
				e.Edges = append(e.Edges, fmt.Sprintf("edge-%06d", j))
			}
			e.Steps = len(e.Edges)
			return b.PutEpisode(e)
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Written().Sub(before).Episodes)
	}
	return out
}

func wantEdges(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("edge-%06d", i)
	}
	return out
}

// episodeEverywhere returns episode ep as the view, a Snapshot's point
// read and a Snapshot's scan hold it.
func episodeEverywhere(t *testing.T, s *Store, ep string) [3][]string {
	t.Helper()
	var out [3][]string
	s.Read(func(r Reader) { out[0] = slices.Clone(r.Episode(DefaultNamespace, ep).Edges) })
	err := s.Snapshot(context.Background(), func(sn *Snapshot) error {
		e, err := sn.Episode(DefaultNamespace, ep)
		if err != nil {
			return err
		}
		out[1] = e.Edges
		return sn.Episodes(DefaultNamespace, func(e *Episode) error {
			if e.ID == ep {
				out[2] = e.Edges
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLongEpisodeWritesItsEdgeListOnce grows an episode to 20 chunks of
// edge ids, a few ids a batch: each batch writes a bounded number of
// episode bytes (the record's tail and at most one chunk), where the
// whole list used to be written again; reopened, from the view
// snapshot and from Badger, the episode has every id in order.
func TestLongEpisodeWritesItsEdgeListOnce(t *testing.T) {
	const n = 20*episodeEdgeChunk + episodeEdgeChunk/2 + 1
	for _, snapshot := range []bool{true, false} {
		t.Run(fmt.Sprintf("view snapshot %v", snapshot), func(t *testing.T) {
			dir := t.TempDir()
			o := DefaultOptions(dir)
			o.SyncWrites, o.ViewSnapshot = false, snapshot
			s, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			written := growEpisode(t, s, "ep-long", 0, n, 3)
			// The largest batch writes the record (fewer than a chunk's
			// ids, of 11 bytes, and its other fields) and one chunk.
			bound := int64(2*episodeEdgeChunk*14 + 256)
			if m := slices.Max(written); m > bound {
				t.Errorf("a batch wrote %d bytes of episode, more than %d: the list is written again", m, bound)
			}
			if first, last := written[1], written[len(written)-1]; last > first+int64(episodeEdgeChunk*14) {
				t.Errorf("episode bytes a batch grow with the list: %d at the start, %d at the end", first, last)
			}
			for i, got := range episodeEverywhere(t, s, "ep-long") {
				if !slices.Equal(got, wantEdges(n)) {
					t.Fatalf("reader %d: %d edges, want %d in order", i, len(got), n)
				}
			}
			if r := mustCheck(t, s); r.EdgeChunks != 20 {
				t.Errorf("check counted %d edge chunks, want 20", r.EdgeChunks)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.LoadedFromSnapshot(); got != snapshot {
				t.Fatalf("loaded from the view snapshot: %v, want %v", got, snapshot)
			}
			for i, got := range episodeEverywhere(t, s, "ep-long") {
				if !slices.Equal(got, wantEdges(n)) {
					t.Fatalf("reopened, reader %d: %d edges, want %d in order", i, len(got), n)
				}
			}
			// Growing on after the reopen appends chunks, not rewrites.
			growEpisode(t, s, "ep-long", n, 2*episodeEdgeChunk, 50)
			for i, got := range episodeEverywhere(t, s, "ep-long") {
				if !slices.Equal(got, wantEdges(n+2*episodeEdgeChunk)) {
					t.Fatalf("grown after the reopen, reader %d: %d edges", i, len(got))
				}
			}
			mustCheck(t, s)
		})
	}
}

// TestEpisodeEdgeListRewrittenWhenNotAppended removes ids from the
// middle of a chunked list (as forgetting an entity does) and then
// shortens it below a chunk: the chunks are written again, the ones
// past the new end deleted, and every reader and the check agree.
func TestEpisodeEdgeListRewrittenWhenNotAppended(t *testing.T) {
	dir := t.TempDir()
	o := DefaultOptions(dir)
	o.SyncWrites = false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	const n = 3*episodeEdgeChunk + 5
	growEpisode(t, s, "ep", 0, n, 100)
	want := wantEdges(n)
	edit := func(fn func([]string) []string) {
		t.Helper()
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			e := b.Episode(DefaultNamespace, "ep")
			e.Edges = fn(e.Edges)
			return b.PutEpisode(e)
		}); err != nil {
			t.Fatal(err)
		}
		want = fn(want)
		for i, got := range episodeEverywhere(t, s, "ep") {
			if !slices.Equal(got, want) {
				t.Fatalf("reader %d: %d edges, want these %d: %q", i, len(got), len(want), want)
			}
		}
		mustCheck(t, s)
	}
	drop := func(at ...int) func([]string) []string {
		return func(ids []string) []string {
			return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
				return slices.ContainsFunc(at, func(i int) bool { return id == fmt.Sprintf("edge-%06d", i) })
			})
		}
	}
	edit(drop(3, 200)) // in the first and second chunks: 3·128+3 ids, 3 chunks
	edit(func(ids []string) []string { return slices.Clone(ids[:episodeEdgeChunk+1]) })
	if r := mustCheck(t, s); r.EdgeChunks != 1 {
		t.Errorf("%d chunks stored after shortening to one, want 1", r.EdgeChunks)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	for i, got := range episodeEverywhere(t, s, "ep") {
		if !slices.Equal(got, want) {
			t.Fatalf("reopened, reader %d: %d edges, want %d", i, len(got), len(want))
		}
	}
}

// TestMissingEdgeChunkIsFound deletes a stored chunk behind the store's
// back: the check names the episode, and a reopen from Badger refuses
// the store as corrupt rather than serve the episode short.
func TestMissingEdgeChunkIsFound(t *testing.T) {
	for _, gone := range [][]int{{1}, {0, 1}} {
		t.Run(fmt.Sprint(gone), func(t *testing.T) {
			s, o := openFromBadger(t)
			growEpisode(t, s, "ep", 0, 2*episodeEdgeChunk+1, 5)
			mustOK(t, s.db.Update(func(txn *badger.Txn) error {
				for _, c := range gone {
					if err := txn.Delete(episodeEdgesKey(DefaultNamespace, "ep", c)); err != nil {
						return err
					}
				}
				return nil
			}))
			refusedAsCorrupt(t, s, o)
		})
	}
}

// TestEdgeChunkCodecRefusesDamage checks the chunk decoder on truncated
// and padded values, and the record's chunk count on a bad value.
func TestEdgeChunkCodecRefusesDamage(t *testing.T) {
	b := encodeEdgeChunk([]string{"a", "bc", ""})
	got, err := appendEdgeChunk(nil, b, false)
	if err != nil || !slices.Equal(got, []string{"a", "bc", ""}) {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	// In place (a view snapshot's chunks), the ids alias the chunk's
	// bytes; else they are copies.
	in := func(id string) bool {
		at := uintptr(unsafe.Pointer(unsafe.StringData(id))) - uintptr(unsafe.Pointer(&b[0]))
		return at < uintptr(len(b))
	}
	aliased, err := appendEdgeChunk(nil, b, true)
	if err != nil || !slices.Equal(aliased, got) || !in(aliased[0]) || !in(aliased[1]) || in(got[0]) || in(got[1]) {
		t.Fatalf("in place: %q, %v; aliasing %v %v, copies aliasing %v %v", aliased, err, in(aliased[0]), in(aliased[1]), in(got[0]), in(got[1]))
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), {0xff}, {5, 1, 'a'}} {
		if _, err := appendEdgeChunk(nil, bad, false); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: %v, want ErrCorrupt", bad, err)
		}
	}
	e := &Episode{ID: "ep", Namespace: "ns", Edges: []string{"x"}, sealed: 3}
	v, err := encodeEpisodeV2(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeEpisode(v)
	if err != nil || d.sealed != 3 || !slices.Equal(d.Edges, e.Edges) {
		t.Fatalf("round trip of a chunked record: %+v, %v", d, err)
	}
	if _, err := decodeEpisode(append(v[:len(v)-1], 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a chunk count of 0: %v, want ErrCorrupt", err)
	}
}

// TestHasEdgeIndexFollowsTheList drives a long episode's edge index
// through what can befall it: batches that commit, a batch that is
// discarded after adding to the shared index, a removal from the middle,
// the episode's end. At each point HasEdge must answer what a scan of
// the list answers, for ids listed, once listed, and never listed.
func TestHasEdgeIndexFollowsTheList(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	ctx := context.Background()
	var asked []string
	agree := func(e *Episode) {
		t.Helper()
		for _, id := range asked {
			if got, want := e.HasEdge(id), HasID(e.Edges, id); got != want {
				t.Fatalf("HasEdge(%s) = %v, the list says %v (%d ids, ended %v)", id, got, want, len(e.Edges), e.Ended)
			}
		}
	}
	step := func(fail bool, fn func(e *Episode)) {
		t.Helper()
		_, err := s.Update(ctx, func(b *Batch) error {
			e := b.Episode(DefaultNamespace, "ep")
			if e == nil {
				e = &Episode{ID: "ep"}
			}
			fn(e)
			agree(e)
			if err := b.PutEpisode(e); err != nil {
				return err
			}
			if fail {
				return errors.New("discarded")
			}
			return nil
		})
		if fail != (err != nil) {
			t.Fatalf("update: %v", err)
		}
		s.Read(func(r Reader) {
			if e := r.Episode(DefaultNamespace, "ep"); e != nil {
				agree(e)
			}
		})
	}
	add := func(ids ...string) func(*Episode) {
		return func(e *Episode) {
			for _, id := range ids {
				asked = append(asked, id)
				if !e.HasEdge(id) {
					e.AppendEdge(id)
				}
			}
		}
	}
	for i := range 3 * edgeScanMax {
		step(false, add(fmt.Sprintf("e%04d", i), "e0000", fmt.Sprintf("e%04d", i/2)))
	}
	step(true, add("lost-1", "lost-2"))         // discarded after indexing its ids
	step(false, add("kept", "e0001", "lost-1")) // lost-1 now listed, at another place
	step(false, func(e *Episode) {              // as Forget does
		e.Edges = slices.DeleteFunc(slices.Clone(e.Edges), func(x string) bool { return x == "e0003" || x == "kept" })
		e.edgePos = nil
	})
	step(false, add("e0003", "after", "e0500"))
	step(false, func(e *Episode) { e.Ended = true })
	step(false, add("late"))
	s.Read(func(r Reader) {
		if e := r.Episode(DefaultNamespace, "ep"); e.edgePos != nil {
			t.Error("an ended episode keeps its edge index")
		}
	})
}

// TestEpisodeEdgesHeldByAReaderNeverChange holds the view's edge and
// node lists of an episode, as a reader may, while batches append to
// them (in place, past the view's length: Batch.Episode shares the
// lists), one of them discarded, and one removes ids (with a copy): what
// the reader holds must stay as it was. Under the race detector (make race), a
// reader goroutine reads the view's lists throughout.
func TestEpisodeEdgesHeldByAReaderNeverChange(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	growEpisode(t, s, "ep", 0, 300, 7)
	addNodes := func(ids ...string) {
		t.Helper()
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			e := b.Episode(DefaultNamespace, "ep")
			e.Nodes = append(e.Nodes, ids...)
			return b.PutEpisode(e)
		}); err != nil {
			t.Fatal(err)
		}
	}
	addNodes("n1", "n2", "n3")
	addNodes("n0") // the list now has room to grow in place
	var held, heldNodes []string
	s.Read(func(r Reader) {
		e := r.Episode(DefaultNamespace, "ep")
		held, heldNodes = e.Edges, e.Nodes
	})
	was, wasNodes := slices.Clone(held), slices.Clone(heldNodes)
	addNodes("n4")
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			s.Read(func(r Reader) {
				for _, id := range r.Episode(DefaultNamespace, "ep").Edges {
					n += len(id)
				}
			})
		}
	}()
	growEpisode(t, s, "ep", 300, 40, 3)
	_, err := s.Update(context.Background(), func(b *Batch) error {
		e := b.Episode(DefaultNamespace, "ep")
		e.AppendEdge("discarded")
		if err := b.PutEpisode(e); err != nil {
			return err
		}
		return errors.New("discarded")
	})
	if err == nil {
		t.Fatal("the discarded batch committed")
	}
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		e := b.Episode(DefaultNamespace, "ep")
		e.Edges = slices.DeleteFunc(slices.Clone(e.Edges), func(id string) bool { return id == "edge-000010" })
		e.Nodes = slices.DeleteFunc(slices.Clone(e.Nodes), func(id string) bool { return id == "n2" })
		return b.PutEpisode(e)
	}); err != nil {
		t.Fatal(err)
	}
	growEpisode(t, s, "ep", 340, 20, 1)
	close(stop)
	<-done
	addNodes("n5")
	if !slices.Equal(held, was) || !slices.Equal(heldNodes, wasNodes) {
		t.Fatal("the lists a reader held changed under it")
	}
	s.Read(func(r Reader) {
		got := r.Episode(DefaultNamespace, "ep").Edges
		want := slices.DeleteFunc(wantEdges(360), func(id string) bool { return id == "edge-000010" })
		if !slices.Equal(got, want) {
			t.Fatalf("the view's list: %d ids, want %d", len(got), len(want))
		}
	})
}

// TestEpisodeFromBeforeChunks reads an episode record as stores before
// the chunks hold it (the whole list in the record), grows it, and
// reopens: the list is whole throughout, the growth writes the chunks it
// fills, and Check passes.
func TestEpisodeFromBeforeChunks(t *testing.T) {
	s, o := openFromBadger(t)
	const n = 3*episodeEdgeChunk + 3
	old := &Episode{ID: "ep", Namespace: DefaultNamespace, Agent: "robot-1", Edges: wantEdges(n), Seq: 7}
	v, err := encodeEpisodeV2(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(episodeKey(DefaultNamespace, "ep"), v) }))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	for i, got := range episodeEverywhere(t, s, "ep") {
		if !slices.Equal(got, wantEdges(n)) {
			t.Fatalf("reader %d: %d edges, want %d", i, len(got), n)
		}
	}
	growEpisode(t, s, "ep", n, 2*episodeEdgeChunk, 9)
	r := mustCheck(t, s)
	if want := int64((n + 2*episodeEdgeChunk) / episodeEdgeChunk); r.EdgeChunks != want {
		t.Errorf("%d chunks stored, want %d", r.EdgeChunks, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	for i, got := range episodeEverywhere(t, s, "ep") {
		if !slices.Equal(got, wantEdges(n+2*episodeEdgeChunk)) {
			t.Fatalf("grown and reopened, reader %d: %d edges", i, len(got))
		}
	}
}

// TestEdgeChunkCountBeyondTheChunksFailsCheaply stores a record that
// claims a billion chunks of its edge list (a damaged count) beside one
// real chunk: the reopen fails as corrupt, and neither it nor Check sizes
// anything by the claim (the test would run out of memory).
func TestEdgeChunkCountBeyondTheChunksFailsCheaply(t *testing.T) {
	s, o := openFromBadger(t)
	growEpisode(t, s, "ep", 0, episodeEdgeChunk+1, 5)
	var ep Episode
	s.Read(func(r Reader) { ep = *r.Episode(DefaultNamespace, "ep") })
	ep.Edges, ep.sealed = ep.Edges[episodeEdgeChunk:], 1<<30
	v, err := encodeEpisodeV2(&ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(episodeKey(DefaultNamespace, "ep"), v) }))
	if err := s.Snapshot(context.Background(), func(sn *Snapshot) error {
		_, err := sn.Episode(DefaultNamespace, "ep")
		return err
	}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Snapshot.Episode: %v, want ErrCorrupt", err)
	}
	refusedAsCorrupt(t, s, o)
}

// openFromBadger opens a store in a temporary directory that loads from
// Badger, not from a view snapshot, fsync off; it returns its options
// for a reopen.
func openFromBadger(t *testing.T) (*Store, Options) {
	t.Helper()
	o := DefaultOptions(t.TempDir())
	o.SyncWrites, o.ViewSnapshot = false, false
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, o
}

// refusedAsCorrupt checks that Check reports an episode-edges problem in
// s, then closes it and checks that a reopen with o fails as corrupt.
func refusedAsCorrupt(t *testing.T, s *Store, o Options) {
	t.Helper()
	r, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Kind == "episode-edges" }) {
		t.Fatalf("check missed the damage: %+v", r.Problems)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("reopen: %v, want ErrCorrupt", err)
	}
}
