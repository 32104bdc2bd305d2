package particle

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxgraph/ctxgraph/wave"
)

// lockedBuffer is a log sink that tests read after the store is done.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openLogged opens the store in dir with its logs in the returned buffer.
func openLogged(t *testing.T, dir string) (*Store, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	o := DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// TestViewSnapshotLoadsTheViewBadgerGives writes a snapshot of a store
// with several chunks of every table, some values in format 1 (stored
// whole) and an edge with an empty embedding, and loads it beside a scan
// of Badger: the two views are equal in every field, adjacency order and
// embeddings included.
func TestViewSnapshotLoadsTheViewBadgerGives(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 7, testEntities, 3*benchEdgesPerTxn)
	defer s.Close()
	var old []*Edge
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { old = append(old, e); return len(old) < 3 })
	})
	if err := s.db.Update(func(txn *badger.Txn) error {
		c := *old[0]
		c.Embedding = nil
		v, err := encodeValue(&c, old[0].Embedding) // format 1
		if err != nil {
			return err
		}
		if err := txn.Set(edgeKey(c.Namespace, c.ID), v); err != nil {
			return err
		}
		c = *old[1]
		c.Embedding = []float32{}
		v, err = encodeEdgeV2(&c, nil, false)
		if err != nil {
			return err
		}
		return txn.Set(edgeKey(c.Namespace, c.ID), v)
	}); err != nil {
		t.Fatal(err)
	}
	// With the edges' ends the store's view keeps, as Close writes them,
	// and without (an ends table left out), the load links the same
	// adjacency.
	for _, ends := range [][]edgeEnds{s.v.ends, nil} {
		compareSnapshotLoad(t, s, ends, old)
	}
}

// compareSnapshotLoad writes a snapshot of s with ends and loads it
// beside a scan of Badger: the two views must be equal (old[1] is an
// edge with an empty embedding).
func compareSnapshotLoad(t *testing.T, s *Store, ends []edgeEnds, old []*Edge) {
	t.Helper()
	path := ViewSnapshotPath(t.TempDir())
	if _, _, err := writeViewSnapshot(context.Background(), s.db, path, func() []edgeEnds { return ends }, 2); err != nil {
		t.Fatal(err)
	}
	fromSnap := newView()
	_, _, _, err := readViewSnapshot(path, s.db.MaxVersion(), 3, fromSnap, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if (fromSnap.snapEnds == nil) != (ends == nil) {
		t.Fatalf("ends written: %d, loaded: %d", len(ends), len(fromSnap.snapEnds))
	}
	fromSnap.linkLoaded()
	fromSnap.awaitLinks()
	fromSnap.indexLoaded()
	fromBadger := newView()
	if err := s.db.View(func(txn *badger.Txn) error {
		// As Open loads from Badger: the values, then the episodes'
		// edge chunks (a snapshot's load joins its own).
		if _, err := loadValues(s.db, txn, fromBadger, func() {}); err != nil {
			return err
		}
		return joinLoadedEdgeChunks(txn, fromBadger)
	}); err != nil {
		t.Fatal(err)
	}
	fromBadger.linkLoaded()
	fromBadger.awaitLinks()
	fromBadger.indexLoaded()
	if fromSnap.edges.len() < 3*benchEdgesPerTxn-20 || len(fromSnap.nodes) != testEntities || len(fromSnap.episodes) == 0 {
		t.Fatalf("snapshot loaded %d edges, %d nodes, %d episodes", fromSnap.edges.len(), len(fromSnap.nodes), len(fromSnap.episodes))
	}
	if e := fromSnap.edges.get(fromSnap, old[1].ID); e.Embedding == nil || len(e.Embedding) != 0 {
		t.Fatalf("empty embedding loaded as %#v", e.Embedding)
	}
	// Each load makes its chunks of codes (apart: DeepEqual would compare
	// their pointers), compared by content, then left out.
	if !equalCodes(&fromSnap.codes, &fromBadger.codes) {
		t.Fatal("the codes loaded from the snapshot differ from Badger's")
	}
	fromSnap.codes, fromBadger.codes = edgeCodes{}, edgeCodes{}
	if !reflect.DeepEqual(fromSnap, fromBadger) {
		t.Fatal("the view loaded from the snapshot differs from Badger's")
	}
	// Each load kept every edge's identity.
	for _, v := range []*view{fromSnap, fromBadger} {
		for id, e := range edgesByID(v) {
			if got := v.identity.find(v, []byte(edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target))); got == nil || got.ID != id {
				t.Fatalf("edge %s: identity names %v", id, got)
			}
		}
	}
}

// equalCodes reports whether a and b hold codes of one dimension, in
// chunks made at the same seqs with equal codes and states.
func equalCodes(a, b *edgeCodes) bool {
	if a.dim != b.dim || len(a.chunks) != len(b.chunks) || !slices.Equal(a.dirty, b.dirty) {
		return false
	}
	for k := range a.chunks {
		ca, cb := a.chunks[k].Load(), b.chunks[k].Load()
		if (ca == nil) != (cb == nil) {
			return false
		}
		if ca == nil {
			continue
		}
		if !slices.Equal(ca.codes, cb.codes) {
			return false
		}
		for i := range ca.state {
			if ca.state[i].Load() != cb.state[i].Load() {
				return false
			}
		}
	}
	return true
}

// TestViewSnapshotAcrossReopen closes a store (which writes its
// snapshot) and opens it again: the view comes from the snapshot, equal
// to what was written, and the snapshot is gone once loaded.
func TestViewSnapshotAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 8, testEntities, 2*benchEdgesPerTxn)
	edges, nodes, _ := snapshotView(s)
	counts := s.Counts()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ViewSnapshotPath(dir)); err != nil {
		t.Fatalf("no snapshot after Close: %v", err)
	}
	s, logs := openLogged(t, dir)
	if !strings.Contains(logs.String(), "view loaded from its snapshot") {
		t.Fatalf("the view did not come from the snapshot; logs:\n%s", logs)
	}
	if _, err := os.Stat(ViewSnapshotPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("snapshot still there after loading (%v)", err)
	}
	edges2, nodes2, _ := snapshotView(s)
	if !reflect.DeepEqual(edges2, edges) || !reflect.DeepEqual(nodes2, nodes) {
		t.Fatal("nodes or edges differ from those written")
	}
	if got := s.Counts(); !reflect.DeepEqual(got, counts) {
		t.Fatalf("counts = %+v, want %+v", got, counts)
	}
	// A write on top of a view loaded from the snapshot is in the next.
	observeOn(t, s, "a cup never seen", "a table never seen")
	edges, nodes, out := snapshotView(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, logs = openLogged(t, dir)
	defer s.Close()
	if !strings.Contains(logs.String(), "view loaded from its snapshot") {
		t.Fatalf("the second reopen did not load the snapshot; logs:\n%s", logs)
	}
	edges2, nodes2, out2 := snapshotView(s)
	if len(edges2) != len(edges) || !reflect.DeepEqual(edges2, edges) || !reflect.DeepEqual(nodes2, nodes) || !reflect.DeepEqual(out2, out) {
		t.Fatalf("after a write and a second reopen: %d edges, want %d, or nodes or adjacency differ", len(edges2), len(edges))
	}
}

// TestLoadedEdgesIndexedByIDLater: a load leaves its edges out of the
// maps by id; walking them by seq leaves it so (a daemon's start walks
// them before it serves, and has the maps made after), walking them by
// the map (Reader.Edges) or IndexLoaded puts them in.
func TestLoadedEdgesIndexedByIDLater(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 5, testEntities, benchEdgesPerTxn)
	if !s.EdgesIndexedByID() {
		t.Error("a store that loaded nothing: edges not indexed by id")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, index := range []func(*Store){
		func(s *Store) { s.Read(func(r Reader) { r.Edges(func(*Edge) bool { return true }) }) },
		(*Store).IndexLoaded,
	} {
		s, _ := openLogged(t, dir)
		if s.EdgesIndexedByID() {
			t.Error("loaded edges indexed by id at Open")
		}
		n := 0
		s.Read(func(r Reader) { r.EdgesBySeq(func(*Edge, *EdgeFacts) bool { n++; return true }) })
		if n == 0 || s.EdgesIndexedByID() {
			t.Errorf("after a walk by seq over %d edges: indexed by id %v", n, s.EdgesIndexedByID())
		}
		index(s)
		if !s.EdgesIndexedByID() {
			t.Error("loaded edges not indexed by id after a walk by id or IndexLoaded")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestViewSnapshotKeptWhenNothingWritten: a store loaded from its
// snapshot sets the file aside while it runs; a Close with nothing
// written since puts that same file back (not a copy written again),
// which the next start loads; a Close after a write writes a new one.
func TestViewSnapshotKeptWhenNothingWritten(t *testing.T) {
	dir := t.TempDir()
	path := ViewSnapshotPath(dir)
	s := writeFleet(t, dir, 13, testEntities, benchEdgesPerTxn)
	edges, nodes, _ := snapshotView(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, logs := openLogged(t, dir)
	if !s.LoadedFromSnapshot() {
		t.Fatalf("not loaded from the snapshot; logs:\n%s", logs)
	}
	aside, err := os.Stat(path + loadedSuffix)
	if err != nil {
		t.Fatalf("the loaded snapshot was not set aside: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a snapshot a crash would load is still there (%v)", err)
	}
	kept := closeSnapshotting(t, s, logs, "view snapshot kept", "Close with nothing written did not keep the snapshot")
	if !os.SameFile(aside, kept) {
		t.Fatal("the snapshot was written again, not put back")
	}

	// The kept snapshot matches the store at its new version.
	s, logs = openLogged(t, dir)
	if !s.LoadedFromSnapshot() {
		t.Fatalf("the kept snapshot was not loaded; logs:\n%s", logs)
	}
	if e2, n2, _ := snapshotView(s); !reflect.DeepEqual(e2, edges) || !reflect.DeepEqual(n2, nodes) {
		t.Fatal("nodes or edges differ after loading the kept snapshot")
	}
	// After a write, Close writes a new snapshot holding it.
	observeOn(t, s, "a jug never seen", "a shelf never seen")
	edges, nodes, _ = snapshotView(s)
	aside, err = os.Stat(path + loadedSuffix)
	if err != nil {
		t.Fatal(err)
	}
	written := closeSnapshotting(t, s, logs, "view snapshot written", "Close after a write did not write the snapshot")
	if os.SameFile(aside, written) {
		t.Fatal("the stale snapshot was put back after a write")
	}
	s, logs = openLogged(t, dir)
	defer s.Close()
	if !s.LoadedFromSnapshot() {
		t.Fatalf("the new snapshot was not loaded; logs:\n%s", logs)
	}
	if e2, n2, _ := snapshotView(s); !reflect.DeepEqual(e2, edges) || !reflect.DeepEqual(n2, nodes) {
		t.Fatal("nodes or edges differ from those written before the Close")
	}
}

// closeSnapshotting closes s, whose logs must then hold want (else it
// fails with why), and returns the snapshot Close left; the file the
// load set aside must be gone.
func closeSnapshotting(t *testing.T, s *Store, logs *lockedBuffer, want, why string) os.FileInfo {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("%s; logs:\n%s", why, logs)
	}
	path := ViewSnapshotPath(s.opts.Dir)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + loadedSuffix); !os.IsNotExist(err) {
		t.Fatalf("the set-aside file is still there (%v)", err)
	}
	return fi
}

// TestViewSnapshotSetAsideByACrashIsLoaded: a snapshot set aside by a
// run that then died (no Close put it back) is loaded by the next Open,
// which keeps it set aside: a run that dies again leaves it for the next.
func TestViewSnapshotSetAsideByACrashIsLoaded(t *testing.T) {
	dir := t.TempDir()
	path := ViewSnapshotPath(dir)
	s := writeFleet(t, dir, 14, testEntities, 64)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+loadedSuffix); err != nil {
		t.Fatal(err)
	}
	s, logs := openLogged(t, dir)
	defer s.Close()
	if !s.LoadedFromSnapshot() || !strings.Contains(logs.String(), "set_aside_by_a_crash=true") {
		t.Fatalf("the snapshot a crashed run had set aside was not loaded; logs:\n%s", logs)
	}
	if _, behind := s.CaughtUp(); behind {
		t.Fatal("nothing was written since the snapshot, yet the load caught up")
	}
	if _, err := os.Stat(path + loadedSuffix); err != nil {
		t.Fatalf("the set-aside file is gone (%v)", err)
	}
}

// TestViewSnapshotDroppedWhenOff opens a store that left a snapshot
// with snapshots off: it loads from Badger and removes the snapshot,
// which its writes would make stale.
func TestViewSnapshotDroppedWhenOff(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 11, testEntities, benchEdgesPerTxn)
	want := len(mustEdges(s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ViewSnapshotPath(dir)+".tmp", []byte("a shutdown died here"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openSnapshots(t, dir, false)
	for _, p := range []string{ViewSnapshotPath(dir), ViewSnapshotPath(dir) + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s kept by a store without snapshots (%v)", p, err)
		}
	}
	if got := len(mustEdges(s)); got != want {
		t.Fatalf("%d edges, want %d", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ViewSnapshotPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("snapshot written by a store without snapshots (%v)", err)
	}
}

// TestViewSnapshotTempFileRemoved leaves the temporary file of a
// shutdown that died while writing its snapshot: the next Open, with
// snapshots on and none to load, removes it.
func TestViewSnapshotTempFileRemoved(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 12, testEntities, 64)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ViewSnapshotPath(dir), ViewSnapshotPath(dir)+".tmp"); err != nil {
		t.Fatal(err)
	}
	s, logs := openLogged(t, dir)
	defer s.Close()
	if strings.Contains(logs.String(), "view loaded from its snapshot") || s.LoadedFromSnapshot() {
		t.Fatal("loaded a temporary file as the snapshot")
	}
	if _, err := os.Stat(ViewSnapshotPath(dir) + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file kept (%v)", err)
	}
}

// TestViewSnapshotNotKeptOnAFullDisk closes a store on a disk that
// would keep less free space than the snapshot takes: the snapshot is
// removed, with a warning, and the next start loads from Badger.
func TestViewSnapshotNotKeptOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 13, testEntities, 64)
	want := len(mustEdges(s))
	logs := &lockedBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, nil))
	freeSpace = func(string) (uint64, bool) { return 1 << 10, true }
	t.Cleanup(func() { freeSpace = diskFree })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ViewSnapshotPath(dir)); !os.IsNotExist(err) || !strings.Contains(logs.String(), "view snapshot removed") {
		t.Fatalf("snapshot kept on a full disk (%v); logs:\n%s", err, logs)
	}
	s, _ = openLogged(t, dir)
	defer s.Close()
	if s.LoadedFromSnapshot() || len(mustEdges(s)) != want {
		t.Fatalf("reopened from snapshot %v with %d edges, want %d from Badger", s.LoadedFromSnapshot(), len(mustEdges(s)), want)
	}
}

// TestViewSnapshotStaleCatchesUp puts back a snapshot taken before the
// store's last write: Open loads it and catches up with what Badger
// holds written since, and the write is there.
func TestViewSnapshotStaleCatchesUp(t *testing.T) {
	before := 0
	s, logs := reopenWithOldSnapshot(t, 9, func(s *Store) {
		before = len(mustEdges(s))
		observeOn(t, s, "a cup never seen", "a table never seen")
	})
	defer s.Close()
	if cu, behind := s.CaughtUp(); !behind || cu.Edges != 1 || !strings.Contains(logs.String(), "caught up") {
		t.Fatalf("stale snapshot caught up %v (%+v); logs:\n%s", behind, cu, logs)
	}
	if got := len(mustEdges(s)); got != before+1 {
		t.Fatalf("%d edges after reopening, want %d", got, before+1)
	}
}

// TestViewSnapshotDamagedIsNotLoaded damages the snapshot in its
// records, a node's embedding, an episode's edge chunks, its directory
// and its length: each time Open loads from Badger, warns, and finds
// every edge with its embedding and the episode's edge list whole.
func TestViewSnapshotDamagedIsNotLoaded(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 10, testEntities, benchEdgesPerTxn)
	const long = 3*episodeEdgeChunk + 5
	growEpisode(t, s, "ep-long", 0, long, 40)
	edges, _, _ := snapshotView(s)
	damages := map[string]func([]byte) []byte{
		"record":         func(b []byte) []byte { b[40] ^= 0x10; return b },
		"node embedding": func(b []byte) []byte { b[snapEmbeddingsAt(t, b, prefixNode)] ^= 0x01; return b },
		"edge chunks": func(b []byte) []byte {
			tr, err := readSnapTrailer(b[len(b)-trailerSize:])
			if err != nil || tr.listsLen == 0 {
				t.Fatalf("no episode edge chunks in the snapshot (%v)", err)
			}
			b[tr.listsOff+tr.listsLen/2] ^= 0x01
			return b
		},
		"directory": func(b []byte) []byte { b[len(b)-trailerSize-5] ^= 0x01; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-7] },
	}
	for name, damage := range damages {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(ViewSnapshotPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ViewSnapshotPath(dir), damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
		var logs *lockedBuffer
		s, logs = openLogged(t, dir)
		if !strings.Contains(logs.String(), "view snapshot unreadable") {
			t.Fatalf("%s: damage not reported; logs:\n%s", name, logs)
		}
		if got, _, _ := snapshotView(s); !reflect.DeepEqual(got, edges) {
			t.Fatalf("%s: edges differ after loading from the store", name)
		}
		for i, got := range episodeEverywhere(t, s, "ep-long") {
			if !slices.Equal(got, wantEdges(long)) {
				t.Fatalf("%s: reader %d: episode of %d edges, want %d", name, i, len(got), long)
			}
		}
	}
	s.Close()
}

// A snapshot whose episodes' edge chunks pass their checksum but cannot
// be joined (a snapshot written wrong) is refused like a damaged one:
// Open loads from Badger instead of failing, and the episode is whole.
func TestViewSnapshotUnjoinableEdgeChunksLoadFromTheStore(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 12, testEntities, benchEdgesPerTxn)
	const long = 3*episodeEdgeChunk + 5
	growEpisode(t, s, "ep-long", 0, long, 40)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ViewSnapshotPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := readSnapTrailer(b[len(b)-trailerSize:])
	if err != nil || tr.listsLen == 0 {
		t.Fatalf("no episode edge chunks in the snapshot (%v)", err)
	}
	// The first chunk's key length, past the end of the lists; the
	// checksums made to match.
	b[tr.listsOff], b[tr.listsOff+1] = 0xff, 0x7f
	b = resealSnapshot(b)
	if err := os.WriteFile(ViewSnapshotPath(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, logs := openLogged(t, dir)
	defer s.Close()
	if !strings.Contains(logs.String(), "view snapshot unreadable") || s.LoadedFromSnapshot() {
		t.Fatalf("an unjoinable snapshot was taken, or not reported; logs:\n%s", logs)
	}
	for i, got := range episodeEverywhere(t, s, "ep-long") {
		if !slices.Equal(got, wantEdges(long)) {
			t.Fatalf("reader %d: episode of %d edges, want %d", i, len(got), long)
		}
	}
}

// A load of a damaged snapshot returns only once its read-ahead has
// stopped: the caller unmaps the snapshot next, and a read-ahead still
// reading the mapping then faulted and killed the process (the CI run of
// d8e2f14). The read-ahead here is slowed to outlast the failed load.
func TestViewSnapshotFailedLoadStopsItsReadAhead(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 11, testEntities, 3*benchEdgesPerTxn)
	path := ViewSnapshotPath(t.TempDir())
	if _, _, err := writeViewSnapshot(context.Background(), s.db, path, func() []edgeEnds { return nil }, 2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[40] ^= 0x10 // the first chunk's records: its checksum fails
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var returned, late atomic.Bool
	var asked atomic.Int32
	beforeReadAhead = func() {
		asked.Add(1)
		time.Sleep(2 * time.Millisecond)
		if returned.Load() {
			late.Store(true)
		}
	}
	defer func() { beforeReadAhead = nil }()
	_, _, _, err = readViewSnapshot(path, s.db.MaxVersion(), 2, newView(), func() {})
	returned.Store(true)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("a snapshot with a damaged record loaded, or failed otherwise: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // a read-ahead left running would go on meanwhile
	if late.Load() {
		t.Fatal("the read-ahead went on reading the snapshot after the failed load returned")
	}
	if asked.Load() == 0 {
		t.Fatal("the load started no read-ahead")
	}
	s.Close()
}

// TestViewSnapshotEdgeEmbeddingsMended damages the embeddings of two
// chunks of edges, which a load leaves unread: Open loads the snapshot,
// the check after it finds both chunks, reads their embeddings again
// from Badger and reports it, and every edge then has the embedding
// Badger holds, and an int8 code made from it.
func TestViewSnapshotEdgeEmbeddingsMended(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 11, testEntities, 3*benchEdgesPerTxn)
	edges := closeAndDamage(t, s, dir, func(b []byte) {
		b[snapEmbeddingsAt(t, b, prefixEdge)] ^= 0x40
		b[snapLastEmbeddingAt(t, b, prefixEdge)] ^= 0x01
	})
	s, logs := openLogged(t, dir)
	defer s.Close()
	if !s.LoadedFromSnapshot() {
		t.Fatalf("a snapshot damaged only in edge embeddings was not loaded; logs:\n%s", logs)
	}
	chunks, mended, err := s.WaitEmbeddingsChecked()
	if err != nil || mended != 2 || chunks < 3 {
		t.Fatalf("checked %d chunks, mended %d (%v); want every chunk checked and 2 mended", chunks, mended, err)
	}
	if !strings.Contains(logs.String(), "failed their checksums") {
		t.Fatalf("mended chunks not reported; logs:\n%s", logs)
	}
	if got, _, _ := snapshotView(s); !reflect.DeepEqual(got, edges) {
		t.Fatal("edges differ from the store's after the mend")
	}
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool {
			code, scale, ok := r.EmbeddingCode(e.Seq)
			if !ok || len(e.Embedding) == 0 {
				return true
			}
			want := make([]int8, len(code))
			if ws := wave.Quantize(e.Embedding, want); ws != scale || !slices.Equal(code, want) {
				t.Errorf("edge %s: code not made from its mended embedding", e.ID)
				return false
			}
			return true
		})
	})
	// A snapshot of a healthy store checks clean.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openLogged(t, dir)
	if chunks, mended, err := s.WaitEmbeddingsChecked(); err != nil || mended != 0 || chunks < 3 {
		t.Fatalf("a clean snapshot: checked %d chunks, mended %d (%v)", chunks, mended, err)
	}
}

// TestViewSnapshotEmbeddingsCheckedWhenAsked opens a store whose
// snapshot has a damaged edge embedding with Options.CheckEmbeddingsLater:
// the damage stays until CheckEmbeddings, which then mends it.
func TestViewSnapshotEmbeddingsCheckedWhenAsked(t *testing.T) {
	dir := t.TempDir()
	s := writeFleet(t, dir, 12, testEntities, benchEdgesPerTxn)
	edges := closeAndDamage(t, s, dir, func(b []byte) { b[snapEmbeddingsAt(t, b, prefixEdge)] ^= 0x40 })
	o := DefaultOptions(dir)
	o.CheckEmbeddingsLater = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _, _ := snapshotView(s); reflect.DeepEqual(got, edges) {
		t.Fatal("the damaged embedding was mended before CheckEmbeddings")
	}
	s.CheckEmbeddings()
	if _, mended, err := s.WaitEmbeddingsChecked(); err != nil || mended != 1 {
		t.Fatalf("mended %d chunks (%v), want 1", mended, err)
	}
	if got, _, _ := snapshotView(s); !reflect.DeepEqual(got, edges) {
		t.Fatal("edges differ from the store's after the check")
	}
}

// closeAndDamage returns s's edges, closes s (which writes its view
// snapshot to dir) and has damage change the snapshot file's bytes.
func closeAndDamage(t *testing.T, s *Store, dir string, damage func([]byte)) map[string]*Edge {
	t.Helper()
	edges, _, _ := snapshotView(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ViewSnapshotPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	damage(b)
	if err := os.WriteFile(ViewSnapshotPath(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return edges
}

// snapEmbeddingsAt returns the offset in snapshot file b of the first
// embedding byte of the first chunk of table p that has embeddings.
func snapEmbeddingsAt(t *testing.T, b []byte, p prefix) int {
	t.Helper()
	es := snapChunksOf(t, b, p)
	return int(es[0].off + align4(es[0].recLen))
}

// snapLastEmbeddingAt returns the offset in snapshot file b of the last
// embedding byte of the last chunk of table p that has embeddings.
func snapLastEmbeddingAt(t *testing.T, b []byte, p prefix) int {
	t.Helper()
	es := snapChunksOf(t, b, p)
	e := es[len(es)-1]
	return int(e.off+align4(e.recLen)+4*e.floats) - 1
}

// snapChunksOf returns the directory entries of snapshot file b's chunks
// of table p that have embeddings, in file order.
func snapChunksOf(t *testing.T, b []byte, p prefix) []chunkEntry {
	t.Helper()
	tr, err := readSnapTrailer(b[len(b)-trailerSize:])
	if err != nil {
		t.Fatal(err)
	}
	tail := b[tr.dirOff : len(b)-trailerSize]
	tables := tail[tr.chunks*chunkEntrySize:]
	var es []chunkEntry
	for i := range tr.chunks {
		e := readChunkEntry(tail[i*chunkEntrySize:])
		if loadTables[tables[e.part]].p == p && e.floats > 0 {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		t.Fatalf("no chunk of table %d with embeddings", p)
	}
	slices.SortFunc(es, func(a, b chunkEntry) int { return int(a.off) - int(b.off) })
	return es
}

func mustEdges(s *Store) (ids []string) {
	s.Read(func(r Reader) {
		r.Edges(func(e *Edge) bool { ids = append(ids, e.ID); return true })
	})
	return ids
}

// observeOn commits one observation: entity src on entity dst, with a
// 3-d embedding.
func observeOn(t *testing.T, s *Store, src, dst string) {
	t.Helper()
	if _, err := s.Update(context.Background(), func(b *Batch) error {
		a, _, err := b.Resolve(DefaultNamespace, NodeEntity, src)
		if err != nil {
			return err
		}
		c, _, err := b.Resolve(DefaultNamespace, NodeEntity, dst)
		if err != nil {
			return err
		}
		_, _, err = b.Observe(Observation{Source: a.ID, Target: c.ID, Type: EdgeAssertion, Predicate: "on",
			Embed: func() ([]float32, error) { return []float32{1, 2, 3}, nil }})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotEndsFallBackByID: the load takes each edge's end nodes
// from the snapshot's table, and looks up by id an end the table does
// not give (left out, past its end) or gives at a seq holding no node:
// the result is what the lookups alone give.
func TestSnapshotEndsFallBackByID(t *testing.T) {
	s := writeFleet(t, t.TempDir(), 5, testEntities, benchEdgesPerTxn)
	defer s.Close()
	v := s.v
	want := v.loadedEnds()
	var seqs []int
	for seq, e := range v.edgeSeq {
		if e != nil {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) < 10 {
		t.Fatalf("%d edges", len(seqs))
	}
	table := slices.Clone(want[:seqs[len(seqs)-3]])    // the last three edges past its end
	table[seqs[0]].source = uint64(len(v.nodeSeq)) + 7 // no node there
	table[seqs[1]].target = 0                          // left out
	table[seqs[2]] = edgeEnds{}
	v.snapEnds = table
	got := v.snapshotEnds()
	if !slices.Equal(got, want) {
		t.Fatalf("ends from the table differ from the lookups' (first edges: %v against %v)", got[seqs[0]:seqs[3]], want[seqs[0]:seqs[3]])
	}
	if v.snapEnds != nil {
		t.Fatal("the table is kept after use")
	}
	// The lookups found every end (a fleet's edges all have both).
	for _, seq := range seqs {
		if want[seq].source == 0 || want[seq].target == 0 {
			t.Fatalf("edge %d: ends %v", seq, want[seq])
		}
	}
}
