package particle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// A view snapshot is written at a clean Close and set aside once a start
// has loaded it (viewsnap.go). When that run then dies without a Close
// (a crash, a kill, a power cut), the snapshot set aside is still a
// faithful copy of the view as the run found it, at the Badger version
// its trailer names, and everything the run committed since lies in
// Badger at later versions. The next start loads that snapshot and
// catches up: it reads only what Badger holds written after the
// snapshot (an iterator with SinceTs, which skips every table written
// before) and puts it into the view as a commit's publish would.
// Before, such a start read every record from Badger: at 1M edges 28 s
// instead of 3, and twice the heap, the records' strings and embeddings
// decoded onto it instead of mapped from the file.
//
// A record written since is found by its version. A deleted one is not:
// its key is gone, and Badger's compactions drop its tombstone in time.
// So a batch that deletes a node or an edge also writes a marker for it
// (recordGone, the deleted record's key, with its seq as the value), and
// the catch-up removes what those markers name and Badger no longer
// holds. A clean Close drops the markers (the view snapshot it writes
// next, and a daemon's vector snapshot written just before, need none),
// first noting the version of the newest (the meta key "gone"): a
// catch-up from a snapshot older than that (one put back by hand, a
// vector index's saved before a tool's Close) cannot know its deletions,
// and the view is loaded from Badger instead, as before. Every marker
// is of a batch, so none is newer than a generation taken at that Close.

// recordGone is the record kind of the deletion markers.
const recordGone = "gone"

// goneKey is the marker of the node or edge stored under record key k.
func goneKey(k []byte) []byte { return recordKey(recordGone, string(k)) }

// markGone writes the marker of the node or edge at seq stored under
// record key k, which the batch deletes.
func (b *Batch) markGone(k []byte, seq uint64) {
	if !b.s.opts.InMemory {
		b.set(goneKey(k), binary.AppendUvarint(nil, seq))
	}
}

// goneBeforeKey holds the Badger version up to which deletion markers
// may have been dropped (8 bytes, big-endian).
var goneBeforeKey = metaKey("gone")

// ErrDeletionsUnknown is the error of a catch-up from a version after
// which deletion markers may have been dropped: what was deleted since
// is not known.
var ErrDeletionsUnknown = errors.New("particle: the deletions since that version are not known (their markers were dropped)")

// dropGoneMarkers deletes every deletion marker: Close calls it before
// it writes the view snapshot, which, with the vector index's written by
// a daemon just before, needs none of them. It first notes the newest
// marker's version (goneBeforeKey), in a transaction of its own, so that
// a drop cut short by a crash is noted too.
func (s *Store) dropGoneMarkers() error {
	p := append(key(prefixRecord, recordGone), 0)
	var keys [][]byte
	var before uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
			before = max(before, it.Item().Version())
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	if old, err := s.goneBeforeStored(); err != nil {
		return err
	} else {
		before = max(before, old)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(goneBeforeKey, binary.BigEndian.AppendUint64(nil, before))
	}); err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// goneBeforeStored is goneBefore in a transaction of its own.
func (s *Store) goneBeforeStored() (v uint64, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		v, err = goneBefore(txn)
		return err
	})
	return v, err
}

// goneBefore is the version up to which txn's deletion markers may have
// been dropped (0: none ever were).
func goneBefore(txn *badger.Txn) (uint64, error) {
	item, err := txn.Get(goneBeforeKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("%w: meta gone: %d bytes", ErrCorrupt, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

// written is what Badger holds written after a version: the node, edge
// and episode records, decoded as a load decodes them (an episode with
// its edge chunks joined), and the nodes and edges deleted.
type written struct {
	loadChunk
	// refs names the records written since, read for that alone
	// (readWritten without whole), in place of the records, and spans
	// the CMS spans written since.
	refs  []RecordRef
	spans []SpanRef
	gone  []goneRecord
	// refVers and spanVers are the Badger versions of refs and spans
	// (a record's, or its embedding's when that is newer), so that an
	// answer since one version gives the answer since any later one
	// (Delta.since).
	refVers, spanVers []uint64
}

// empty reports whether nothing was written since.
func (w *written) empty() bool {
	return len(w.nodes)+len(w.edges)+len(w.episodes)+len(w.refs)+len(w.gone) == 0
}

// goneRecord is a node or edge deleted since the version.
type goneRecord struct {
	table  prefix // prefixNode or prefixEdge
	ns, id string
	seq    uint64
	ver    uint64 // its marker's version
}

// readWritten reads what txn holds written after version. Besides the
// records written since, a record whose embedding alone was (its
// vectorKey) is read too. Without whole, the records are read for their
// seqs alone: their embeddings are not read, nor an episode's edge
// chunks joined.
//
// It fails with ErrDeletionsUnknown if markers of deletions after version
// may have been dropped.
func readWritten(txn *badger.Txn, version uint64, legacy func(), whole bool) (*written, error) {
	switch dropped, err := goneBefore(txn); {
	case err != nil:
		return nil, fmt.Errorf("%w: read meta gone: %v", ErrStorage, err)
	case dropped > version:
		return nil, fmt.Errorf("%w (up to version %d, asked since %d)", ErrDeletionsUnknown, dropped, version)
	}
	w := &written{}
	w.nodes, w.edges, w.episodes = []*Node{}, []*Edge{}, []*Episode{}
	read := map[string]int{} // the keys read, to their refs' places
	add := func(p prefix, k []byte, item *badger.Item, ver uint64) error {
		read[string(k)] = len(w.refs)
		if !whole {
			return item.Value(func(b []byte) error {
				ref, err := refOfValue(p, b)
				w.refs = append(w.refs, ref)
				w.refVers = append(w.refVers, ver)
				return err
			})
		}
		var vec []byte
		if p != prefixEpisode {
			var err error
			if vec, err = getVector(txn, k); err != nil {
				return err
			}
		}
		if err := item.Value(func(b []byte) error { return w.add(p, b, vec, legacy, nil, false, false) }); err != nil {
			return fmt.Errorf("read %q: %w", k, err)
		}
		if p == prefixEpisode {
			return joinEdgeChunks(txn, w.episodes[len(w.episodes)-1])
		}
		return nil
	}
	each := func(p []byte, fn func(item *badger.Item) error) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, SinceTs: version})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := fn(it.Item()); err != nil {
				return err
			}
		}
		return nil
	}
	for _, t := range loadTables {
		err := each([]byte{byte(t.p)}, func(item *badger.Item) error {
			return add(t.p, item.KeyCopy(nil), item, item.Version())
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %s written since version %d: %v", ErrStorage, t.name, version, err)
		}
	}
	err := each([]byte{byte(prefixVector)}, func(item *badger.Item) error {
		k := item.Key()[1:]
		if len(k) == 0 || prefix(k[0]) != prefixNode && prefix(k[0]) != prefixEdge {
			return nil
		}
		if i, ok := read[string(k)]; ok {
			if !whole {
				w.refVers[i] = max(w.refVers[i], item.Version()) // the embedding written after the record
			}
			return nil
		}
		rec, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil // deleted with its record, or left by a failed write (Check reports it)
		}
		if err != nil {
			return err
		}
		return add(prefix(k[0]), rec.KeyCopy(nil), rec, max(rec.Version(), item.Version()))
	})
	if err != nil {
		return nil, fmt.Errorf("%w: embeddings written since version %d: %v", ErrStorage, version, err)
	}
	if !whole {
		err := each([]byte{byte(prefixSpan)}, func(item *badger.Item) error {
			k := item.Key()[1:]
			if i := bytes.IndexByte(k, 0); i >= 0 {
				w.spans = append(w.spans, SpanRef{NS: string(k[:i]), ID: string(k[i+1:])})
				w.spanVers = append(w.spanVers, item.Version())
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%w: spans written since version %d: %v", ErrStorage, version, err)
		}
	}
	p := append(key(prefixRecord, recordGone), 0)
	err = each(p, func(item *badger.Item) error {
		k := item.Key()[len(p):]
		if _, err := txn.Get(k); !errors.Is(err, badger.ErrKeyNotFound) {
			return err // written again since (or a read error)
		}
		i := bytes.IndexByte(k, 0)
		if len(k) == 0 || i < 0 || prefix(k[0]) != prefixNode && prefix(k[0]) != prefixEdge {
			return nil // not a marker this version writes
		}
		g := goneRecord{table: prefix(k[0]), ns: string(k[1:i]), id: string(k[i+1:]), ver: item.Version()}
		return item.Value(func(b []byte) error {
			g.seq, _ = binary.Uvarint(b)
			w.gone = append(w.gone, g)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("%w: deletions since version %d: %v", ErrStorage, version, err)
	}
	return w, nil
}

// writtenAhead is what Badger holds written after the view snapshot's
// version, read (readWritten) beside the snapshot's load, which decodes
// on every core but waits on its file's pages too: read after it, it
// was 0.40 s of a 0.5 s catch-up at 1M edges with 22k records written
// since, on the serial path of a start after a crash.
type writtenAhead struct {
	base uint64 // the snapshot's version, read from its trailer
	done chan struct{}
	w    *written
	err  error
}

// readWrittenAhead starts reading what was written after the version of
// the view snapshot the load will read, when it is older than version
// (nil when there is none to read, or its trailer is unreadable: the
// load then fails, or reads after it as before).
func (s *Store) readWrittenAhead(version uint64, legacy func()) *writtenAhead {
	file := ViewSnapshotToLoad(s.opts.Dir)
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	t, _, err := fileTrailer(f)
	f.Close()
	if err != nil || t.version >= version {
		return nil
	}
	a := &writtenAhead{base: t.version, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.err = s.db.View(func(txn *badger.Txn) error {
			var err error
			a.w, err = readWritten(txn, a.base, legacy, true)
			return err
		})
	}()
	return a
}

// take waits for the read and returns it, when it was of what was
// written since base (beside false otherwise: read it now).
func (a *writtenAhead) take(base uint64) (w *written, beside bool, err error) {
	if a == nil || a.base != base {
		return nil, false, nil
	}
	<-a.done
	return a.w, true, a.err
}

// wait returns once the read, if any, is over.
func (a *writtenAhead) wait() {
	if a != nil {
		<-a.done
	}
}

// CatchUp says what a load from a view snapshot older than the store
// read from Badger (zero when it read nothing).
type CatchUp struct {
	// Since is the Badger version of the snapshot.
	Since uint64
	// Nodes, Edges and Episodes are the records written since, Removed
	// the nodes and edges deleted since.
	Nodes, Edges, Episodes, Removed int
}

// catchUp puts w, what Badger holds written after v's snapshot, into v,
// loaded from that snapshot and not yet linked (linkLoaded) nor indexed
// by id (indexLoaded), and keeps kinds, the view's counts by type, true.
// It puts the records as the load put the snapshot's: the edges by seq
// with their facts, for the adjacency's build to link with the rest,
// and in the loaded chunks, for the maps by id (a replaced edge in its
// predecessor's place, found by its seq, which an edge keeps for good;
// a removed one as nil). So a catch-up waits for neither.
func catchUp(v *view, w *written, kinds *loadCounts) CatchUp {
	cu := CatchUp{Nodes: len(w.nodes), Edges: len(w.edges), Episodes: len(w.episodes)}
	inChunks := map[uint64]*Edge{} // loaded edges to replace (nil: remove), by seq
	for _, g := range w.gone {
		if g.table != prefixEdge {
			continue
		}
		if e := atSeq(v.edgeSeq, g.seq); e != nil && e.ID == g.id && e.Namespace == g.ns {
			v.edgeSeq = unsetSeq(v.edgeSeq, g.seq, e)
			v.unsetFacts(g.seq)
			v.apart.set(g.seq, false)
			kinds.edges[e.Type]--
			inChunks[g.seq] = nil
			cu.Removed++
		}
	}
	for _, g := range w.gone {
		if g.table != prefixNode {
			continue
		}
		if n := v.nodes[g.id]; n != nil && n.Namespace == g.ns && v.removeNode(g.id) {
			kinds.nodes[n.Type]--
			cu.Removed++
		}
	}
	for _, n := range w.nodes {
		if old := v.nodes[n.ID]; old != nil {
			kinds.nodes[old.Type]--
		}
		v.putNode(n)
		kinds.nodes[n.Type]++
		v.apart.set(n.Seq, false)
	}
	var added []*Edge
	for i, e := range w.edges {
		if old := atSeq(v.edgeSeq, e.Seq); e.Seq != 0 && old != nil && old.ID == e.ID {
			kinds.edges[old.Type]--
			inChunks[e.Seq] = e
		} else {
			added = append(added, e)
		}
		v.putLoadedEdge(e, &w.facts[i])
		kinds.edges[e.Type]++
		v.apart.set(e.Seq, false)
	}
	for _, seq := range w.apart {
		v.apart.set(seq, true)
	}
	for _, e := range w.episodes {
		v.putEpisode(e)
	}
	if len(inChunks) > 0 {
		for _, chunk := range v.loaded {
			for i, e := range chunk {
				if e == nil || e.Seq == 0 {
					continue
				}
				if x, ok := inChunks[e.Seq]; ok {
					chunk[i] = x
				}
			}
		}
	}
	if len(added) > 0 {
		v.loaded = append(v.loaded, added)
		v.loadedPending.Store(true)
	}
	return cu
}

// RecordRef names a node, an edge or an episode.
type RecordRef struct {
	Kind   RecordKind
	NS, ID string
	Seq    uint64
}

// SpanRef names a CMS span.
type SpanRef struct{ NS, ID string }

// Delta is what a store holds written after a version.
type Delta struct {
	// Records are the nodes, edges and episodes written since, Removed
	// the nodes and edges deleted since.
	Records, Removed []RecordRef
	// Spans are the CMS spans written since.
	Spans []SpanRef
	// vers are the Badger versions of Records, Removed and Spans, in
	// that order, that since filters by.
	vers [3][]uint64
}

// since returns d, what was written after some version, cut to what was
// written after version, a later one: the records, deletions and spans
// whose versions are newer. A record rewritten after both is in both;
// one deleted and written again is a record in both (its marker stands
// only while it is gone).
func (d Delta) since(version uint64) Delta {
	var out Delta
	out.Records = keepNewer(d.Records, d.vers[0], version, &out.vers[0])
	out.Removed = keepNewer(d.Removed, d.vers[1], version, &out.vers[1])
	out.Spans = keepNewer(d.Spans, d.vers[2], version, &out.vers[2])
	return out
}

// keepNewer returns the items of xs whose versions (vers, one for one)
// are after version, and their versions in *kept.
func keepNewer[T any](xs []T, vers []uint64, version uint64, kept *[]uint64) []T {
	var out []T
	for i, x := range xs {
		if vers[i] > version {
			out = append(out, x)
			*kept = append(*kept, vers[i])
		}
	}
	return out
}

// ChangedSince returns what the store holds written after Badger
// version version (a [Generation]'s): what an index derived from the
// store and saved at that version must drop or take again to match it
// (a vector index, the keyword index). It fails with
// [ErrDeletionsUnknown] when the deletions since are not known, as in a
// store in memory, which keeps no deletion markers. The answer is kept
// until the next commit (a start's indexes, saved at one shutdown, ask
// the same before ingest begins), and serves a later version too (a
// daemon's vector index and keyword documents, checkpointed at
// different versions, ask one after the other: asked first for the
// older, the store reads Badger once): its lists are shared and must
// not be changed.
func (s *Store) ChangedSince(version uint64) (Delta, error) {
	if s.opts.InMemory {
		return Delta{}, fmt.Errorf("particle: changed since version %d: %w", version, ErrDeletionsUnknown)
	}
	c := &s.changedSince
	c.mu.Lock()
	defer c.mu.Unlock()
	at := s.db.MaxVersion()
	if c.held.Load() && c.version <= version && c.at == at {
		if c.version == version {
			return c.delta, nil
		}
		return c.delta.since(version), nil
	}
	c.reads++
	d, err := s.changedSinceRead(version)
	if err == nil {
		c.version, c.at, c.delta = version, at, d
		c.held.Store(true)
	}
	return d, err
}

// readChangedAhead reads what changed since version (ChangedSince,
// which keeps the answer) in the background, for Options.ReadChangedSince.
func (s *Store) readChangedAhead(version uint64) {
	s.readAhead = make(chan struct{})
	go func() {
		defer close(s.readAhead)
		t := time.Now()
		d, err := s.ChangedSince(version)
		if err != nil {
			s.log.Warn("what changed since a version, read ahead, failed; it is read when asked", "since_version", version, "err", err)
			return
		}
		s.log.Info("read what changed since a version beside the view's load", "since_version", version,
			"records", len(d.Records), "removed", len(d.Removed), "took", time.Since(t))
	}()
}

// awaitReadAhead returns once Open's read for ReadChangedSince, if any,
// has ended.
func (s *Store) awaitReadAhead() {
	if s.readAhead != nil {
		<-s.readAhead
	}
}

// changedSinceCache keeps the last answer of ChangedSince until the
// next commit drops it: at a large catch-up, its lists of records hold
// megabytes the daemon needs only while it starts.
type changedSinceCache struct {
	mu          sync.Mutex
	held        atomic.Bool // an answer is kept (drop's check without the lock)
	version, at uint64      // asked since version, with Badger at at
	delta       Delta
	reads       int // of Badger, for the tests
}

// drop lets go of the answer kept, if any: a commit calls it.
func (c *changedSinceCache) drop() {
	if !c.held.Load() {
		return
	}
	c.mu.Lock()
	c.held.Store(false)
	c.delta = Delta{}
	c.mu.Unlock()
}

func (s *Store) changedSinceRead(version uint64) (Delta, error) {
	var out Delta
	err := s.db.View(func(txn *badger.Txn) error {
		w, err := readWritten(txn, version, func() {}, false)
		if err != nil {
			return err
		}
		out.Records, out.Spans = w.refs, w.spans
		out.vers[0], out.vers[2] = w.refVers, w.spanVers
		for _, g := range w.gone {
			kind := KindNode
			if g.table == prefixEdge {
				kind = KindEdge
			}
			out.Removed = append(out.Removed, RecordRef{Kind: kind, NS: g.ns, ID: g.id, Seq: g.seq})
			out.vers[1] = append(out.vers[1], g.ver)
		}
		return nil
	})
	if err != nil {
		return Delta{}, fmt.Errorf("particle: changed since version %d: %w", version, err)
	}
	return out, nil
}

// refOfValue decodes what names value b of table p (a node, an edge or
// an episode), without reading an embedding stored apart.
func refOfValue(p prefix, b []byte) (RecordRef, error) {
	switch {
	case p == prefixNode:
		n, _, err := decodeNodeApart(b, true)
		if err != nil {
			return RecordRef{}, err
		}
		return RecordRef{Kind: KindNode, NS: n.Namespace, ID: n.ID, Seq: n.Seq}, nil
	case p == prefixEdge:
		e, _, err := decodeEdgeApart(b, true)
		if err != nil {
			return RecordRef{}, err
		}
		return RecordRef{Kind: KindEdge, NS: e.Namespace, ID: e.ID, Seq: e.Seq}, nil
	default:
		e, err := decodeEpisodeAt(b, true)
		if err != nil {
			return RecordRef{}, err
		}
		return RecordRef{Kind: KindEpisode, NS: e.Namespace, ID: e.ID, Seq: e.Seq}, nil
	}
}
