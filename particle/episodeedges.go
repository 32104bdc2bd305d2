package particle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
)

// An episode's edge list grows with every step that observes a new
// relation, and every batch that touches the episode wrote the whole
// list again with its record: a 4,000-step episode had written 62 MB of
// episode records against 21 MB of edges, and each batch near its end
// 29 KB a step. The list is therefore stored in two parts. Whole chunks
// of episodeEdgeChunk ids lie under their own keys (prefixEpisodeEdges,
// ns \0 id \0 chunk), each written once when it fills; the record holds
// the rest, fewer than episodeEdgeChunk ids, and the number of chunks
// (Episode.sealed). A record without chunks is the record as it always
// was. A change to the list other than appending (forgetting an edge)
// writes every chunk again and deletes those past the new count.
//
// In memory (the view, a batch, a Snapshot's answers) Edges is always
// the whole list: the load and the Snapshot's readers join the chunks
// to their records.

// episodeEdgeChunk is the number of edge ids in one stored chunk. The
// record's part, fewer than this, is what a batch writes again: a step
// committed alone (a steady stream) rewrites up to 31 ids, about a
// kilobyte, where a chunk of 128 left up to 4.7 KB a step.
const episodeEdgeChunk = 32

// maxEpisodeEdgeChunks bounds the chunk count a record may claim: the
// chunk numbers of the keys are 32-bit (an always-on robot's episode at
// 10 Hz and two new edges a step would take 200 years to pass it). The
// readers do not size anything by the claim beyond maxPresizeIDs, so a
// damaged count makes them read the chunks there are and fail, not
// allocate what it says.
const maxEpisodeEdgeChunks = 1<<32 - 1

// maxPresizeIDs bounds the room a reader makes for a chunked list before
// reading its chunks.
const maxPresizeIDs = 1 << 16

// episodeEdgesPrefix is the key prefix of the chunks of episode id.
func episodeEdgesPrefix(ns, id string) []byte { return append(key(prefixEpisodeEdges, ns, id), 0) }

// episodeEdgesKey is the key of chunk c of episode id's edge list.
func episodeEdgesKey(ns, id string, c int) []byte {
	return binary.BigEndian.AppendUint32(episodeEdgesPrefix(ns, id), uint32(c))
}

// encodeEdgeChunk encodes ids: a count, then each id's length and bytes.
func encodeEdgeChunk(ids []string) []byte {
	n := binary.MaxVarintLen64
	for _, id := range ids {
		n += binary.MaxVarintLen64 + len(id)
	}
	b := binary.AppendUvarint(make([]byte, 0, n), uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	return b
}

// appendEdgeChunk appends the ids chunk b holds to dst. inPlace, they
// alias b, which must then never change and outlive them (the view
// snapshot's mapping); else they are copies.
func appendEdgeChunk(dst []string, b []byte, inPlace bool) ([]string, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return dst, fmt.Errorf("%w: edge chunk count", ErrCorrupt)
	}
	b = b[k:]
	dst = slices.Grow(dst, int(n))
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return dst, fmt.Errorf("%w: edge chunk id", ErrCorrupt)
		}
		if id := b[k : k+int(l)]; inPlace && l > 0 {
			dst = append(dst, unsafe.String(&id[0], l))
		} else {
			dst = append(dst, string(id))
		}
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("%w: edge chunk: trailing bytes", ErrCorrupt)
	}
	return dst, nil
}

// appendStoredChunk appends the ids of the stored chunk whose value
// reads value, which must hold episodeEdgeChunk of them, to ids.
func appendStoredChunk(ids []string, value chunkValue, inPlace bool) ([]string, error) {
	err := value(func(v []byte) (err error) {
		n := len(ids)
		ids, err = appendEdgeChunk(ids, v, inPlace)
		if err == nil && len(ids)-n != episodeEdgeChunk {
			err = fmt.Errorf("%w: edge chunk of %d ids", ErrCorrupt, len(ids)-n)
		}
		return err
	})
	return ids, err
}

// putEpisode writes e's record and the chunks of its edge list that are
// not stored yet; old is the episode as committed (nil if new).
func (b *Batch) putEpisode(e, old *Episode) error {
	sealed := len(e.Edges) / episodeEdgeChunk
	keep := 0 // chunks stored that hold what they should
	if old != nil {
		keep = min(old.sealed, sealed)
		if n := keep * episodeEdgeChunk; !slices.Equal(e.Edges[:n], old.Edges[:n]) {
			keep = 0
		}
	}
	for c := keep; c < sealed; c++ {
		b.set(episodeEdgesKey(e.Namespace, e.ID, c), encodeEdgeChunk(e.Edges[c*episodeEdgeChunk:(c+1)*episodeEdgeChunk]))
	}
	if old != nil {
		for c := sealed; c < old.sealed; c++ {
			b.deleteKey(episodeEdgesKey(e.Namespace, e.ID, c))
		}
	}
	e.sealed = sealed
	rec := *e
	rec.Edges = e.Edges[sealed*episodeEdgeChunk:]
	v, err := encodeEpisodeV2(&rec, b.s.slab)
	if err != nil {
		return err
	}
	b.set(episodeKey(e.Namespace, e.ID), v)
	return nil
}

// parseEpisodeEdgesKey splits a chunk key (prefixEpisodeEdges ns \0 id
// \0 chunk) into its episode's ns \0 id and the chunk number.
func parseEpisodeEdgesKey(k []byte) (episode []byte, c int, ok bool) {
	if len(k) < 6 || k[len(k)-5] != 0 || !bytes.Contains(k[1:len(k)-5], []byte{0}) {
		return nil, 0, false
	}
	return k[1 : len(k)-5], int(binary.BigEndian.Uint32(k[len(k)-4:])), true
}

// edgeChunkJoin gathers the stored chunks of an episode's edge list (e,
// decoded from its record: Edges holds the rest) in chunk order, then
// puts them in front of its list.
type edgeChunkJoin struct {
	e       *Episode
	ids     []string
	inPlace bool // the ids alias the chunks' bytes (appendEdgeChunk)
}

func newEdgeChunkJoin(e *Episode, inPlace bool) *edgeChunkJoin {
	return &edgeChunkJoin{e: e, ids: make([]string, 0, min(e.sealed*episodeEdgeChunk, maxPresizeIDs)+len(e.Edges)), inPlace: inPlace}
}

// add takes stored chunk c; one past the record's count is left alone
// (Check reports it), one out of order means the one before is missing.
func (j *edgeChunkJoin) add(c int, value chunkValue) error {
	if c >= j.e.sealed {
		return nil
	}
	if want := len(j.ids) / episodeEdgeChunk; c != want {
		return fmt.Errorf("%w: episode %s: edge chunk %d missing", ErrCorrupt, j.e.ID, want)
	}
	var err error
	if j.ids, err = appendStoredChunk(j.ids, value, j.inPlace); err != nil {
		return fmt.Errorf("episode %s: %w", j.e.ID, err)
	}
	return nil
}

// finish checks that every chunk the record counts was added and joins
// them to the list.
func (j *edgeChunkJoin) finish() error {
	if got := len(j.ids) / episodeEdgeChunk; got != j.e.sealed {
		return fmt.Errorf("%w: episode %s: %d of %d edge chunks stored", ErrCorrupt, j.e.ID, got, j.e.sealed)
	}
	j.e.Edges = append(j.ids, j.e.Edges...)
	return nil
}

// joinEdgeChunks puts the chunks stored apart for e (decoded from its
// record, Edges holding the rest) in front of its edge list.
func joinEdgeChunks(txn *badger.Txn, e *Episode) error {
	if e.sealed == 0 {
		return nil
	}
	j := newEdgeChunkJoin(e, false)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: episodeEdgesPrefix(e.Namespace, e.ID)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if _, c, ok := parseEpisodeEdgesKey(it.Item().Key()); ok {
			if err := j.add(c, it.Item().Value); err != nil {
				return err
			}
		}
	}
	return j.finish()
}

// chunkValue reads a stored chunk's value, calling fn with its bytes
// (badger.Item.Value's shape).
type chunkValue func(fn func([]byte) error) error

// joinLoadedEdgeChunks joins their chunks to the loaded episodes that
// have any, in one pass over Badger's chunk table (joinChunkTable).
func joinLoadedEdgeChunks(txn *badger.Txn, v *view) error {
	return joinChunkTable(v, false, func(yield func(k []byte, value chunkValue) error) error {
		return eachEdgeChunk(txn, yield)
	})
}

// eachEdgeChunk passes the key and value of every stored edge chunk of
// txn (prefixEpisodeEdges), in key order, to yield.
func eachEdgeChunk(txn *badger.Txn, yield func(k []byte, value chunkValue) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(prefixEpisodeEdges)}, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if err := yield(it.Item().Key(), it.Item().Value); err != nil {
			return err
		}
	}
	return nil
}

// joinChunkTable joins their chunks to the loaded episodes that have
// any, in one pass over the chunk table, whose keys and values (in key
// order: by episode, then chunk number) each passes to yield, so that a
// store of many short chunked episodes opens without a look-up per
// episode. A chunk past its episode's count or of no episode is left
// alone (Check reports it); a missing one fails the load.
//
// inPlace, the ids alias the chunks' bytes, which must never change and
// outlive them (the view snapshot's mapping, which the loaded records'
// strings alias too): one allocation fewer per edge of every episode,
// each one more object for every collection to mark.
func joinChunkTable(v *view, inPlace bool, each func(yield func(k []byte, value chunkValue) error) error) error {
	var cur *edgeChunkJoin // of the episode of curKey, if it has chunks
	var curKey []byte
	err := each(func(k []byte, value chunkValue) error {
		ep, c, ok := parseEpisodeEdgesKey(k)
		if !ok {
			return nil // not a chunk key: Check reports it
		}
		if curKey == nil || !bytes.Equal(ep, curKey) {
			if cur != nil {
				if err := cur.finish(); err != nil {
					return fmt.Errorf("load episodes: %w", err)
				}
			}
			curKey, cur = append(curKey[:0], ep...), nil
			if e := v.episodes[string(ep)]; e != nil && e.sealed > 0 {
				cur = newEdgeChunkJoin(e, inPlace)
			}
		}
		if cur != nil {
			if err := cur.add(c, value); err != nil {
				return fmt.Errorf("load episodes: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if cur != nil {
		if err := cur.finish(); err != nil {
			return fmt.Errorf("load episodes: %w", err)
		}
	}
	// An episode none of whose chunks is stored was not met above.
	for _, e := range v.episodes {
		if e.sealed > 0 && len(e.Edges) < e.sealed*episodeEdgeChunk {
			return fmt.Errorf("%w: load episodes: episode %s: its %d edge chunks are not stored", ErrCorrupt, e.ID, e.sealed)
		}
	}
	return nil
}

// An episode's edge list meets most edges again: a step re-observes the
// robot's tool and the objects in view. HasID searched the list from the
// end, so an edge first seen early cost a scan of the whole list at every
// step that saw it again: a quarter of a 4,000-step episode's CPU. A long
// list (over edgeScanMax ids) is therefore indexed by id, with each id's
// place. The index belongs to the writer (batches run one at a time) and
// is shared by the view's episode and every batch's copy of it, which
// only add to it; an entry counts only where the list holding it has that
// id at that place, so that what a discarded batch added, or a list
// another batch grew differently, finds nothing. A change other than an
// append (Forget) drops the index, and an ended episode lets it go.

// edgeScanMax is the longest edge list HasEdge scans instead of indexing.
const edgeScanMax = 256

// HasEdge reports whether the episode lists edge id.
func (e *Episode) HasEdge(id string) bool {
	if len(e.Edges) <= edgeScanMax || e.Ended {
		return HasID(e.Edges, id)
	}
	if e.edgePos == nil {
		e.edgePos = make(map[string]int32, len(e.Edges)*5/4)
		for i, x := range e.Edges {
			if _, ok := e.edgePos[x]; !ok {
				e.edgePos[x] = int32(i)
			}
		}
	}
	return e.listsAt(id, e.edgePos[id])
}

// listsAt reports whether id is the list's edge at place p (an id absent
// from the index gives p 0).
func (e *Episode) listsAt(id string, p int32) bool {
	return int(p) < len(e.Edges) && e.Edges[p] == id
}

// AppendEdge adds edge id to the end of the episode's list.
func (e *Episode) AppendEdge(id string) {
	e.Edges = append(e.Edges, id)
	if e.edgePos == nil {
		return
	}
	if p, ok := e.edgePos[id]; !ok || !e.listsAt(id, p) {
		e.edgePos[id] = int32(len(e.Edges) - 1)
	}
}
