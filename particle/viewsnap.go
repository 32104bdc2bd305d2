package particle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxgraph/ctxgraph/wave"
)

// The view snapshot is a copy of the node, edge and episode tables that
// a store writes at Close (Options.ViewSnapshot) and the next Open loads
// instead of scanning Badger. Once read it is set aside (renamed with
// loadedSuffix): a Close with nothing written since the load puts it
// back (keepLoadedSnapshot) instead of writing it again, any other Close
// replaces it, and a run that dies before its Close leaves it for the
// next Open, which loads it and catches up with what Badger holds
// written since (catchup.go), as it does with any snapshot older than
// Badger. A snapshot that cannot catch up is removed.
//
// It holds Badger's values byte for byte, in the chunks the load puts
// into the view in key order, so a view loaded from it is the view a
// scan of Badger gives. Each format-2 value is stored without its
// embedding, each format-3 value as it is (its embedding lies apart in
// Badger too), and each chunk's embeddings lie after its records. A load
// maps the file (mapSnapshot) and the records' embeddings and strings
// point into the mapping, which lasts as long as the process: a 1M-edge
// store holds 1.6 GB of embeddings, and copying them into fresh heap
// pages was a large part of a reopen. The file set aside is removed
// when a new snapshot replaces it; its disk space comes back when the
// process ends.
//
//	chunk*    records: (tag uvarint, len uvarint, value)*, zeros to a
//	          multiple of 4 bytes, then the chunk's embeddings: float32
//	          little-endian
//	lists     the episodes' edge chunks (prefixEpisodeEdges): (key len
//	          uvarint, key, value len uvarint, value)* in key order
//	ends      by edge seq from 0, the seqs of the edge's source and
//	          target nodes as the view noted them (0: none): two
//	          uint32 little-endian each; empty when the writer had none
//	          to give or a seq did not fit
//	directory chunkEntrySize bytes per chunk, in load order
//	trailer   trailerSize bytes (snapTrailer)
//
// A record's tag is 0 for a value stored whole (format 1, or a format-2
// value that would not split), else twice the value's embedding count+1
// (0: nil) plus 1, plus 1 more when the embedding has unit length
// (wave.IsUnit, which the load would otherwise read every embedding to
// find out); its value then holds a nil embedding (format 2) or only the
// count (format 3). Every chunk's records carry a CRC-32C, its
// embeddings another, the directory too.
//
// A load reads the records and the node and episode embeddings (their
// checksums checked), and leaves the edges' embeddings (most of the
// file: 1.6 GB at 1M edges) in the file until something reads them:
// reading them all at the start, as the checksums would, was most of
// the start of a store whose files were not in the page cache. Their
// checksums are checked after the load, in the background
// (Store.CheckEmbeddings), and a chunk that fails has its embeddings
// read again from Badger. The episodes' edge chunks are in the snapshot
// too (the lists), so that a load reads nothing from Badger's value log:
// they lie scattered over it, and each read from it read ahead 8 MB.
// The edges' end nodes are in it too (the ends), so that the load
// links the adjacency without hashing two ids per edge (loadedEnds:
// 0.27-0.54 s of a warm 1M-edge start, on its serial path).
const (
	viewSnapshotName    = "view.snapshot"
	viewSnapshotMagic   = "ctxgview"
	viewSnapshotVersion = 4
	chunkEntrySize      = 4 + 4 + 1 + 4 + 8 + 8 + 8 + 4 + 4
	trailerSize         = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ViewSnapshotPath is where a store in dir keeps its view snapshot.
func ViewSnapshotPath(dir string) string { return filepath.Join(dir, viewSnapshotName) }

// ViewSnapshotToLoad is the view snapshot the next Open of a store in
// dir would load: the one at ViewSnapshotPath, else the one a run that
// died without its Close set aside ("" for none).
func ViewSnapshotToLoad(dir string) string {
	path := ViewSnapshotPath(dir)
	for _, p := range []string{path, path + loadedSuffix} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// snapChunk is a chunk's values as the snapshot stores them.
type snapChunk struct {
	rec    []byte
	emb    []byte
	values int
	// floats is scratch for an embedding decoded from its bytes.
	floats []float32
}

// snapChunks recycles the writer's chunk buffers (a chunk of edges holds
// about 1 MB).
var snapChunks sync.Pool

func newSnapChunk() snapChunk {
	if c, ok := snapChunks.Get().(*snapChunk); ok {
		return snapChunk{rec: c.rec[:0], emb: c.emb[:0], floats: c.floats}
	}
	return snapChunk{}
}

func (c *snapChunk) recycle() {
	snapChunks.Put(&snapChunk{rec: c.rec, emb: c.emb, floats: c.floats})
	*c = snapChunk{}
}

// align4 rounds n up to a multiple of 4: where a chunk's embeddings
// start after its records.
func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// add appends value b, its embedding apart when it has one to split.
func (c *snapChunk) add(b, vec []byte) {
	c.values++
	if countPlus1, ok := apartCount(b, vec); ok {
		// Format 3: the record as it is, its vector as the floats.
		c.rec = binary.AppendUvarint(c.rec, c.tag(countPlus1, vec))
		c.rec = appendSnapBytes(c.rec, b)
		c.emb = append(c.emb, vec...)
		return
	}
	rest, floats, countPlus1, ok := splitEmbedding(b)
	if !ok {
		c.rec = binary.AppendUvarint(c.rec, 0)
		c.rec = appendSnapBytes(c.rec, b)
		return
	}
	c.rec = binary.AppendUvarint(c.rec, c.tag(countPlus1, floats))
	c.rec = binary.AppendUvarint(c.rec, uint64(3+len(rest)))
	c.rec = append(c.rec, b[0], b[1], 0) // format, kind, nil embedding
	c.rec = append(c.rec, rest...)
	c.emb = append(c.emb, floats...)
}

// tag is the record tag of a split value whose embedding's count+1 is
// countPlus1 and whose floats (little-endian) are floats.
func (c *snapChunk) tag(countPlus1 uint64, floats []byte) uint64 {
	t := 2 * (countPlus1 + 1)
	if len(floats) > 0 {
		n := len(floats) / 4
		c.floats = slices.Grow(c.floats[:0], n)[:n]
		for i := range c.floats {
			c.floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(floats[4*i:]))
		}
		if wave.IsUnit(c.floats) {
			t++
		}
	}
	return t
}

// splitTag reads a split record's tag (not 0): its embedding's count+1
// and whether the embedding has unit length. ok is false for a tag no
// writer makes.
func splitTag(tag uint64) (countPlus1 uint64, unit, ok bool) {
	if tag < 2 {
		return 0, false, false
	}
	return tag/2 - 1, tag&1 == 1, true
}

// apartCount reads the embedding's count+1 (0: nil) of format-3 value b,
// whose vector is vec. ok is false when b is not a format-3 value or vec
// does not hold the floats it counts (the record is then stored whole,
// and its load reports why).
func apartCount(b, vec []byte) (countPlus1 uint64, ok bool) {
	if len(b) < 3 || b[0] != formatV3 {
		return 0, false
	}
	countPlus1, n := binary.Uvarint(b[2:])
	if n <= 0 || countPlus1 > maxVectorLen+1 {
		return 0, false
	}
	if countPlus1 <= 1 {
		return countPlus1, vec == nil
	}
	return countPlus1, uint64(len(vec)) == 4*(countPlus1-1)
}

// splitEmbedding cuts format-2 value b into the embedding's count+1 (0:
// nil), its floats' bytes and the fields after them. ok is false when b
// is not a format-2 value with a whole embedding.
func splitEmbedding(b []byte) (rest, floats []byte, countPlus1 uint64, ok bool) {
	if len(b) < 3 || b[0] != formatV2 {
		return nil, nil, 0, false
	}
	countPlus1, n := binary.Uvarint(b[2:])
	if n <= 0 {
		return nil, nil, 0, false
	}
	start := 2 + n
	if countPlus1 == 0 {
		return b[start:], nil, 0, true
	}
	if countPlus1-1 > uint64(len(b)-start)/4 {
		return nil, nil, 0, false
	}
	end := start + 4*int(countPlus1-1)
	return b[end:], b[start:end], countPlus1, true
}

// chunkEntry is a chunk's line in the directory.
type chunkEntry struct {
	part, idx uint32
	last      bool
	values    uint32
	off       uint64 // of its records in the file
	recLen    uint64 // without the padding after them
	floats    uint64 // after its records and their padding
	crc       uint32 // of its records
	embCRC    uint32 // of its embeddings' bytes
}

// embeddings returns e's embeddings' bytes in the snapshot mem.
func (e chunkEntry) embeddings(mem []byte) []byte {
	start := e.off + align4(e.recLen)
	return mem[start : start+4*e.floats]
}

func (e chunkEntry) append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, e.part)
	b = binary.LittleEndian.AppendUint32(b, e.idx)
	last := byte(0)
	if e.last {
		last = 1
	}
	b = append(b, last)
	b = binary.LittleEndian.AppendUint32(b, e.values)
	b = binary.LittleEndian.AppendUint64(b, e.off)
	b = binary.LittleEndian.AppendUint64(b, e.recLen)
	b = binary.LittleEndian.AppendUint64(b, e.floats)
	b = binary.LittleEndian.AppendUint32(b, e.crc)
	return binary.LittleEndian.AppendUint32(b, e.embCRC)
}

func readChunkEntry(b []byte) chunkEntry {
	le := binary.LittleEndian
	return chunkEntry{part: le.Uint32(b), idx: le.Uint32(b[4:]), last: b[8] == 1, values: le.Uint32(b[9:]),
		off: le.Uint64(b[13:]), recLen: le.Uint64(b[21:]), floats: le.Uint64(b[29:]), crc: le.Uint32(b[37:]),
		embCRC: le.Uint32(b[41:])}
}

// snapTrailer ends the file.
// It starts with the magic and the format, and ends with its own CRC;
// the directory ends with each key range's table (a byte each).
type snapTrailer struct {
	parts   uint32 // key ranges
	chunks  uint64 // directory entries
	version uint64 // Badger's MaxVersion when the snapshot was taken
	floats  uint64 // all chunks' embeddings
	dirOff  uint64 // where the directory starts
	dirCRC  uint32 // of the directory and the key ranges' tables
	// The episodes' edge chunks: where, how many bytes, their CRC.
	listsOff, listsLen uint64
	listsCRC           uint32
	// The ends: where, how many bytes, their CRC.
	endsOff, endsLen uint64
	endsCRC          uint32
}

func (t snapTrailer) append(b []byte) []byte {
	start := len(b)
	b = append(b, viewSnapshotMagic...)
	b = binary.LittleEndian.AppendUint32(b, viewSnapshotVersion)
	b = binary.LittleEndian.AppendUint32(b, t.parts)
	b = binary.LittleEndian.AppendUint64(b, t.chunks)
	b = binary.LittleEndian.AppendUint64(b, t.version)
	b = binary.LittleEndian.AppendUint64(b, t.floats)
	b = binary.LittleEndian.AppendUint64(b, t.dirOff)
	b = binary.LittleEndian.AppendUint32(b, t.dirCRC)
	b = binary.LittleEndian.AppendUint64(b, t.listsOff)
	b = binary.LittleEndian.AppendUint64(b, t.listsLen)
	b = binary.LittleEndian.AppendUint32(b, t.listsCRC)
	b = binary.LittleEndian.AppendUint64(b, t.endsOff)
	b = binary.LittleEndian.AppendUint64(b, t.endsLen)
	b = binary.LittleEndian.AppendUint32(b, t.endsCRC)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

func readSnapTrailer(b []byte) (snapTrailer, error) {
	le := binary.LittleEndian
	switch {
	case len(b) != trailerSize || string(b[:8]) != viewSnapshotMagic:
		return snapTrailer{}, errors.New("not a view snapshot")
	case le.Uint32(b[trailerSize-4:]) != crc32.Checksum(b[:trailerSize-4], crcTable):
		return snapTrailer{}, errors.New("trailer checksum mismatch")
	case le.Uint32(b[8:]) != viewSnapshotVersion:
		return snapTrailer{}, fmt.Errorf("snapshot format %d, want %d", le.Uint32(b[8:]), viewSnapshotVersion)
	}
	return snapTrailerFields(b), nil
}

// snapTrailerFields decodes the fields of trailer b (trailerSize bytes)
// without checking its magic, format or checksum.
func snapTrailerFields(b []byte) snapTrailer {
	le := binary.LittleEndian
	return snapTrailer{parts: le.Uint32(b[12:]), chunks: le.Uint64(b[16:]), version: le.Uint64(b[24:]),
		floats: le.Uint64(b[32:]), dirOff: le.Uint64(b[40:]), dirCRC: le.Uint32(b[48:]),
		listsOff: le.Uint64(b[52:]), listsLen: le.Uint64(b[60:]), listsCRC: le.Uint32(b[68:]),
		endsOff: le.Uint64(b[72:]), endsLen: le.Uint64(b[80:]), endsCRC: le.Uint32(b[88:])}
}

// writeViewSnapshot writes the node, edge and episode tables of db to
// path (through a temporary file, then renamed), as of one read
// transaction, stamped with that transaction's read timestamp (which it
// returns: the snapshot holds every version up to it), with the ends
// that ends returns once the tables are written: the end nodes' seqs of
// each edge by seq as the view keeps them (view.ends; nil for none: the
// load then finds them by id). A seq the view noted is its node's for
// good (seqs are never reused), and the load looks up by id an end noted
// as none or whose node is gone (view.snapshotEnds), so ends taken while
// commits go on (a checkpoint) serve as well as ones taken with nothing
// writing (Close). The tables are scanned by workers goroutines, and the
// write stops with ctx's error once ctx ends. It returns the bytes
// written. The file is not synced: it is a cache of what Badger holds,
// and a file that a crash left half written fails its checksums, so the
// next start loads from Badger (syncing 2 GB took seconds of a 1M-edge
// store's shutdown).
func writeViewSnapshot(ctx context.Context, db *badger.DB, path string, ends func() []edgeEnds, workers int) (size int64, version uint64, err error) {
	if !littleEndian {
		return 0, 0, errors.New("view snapshot: big-endian host")
	}
	workers = max(1, workers)
	parts := loadParts(db, 4*workers)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, 0, fmt.Errorf("view snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var dir []chunkEntry
	var off, floats uint64
	// Chunks (about 1 MB) go to the file as they are, unbuffered.
	write := func(c *loadChunk) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := &c.snap
		e := chunkEntry{part: uint32(c.part), idx: uint32(c.idx), last: c.last, values: uint32(s.values),
			off: off, recLen: uint64(len(s.rec)), floats: uint64(len(s.emb) / 4)}
		e.crc, e.embCRC = crc32.Checksum(s.rec, crcTable), crc32.Checksum(s.emb, crcTable)
		s.rec = append(s.rec, make([]byte, align4(e.recLen)-e.recLen)...)
		if _, err := f.Write(s.rec); err != nil {
			return err
		}
		if _, err := f.Write(s.emb); err != nil {
			return err
		}
		off += uint64(len(s.rec) + len(s.emb))
		floats += e.floats
		dir = append(dir, e)
		s.recycle()
		return nil
	}
	var listsOff, listsLen uint64
	var listsCRC uint32
	err = db.View(func(txn *badger.Txn) error {
		version = txn.ReadTs()
		if err := drainChunks(workers, func(done chan<- *loadChunk, quit <-chan struct{}) error {
			sc := scanner{txn: txn, done: done, quit: quit, sink: func(c *loadChunk, _ loadPart) func(b, vec []byte) error {
				c.snap = newSnapChunk()
				return func(b, vec []byte) error { c.snap.add(b, vec); return nil }
			}}
			return sc.parts(parts, workers)
		}, write); err != nil {
			return err
		}
		listsOff = off
		var err error
		listsLen, listsCRC, err = writeEdgeChunkTable(txn, f)
		off += listsLen
		return err
	})
	endsOff := off
	var endsLen uint64
	var endsCRC uint32
	if err == nil {
		table := appendEnds(nil, ends())
		if _, err = f.Write(table); err == nil {
			endsLen, endsCRC = uint64(len(table)), crc32.Checksum(table, crcTable)
			off += endsLen
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("view snapshot: %w", err)
	}
	// Load order: the put takes chunks in this order, so the reader
	// hands them out in it.
	slices.SortFunc(dir, func(a, b chunkEntry) int {
		if a.part != b.part {
			return int(a.part) - int(b.part)
		}
		return int(a.idx) - int(b.idx)
	})
	var tail []byte
	for _, e := range dir {
		tail = e.append(tail)
	}
	for _, p := range parts {
		tail = append(tail, byte(p.table))
	}
	t := snapTrailer{parts: uint32(len(parts)), chunks: uint64(len(dir)), version: version, floats: floats,
		dirOff: off, dirCRC: crc32.Checksum(tail, crcTable), listsOff: listsOff, listsLen: listsLen, listsCRC: listsCRC,
		endsOff: endsOff, endsLen: endsLen, endsCRC: endsCRC}
	tail = t.append(tail)
	if _, err = f.Write(tail); err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("view snapshot: %w", err)
	}
	return int64(off) + int64(len(tail)), version, nil
}

// appendEnds appends the snapshot's ends table of ends to b: nothing if
// a seq does not fit 32 bits.
func appendEnds(b []byte, ends []edgeEnds) []byte {
	for _, x := range ends {
		if x.source > math.MaxUint32 || x.target > math.MaxUint32 {
			return b
		}
	}
	b = slices.Grow(b, 8*len(ends))
	for _, x := range ends {
		b = binary.LittleEndian.AppendUint32(b, uint32(x.source))
		b = binary.LittleEndian.AppendUint32(b, uint32(x.target))
	}
	return b
}

// readEnds decodes an ends table (nil for an empty one).
func readEnds(b []byte) []edgeEnds {
	if len(b) == 0 {
		return nil
	}
	ends := make([]edgeEnds, len(b)/8)
	for i := range ends {
		ends[i] = edgeEnds{source: uint64(binary.LittleEndian.Uint32(b[8*i:])), target: uint64(binary.LittleEndian.Uint32(b[8*i+4:]))}
	}
	return ends
}

// writeEdgeChunkTable writes the episodes' edge chunks of txn to w (the
// snapshot's lists) and returns the bytes written and their CRC.
func writeEdgeChunkTable(txn *badger.Txn, w io.Writer) (n uint64, crc uint32, err error) {
	var buf []byte
	flush := func() error {
		if _, err := w.Write(buf); err != nil {
			return err
		}
		n += uint64(len(buf))
		crc = crc32.Update(crc, crcTable, buf)
		buf = buf[:0]
		return nil
	}
	err = eachEdgeChunk(txn, func(k []byte, value chunkValue) error {
		buf = appendSnapBytes(buf, k)
		if err := value(func(v []byte) error { buf = appendSnapBytes(buf, v); return nil }); err != nil {
			return err
		}
		if len(buf) >= 1<<20 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return n, crc, err
}

// joinSnapshotEdgeChunks joins the episodes' edge chunks of a snapshot's
// lists to the loaded episodes of v (joinChunkTable).
func joinSnapshotEdgeChunks(lists []byte, v *view) error {
	return joinChunkTable(v, true, func(yield func(k []byte, value chunkValue) error) error {
		for at := 0; at < len(lists); {
			k, n := snapBytes(lists[at:])
			if n <= 0 {
				return fmt.Errorf("%w: view snapshot: an edge chunk's key", ErrCorrupt)
			}
			at += n
			val, n := snapBytes(lists[at:])
			if n <= 0 {
				return fmt.Errorf("%w: view snapshot: an edge chunk's value", ErrCorrupt)
			}
			at += n
			if err := yield(k, func(fn func([]byte) error) error { return fn(val) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// appendSnapBytes appends s to b as a length-prefixed byte string (read
// back by snapBytes).
func appendSnapBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// snapBytes reads a length-prefixed byte string from b and returns it
// and the bytes it took, n <= 0 if b does not hold one.
func snapBytes(b []byte) (s []byte, n int) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, 0
	}
	return b[n : n+int(l)], n + int(l)
}

// errSnapshotAhead is readViewSnapshot's error for a snapshot taken at a
// later version than the store's: not of this store's history.
var errSnapshotAhead = errors.New("the snapshot is newer than the store")

// readViewSnapshot loads the snapshot at path into v with n decoders, if
// it was taken at Badger version version or before, and returns the
// edges' embeddings the load left to check and the snapshot's version
// (below version, the view is to catch up: catchup.go). The caller
// discards v after an error.
func readViewSnapshot(path string, version uint64, n int, v *view, legacy func()) (loadCounts, *snapEdgeEmbeddings, uint64, error) {
	if !littleEndian {
		return loadCounts{}, nil, 0, errors.New("big-endian host")
	}
	f, err := os.Open(path)
	if err != nil {
		return loadCounts{}, nil, 0, err
	}
	defer f.Close()
	t, size, err := fileTrailer(f)
	if err != nil {
		return loadCounts{}, nil, 0, err
	}
	if t.version > version {
		return loadCounts{}, nil, 0, fmt.Errorf("%w (snapshot at version %d, store at %d)", errSnapshotAhead, t.version, version)
	}
	mem, unmap, err := mapSnapshot(f, int(size))
	if err != nil {
		return loadCounts{}, nil, 0, err
	}
	counts, left, err := loadMapped(mem, t, n, v, legacy)
	if err != nil {
		unmap() // v, which points into mem, is discarded
		return loadCounts{}, nil, 0, err
	}
	return counts, left, t.version, nil
}

// loadMapped loads the snapshot in mem, whose trailer is t, into v, and
// returns what is left to do.
func loadMapped(mem []byte, t snapTrailer, n int, v *view, legacy func()) (loadCounts, *snapEdgeEmbeddings, error) {
	size := uint64(len(mem)) - trailerSize
	dirLen := t.chunks*chunkEntrySize + uint64(t.parts)
	if t.chunks > size/chunkEntrySize || t.dirOff > size || dirLen != size-t.dirOff {
		return loadCounts{}, nil, errors.New("directory out of bounds")
	}
	if t.listsOff > t.dirOff || t.listsLen > t.dirOff-t.listsOff {
		return loadCounts{}, nil, errors.New("edge chunks out of bounds")
	}
	if t.endsOff > t.dirOff || t.endsLen > t.dirOff-t.endsOff || t.endsLen%8 != 0 {
		return loadCounts{}, nil, errors.New("edge ends out of bounds")
	}
	tail := mem[t.dirOff:size]
	if crc32.Checksum(tail, crcTable) != t.dirCRC {
		return loadCounts{}, nil, errors.New("directory checksum mismatch")
	}
	dir := make([]chunkEntry, t.chunks)
	var floats uint64
	for i := range dir {
		e := readChunkEntry(tail[i*chunkEntrySize:])
		if e.part >= t.parts || e.off > t.dirOff || e.recLen > t.dirOff-e.off || align4(e.recLen) > t.dirOff-e.off ||
			e.floats > (t.dirOff-e.off-align4(e.recLen))/4 || uint64(e.values) > e.recLen {
			return loadCounts{}, nil, fmt.Errorf("chunk %d out of bounds", i)
		}
		dir[i] = e
		floats += e.floats
	}
	tables := tail[t.chunks*chunkEntrySize:]
	for _, tb := range tables {
		if int(tb) >= len(loadTables) {
			return loadCounts{}, nil, fmt.Errorf("key range of table %d", tb)
		}
	}
	if floats != t.floats {
		return loadCounts{}, nil, fmt.Errorf("chunks hold %d floats, trailer says %d", floats, t.floats)
	}
	lists := mem[t.listsOff : t.listsOff+t.listsLen]
	// What the load reads, asked for ahead of its decoders (the mapping
	// reads nothing ahead of its own: mapSnapshot). A failed load stops
	// it and waits for it: the caller then unmaps mem.
	ahead := startReadAhead(mem, dir, tables, lists)
	var next atomic.Int64
	put := newChunkPutter(v, int(t.parts))
	err := drainChunks(n, func(done chan<- *loadChunk, quit <-chan struct{}) error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for w := range n {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(dir) {
						return
					}
					e := dir[i]
					c := &loadChunk{part: int(e.part), idx: int(e.idx), last: e.last}
					if err := readChunk(mem, e, loadTables[tables[e.part]].p, c, legacy); err != nil {
						errs[w] = fmt.Errorf("chunk %d: %w", i, err)
						return
					}
					select {
					case done <- c:
					case <-quit:
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}, put.put)
	counts, finished := put.finish()
	if err == nil {
		err = finished
	}
	// (The lists are checked after the load: the mapping reads nothing
	// ahead, and the lists are read ahead after the chunks.) Lists that
	// pass their checksum but cannot be joined (a snapshot written
	// wrong) fail the load like a damaged snapshot.
	if err == nil && crc32.Checksum(lists, crcTable) != t.listsCRC {
		err = errors.New("edge chunks' checksum mismatch")
	}
	if err == nil {
		err = joinSnapshotEdgeChunks(lists, v)
	}
	if ends := mem[t.endsOff : t.endsOff+t.endsLen]; err == nil && crc32.Checksum(ends, crcTable) != t.endsCRC {
		err = errors.New("edge ends' checksum mismatch")
	} else if err == nil {
		v.snapEnds = readEnds(ends)
	}
	if err != nil {
		ahead.stop()
		return loadCounts{}, nil, err
	}
	left := &snapEdgeEmbeddings{mem: mem}
	for _, e := range dir {
		if loadTables[tables[e.part]].p == prefixEdge && e.floats > 0 {
			left.chunks = append(left.chunks, e)
		}
	}
	return counts, left, nil
}

// readAhead is the goroutine that asks the kernel to read ahead, in
// load order, what a load reads of the snapshot in mem: every chunk's
// records, the embeddings of the chunks of tables other than edges, then
// the episodes' edge lists.
type readAhead struct {
	quit atomic.Bool
	done chan struct{}
}

// beforeReadAhead, when set (by tests), runs before the read-ahead asks
// for each chunk.
var beforeReadAhead func()

// startReadAhead starts the read-ahead of a load of the snapshot in mem
// whose directory is dir.
func startReadAhead(mem []byte, dir []chunkEntry, tables, lists []byte) *readAhead {
	ra := &readAhead{done: make(chan struct{})}
	go func() {
		defer close(ra.done)
		for _, e := range dir {
			if beforeReadAhead != nil {
				beforeReadAhead()
			}
			if ra.quit.Load() {
				return
			}
			end := e.off + e.recLen
			if loadTables[tables[e.part]].p != prefixEdge {
				end = e.off + align4(e.recLen) + 4*e.floats
			}
			willNeed(mem[e.off:end])
		}
		willNeed(lists)
	}()
	return ra
}

// stop ends the read-ahead and waits for it to end. A failed load calls
// it before its caller unmaps the snapshot: the read-ahead reads the
// mapping (the chunks' tables), and a read of it once unmapped is a
// fault that kills the process.
func (ra *readAhead) stop() {
	ra.quit.Store(true)
	<-ra.done
}

// readChunk checks chunk e of the snapshot in mem and decodes its values
// of table p into c, their embeddings pointing into mem. The embeddings
// of a chunk of edges are neither read nor checked here
// (snapEdgeEmbeddings.check).
func readChunk(mem []byte, e chunkEntry, p prefix, c *loadChunk, legacy func()) error {
	if crc32.Checksum(mem[e.off:e.off+e.recLen], crcTable) != e.crc {
		return errors.New("checksum mismatch")
	}
	if p != prefixEdge && crc32.Checksum(e.embeddings(mem), crcTable) != e.embCRC {
		return errors.New("embeddings' checksum mismatch")
	}
	c.presize(p, int(e.values))
	c.mem = mem
	return walkChunk(mem, e, func(tag uint64, b []byte, x []float32) error {
		if tag == 0 {
			return c.add(p, b, nil, legacy, nil, false, false)
		}
		_, unit, _ := splitTag(tag) // (walkChunk checked it)
		return c.add(p, b, nil, legacy, x, true, unit)
	})
}

// loadedSuffix names the view snapshot a store loaded, set aside while
// the store runs.
const loadedSuffix = ".loaded"

// saveViewSnapshot writes the store's view snapshot at Close, logging
// the outcome: the snapshot only speeds the next Open up. When unwritten
// (the view came from the snapshot and nothing was written since), the
// snapshot set aside at the load is put back instead: writing a 1M-edge
// store's again took 8-26 s of its shutdown and 2.2 GB of disk writes.
//
// The next start holds the snapshot's disk space while it runs (its
// embeddings and strings stay mapped from the file, removed or not), so a
// snapshot that leaves less free space than its own size is removed: the
// graph's writes would then be the ones to run out of disk.
func (s *Store) saveViewSnapshot(unwritten bool) {
	t := time.Now()
	path := ViewSnapshotPath(s.opts.Dir)
	if unwritten {
		err := keepLoadedSnapshot(path, s.db.MaxVersion())
		if err == nil {
			s.log.Info("view snapshot kept: nothing was written since it was loaded", "took", time.Since(t))
			return
		}
		s.log.Info("view snapshot loaded not kept; writing it again", "err", err)
	}
	size, _, err := writeViewSnapshot(context.Background(), s.db, path, func() []edgeEnds { return s.v.ends }, runtime.GOMAXPROCS(0))
	removeFiles(s.log, path+loadedSuffix) // replaced (or, on an error, stale)
	if err != nil {
		s.log.Warn("view snapshot not written; the next start loads from the store", "err", err)
		return
	}
	if free, ok := freeSpace(s.opts.Dir); ok && free < uint64(size) {
		s.dropViewSnapshot()
		s.log.Warn("view snapshot removed: the disk would keep less free space than the snapshot takes while the next start runs; the next start loads from the store",
			"bytes", size, "free_bytes", free)
		return
	}
	s.log.Info("view snapshot written", "bytes", size, "took", time.Since(t))
}

// freeSpace is the disk space free to this process in dir's file system
// (ok false where unknown); a variable for tests.
var freeSpace = diskFree

// dropViewSnapshot removes the view snapshot, and the temporary file of
// one that a shutdown died while writing. A store opened without
// snapshots drops one too: its writes would make it stale.
func (s *Store) dropViewSnapshot() {
	path := ViewSnapshotPath(s.opts.Dir)
	removeFiles(s.log, path, path+".tmp", path+loadedSuffix)
}

// removeFiles removes the files at paths that exist, logging a failure.
func removeFiles(log *slog.Logger, paths ...string) {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("view snapshot not removed", "path", p, "err", err)
		}
	}
}

// fileTrailer reads and checks the trailer of the view snapshot f, and
// returns it with the file's size.
func fileTrailer(f *os.File) (snapTrailer, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return snapTrailer{}, 0, err
	}
	size := uint64(st.Size())
	if size < trailerSize || size > uint64(math.MaxInt) {
		return snapTrailer{}, 0, errors.New("not a view snapshot")
	}
	tb := make([]byte, trailerSize)
	if _, err := f.ReadAt(tb, int64(size-trailerSize)); err != nil {
		return snapTrailer{}, 0, err
	}
	t, err := readSnapTrailer(tb)
	return t, size, err
}

// keepLoadedSnapshot puts back the view snapshot set aside at the load,
// stamped with Badger's version version: the store wrote nothing to its
// tables since, so it still holds them.
func keepLoadedSnapshot(path string, version uint64) error {
	aside := path + loadedSuffix
	f, err := os.OpenFile(aside, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	t, size, err := fileTrailer(f)
	if err != nil {
		return err
	}
	t.version = version
	if _, err := f.WriteAt(t.append(nil), int64(size-trailerSize)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(aside, path)
}

// loadViewSnapshot loads the view snapshot into v if there is one
// taken at Badger version version or before (a snapshot a crashed run
// set aside, when there is no other), and sets it aside. It reports
// whether v holds the store's view as of the snapshot's version, which
// it returns; if not, v is to be discarded.
func (s *Store) loadViewSnapshot(v *view, version uint64, legacy func()) (loadCounts, *snapEdgeEmbeddings, uint64, bool) {
	t := time.Now()
	path := ViewSnapshotPath(s.opts.Dir)
	file := ViewSnapshotToLoad(s.opts.Dir) // else the one a run that died without its Close loaded
	if file == "" {
		file = path
	}
	counts, left, base, err := readViewSnapshot(file, version, max(1, runtime.GOMAXPROCS(0)), v, legacy)
	switch {
	case err == nil && file == path:
		// Set aside (over one a crash left), not removed: Close may put
		// it back, and a run that dies before its Close catches up from
		// it at the next start. A store that cannot rename it loads the
		// same, and writes its snapshot at Close.
		if rerr := os.Rename(path, path+loadedSuffix); rerr != nil {
			s.log.Warn("view snapshot not set aside; removing it", "err", rerr)
		}
		removeFiles(s.log, path, path+".tmp") // and a temporary file a dead shutdown left, if any
	case err == nil:
		removeFiles(s.log, path+".tmp")
	default:
		s.dropViewSnapshot() // and what a crashed run set aside
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return loadCounts{}, nil, 0, false
	case err != nil:
		s.log.Warn("view snapshot unreadable; loading from the store", "err", err)
		return loadCounts{}, nil, 0, false
	}
	s.log.Info("view loaded from its snapshot", "took", time.Since(t), "set_aside_by_a_crash", file != path, "behind", base < version)
	return counts, left, base, true
}
