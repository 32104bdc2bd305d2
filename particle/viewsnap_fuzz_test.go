package particle

import (
	"context"
	"hash/crc32"
	"os"
	"testing"
)

// FuzzViewSnapshotLoad loads damaged view snapshots: a seed snapshot of
// a small store, changed by the fuzzer, with its checksums made to
// match again (resealSnapshot; the checksums alone would refuse nearly
// every change before a decoder saw it: with them resealed, 86% of
// single-bit changes to the larger seed load, and the rest are refused
// by the decoders). A load (which joins the episodes' edge chunks too),
// and what Open does with a loaded view after it (linking the
// adjacency, indexing the edges, checking the edges' embeddings), must
// refuse it or take it, never panic or fault.
//
//	go test ./particle -run '^$' -fuzz FuzzViewSnapshotLoad -fuzztime 60s
func FuzzViewSnapshotLoad(f *testing.F) {
	for _, seed := range snapshotSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = resealSnapshot(b)
		if len(b) < trailerSize {
			return
		}
		tr, err := readSnapTrailer(b[len(b)-trailerSize:])
		if err != nil {
			return
		}
		// The load of a mapped snapshot, on b itself: a mapping per
		// input would stay mapped (a loaded view points into it), and
		// its file's disk space held, for the life of the process.
		v := newView()
		_, left, err := loadMapped(b, tr, 2, v, func() {})
		if err != nil {
			return
		}
		v.linkLoaded()
		v.awaitLinks()
		v.indexLoaded()
		stop := make(chan struct{})
		_, _, _ = left.check(stop, func([]byte, chunkEntry) error { return nil })
	})
}

// snapshotSeeds returns view snapshots of small stores: a hub's edges
// (putEdges) given embeddings of 8 floats, to keep the inputs small, and
// an episode of them, long enough in the larger store to have edge
// chunks of its own.
func snapshotSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, edges := range []int{3, 40} {
		dir := tb.TempDir()
		s, err := Open(DefaultOptions(dir))
		if err != nil {
			tb.Fatal(err)
		}
		ids := putEdges(tb, s, edges, 0)
		_, err = s.Update(context.Background(), func(b *Batch) error {
			hub := b.Node(EntityID(DefaultNamespace, NodeEntity, "hub"))
			hub.Embedding = []float32{1, 0, 0, 0, 0, 0, 0, 0}
			if err := b.PutNode(hub); err != nil {
				return err
			}
			for i, id := range ids {
				e := b.Edge(id)
				e.Embedding = []float32{0, 1, float32(i), 0, 0, 0, 0, 1}
				if err := b.PutEdge(e); err != nil {
					return err
				}
			}
			return b.PutEpisode(&Episode{ID: "ep-1", Agent: "robot-1", Edges: ids, Steps: len(ids)})
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.Close(); err != nil {
			tb.Fatal(err)
		}
		b, err := os.ReadFile(ViewSnapshotPath(dir))
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// resealSnapshot returns b with the checksums of a view snapshot made
// to match what it holds, as far as its trailer and directory can be
// read: every chunk's records and embeddings that lie inside b, the
// episodes' edge chunks, the edges' ends, the directory and the
// trailer. The magic and the format are set too. Anything it cannot
// place is left as it is.
func resealSnapshot(b []byte) []byte {
	if len(b) < trailerSize {
		return b
	}
	b = append([]byte(nil), b...)
	tb := b[len(b)-trailerSize:]
	t := snapTrailerFields(tb)
	size := uint64(len(b)) - trailerSize
	if t.listsOff <= size && t.listsLen <= size-t.listsOff {
		t.listsCRC = crc32.Checksum(b[t.listsOff:t.listsOff+t.listsLen], crcTable)
	}
	if t.endsOff <= size && t.endsLen <= size-t.endsOff {
		t.endsCRC = crc32.Checksum(b[t.endsOff:t.endsOff+t.endsLen], crcTable)
	}
	if t.chunks <= size/chunkEntrySize && t.dirOff <= size && t.chunks*chunkEntrySize+uint64(t.parts) == size-t.dirOff {
		tail := b[t.dirOff:size]
		for i := range t.chunks {
			at := tail[i*chunkEntrySize:][:chunkEntrySize]
			e := readChunkEntry(at)
			if e.off <= size && e.recLen <= size-e.off {
				e.crc = crc32.Checksum(b[e.off:e.off+e.recLen], crcTable)
				if start := e.off + align4(e.recLen); start <= size && e.floats <= (size-start)/4 {
					e.embCRC = crc32.Checksum(b[start:start+4*e.floats], crcTable)
				}
			}
			copy(at, e.append(nil))
		}
		t.dirCRC = crc32.Checksum(tail, crcTable)
	}
	copy(tb, t.append(nil))
	return b
}
