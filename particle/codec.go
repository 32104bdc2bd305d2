package particle

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// Format 1 stores a value as
//
//	format u8 (=1) | json length u32 BE | json | embedding: n u32 BE, n × float32 LE
//
// The embedding travels outside the JSON so that 384 floats cost 1.5 KB,
// not 4 KB of decimal text, and decode without parsing. Counts are still
// written so; nodes, edges and episodes were, before format 2.
const formatV1 byte = 1

// encodeValue encodes v, whose embedding (if any) the caller passes apart.
func encodeValue(v any, emb []float32) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	out := make([]byte, 0, 1+4+len(js)+4+4*len(emb))
	out = append(out, formatV1)
	out = binary.BigEndian.AppendUint32(out, uint32(len(js)))
	out = append(out, js...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(emb)))
	for _, f := range emb {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out, nil
}

// decodeValue decodes into v and returns the embedding trailer. It copies
// everything it keeps: b may be reused by the caller.
func decodeValue(b []byte, v any) ([]float32, error) {
	if len(b) < 9 || b[0] != formatV1 {
		return nil, fmt.Errorf("%w: value header", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 0 || 5+n+4 > len(b) {
		return nil, fmt.Errorf("%w: value length %d of %d bytes", ErrCorrupt, n, len(b))
	}
	if err := json.Unmarshal(b[5:5+n], v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	rest := b[5+n:]
	m := int(binary.BigEndian.Uint32(rest[:4]))
	rest = rest[4:]
	if m < 0 || len(rest) != 4*m {
		return nil, fmt.Errorf("%w: embedding of %d floats in %d bytes", ErrCorrupt, m, len(rest))
	}
	if m == 0 {
		return nil, nil
	}
	emb := make([]float32, m)
	for i := range emb {
		emb[i] = math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:]))
	}
	return emb, nil
}

// Nodes and edges are written in format 3, episodes in format 2
// (codecv2.go); the decoders read every format, so a store written before
// keeps opening.

// encodeNode and encodeEdge encode in format 2, whole: for a record kept
// out of the graph (an archived node or edge), which has no vector key.
func encodeNode(n *Node) ([]byte, error) { return encodeNodeV2(n, nil, false) }

func encodeEdge(e *Edge) ([]byte, error) { return encodeEdgeV2(e, nil, false) }

func encodeEpisode(e *Episode) ([]byte, error) { return encodeEpisodeV2(e, nil) }

// valueSlab hands out the buffers a batch encodes its values into,
// carved from chunks that the store reuses batch after batch. Badger
// keeps a reference to a value only until the end of its transaction
// (Txn.Set), so once Update has committed or discarded, the chunks are
// free: an ingest batch (about 10 MB of values a thousand steps) then
// neither allocates nor zeroes them, and the GC sees that much less.
type valueSlab struct {
	cur  []byte   // the chunk being carved, len = bytes handed out
	used [][]byte // chunks handed out from, cur last
	free [][]byte // chunks to carve next
}

// slabChunk is a chunk's size; a value over a quarter of it gets its
// own heap buffer.
const slabChunk = 256 << 10

// maxSlabChunks bounds what the store keeps between batches (16 MB).
const maxSlabChunks = 64

// alloc returns an empty buffer with room for n bytes. A nil slab
// allocates from the heap.
func (s *valueSlab) alloc(n int) []byte {
	if s == nil || n > slabChunk/4 {
		return make([]byte, 0, n)
	}
	if cap(s.cur)-len(s.cur) < n {
		if k := len(s.free); k > 0 {
			s.cur = s.free[k-1][:0]
			s.free = s.free[:k-1]
		} else {
			s.cur = make([]byte, 0, slabChunk)
		}
		s.used = append(s.used, nil)
	}
	at := len(s.cur)
	s.cur = s.cur[:at+n]
	s.used[len(s.used)-1] = s.cur
	return s.cur[at : at : at+n] // full slice: an append past n moves out
}

// reset makes every chunk free again. Only once nothing reads a value
// handed out.
func (s *valueSlab) reset() {
	if s == nil {
		return
	}
	for _, c := range s.used {
		if len(s.free) < maxSlabChunks {
			s.free = append(s.free, c[:0])
		}
	}
	clear(s.used)
	s.used, s.cur = s.used[:0], nil
}

// decodeNode decodes a stored node. vec is what its vector key holds
// (nil when there is none): a format-3 node takes its embedding from it.
func decodeNode(b, vec []byte) (*Node, error) { return decodeNodeAt(b, vec, false) }

// decodeNodeAt is decodeNode; inPlace, a format-2 or format-3 value's
// strings alias b.
func decodeNodeAt(b, vec []byte, inPlace bool) (*Node, error) {
	if isBinary(b) {
		n, apart, err := decodeNodeV2(b, inPlace)
		if err != nil {
			return nil, err
		}
		if apart > 0 {
			if n.Embedding, err = vectorOf(vec, apart); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.ID, err)
			}
		}
		return n, nil
	}
	var n Node
	emb, err := decodeValue(b, &n)
	if err != nil {
		return nil, err
	}
	n.Embedding = emb
	return &n, nil
}

// decodeEdge decodes a stored edge, as decodeNode a node.
func decodeEdge(b, vec []byte) (*Edge, error) { return decodeEdgeAt(b, vec, false) }

// decodeEdgeAt is decodeEdge; inPlace, a format-2 or format-3 value's
// strings alias b.
func decodeEdgeAt(b, vec []byte, inPlace bool) (*Edge, error) {
	if isBinary(b) {
		e, apart, err := decodeEdgeV2(b, inPlace)
		if err != nil {
			return nil, err
		}
		if apart > 0 {
			if e.Embedding, err = vectorOf(vec, apart); err != nil {
				return nil, fmt.Errorf("edge %s: %w", e.ID, err)
			}
		}
		return e, nil
	}
	var e Edge
	emb, err := decodeValue(b, &e)
	if err != nil {
		return nil, err
	}
	e.Embedding = emb
	return &e, nil
}

// isBinary reports whether b is in format 2 or 3.
func isBinary(b []byte) bool { return len(b) > 0 && (b[0] == formatV2 || b[0] == formatV3) }

func decodeEpisode(b []byte) (*Episode, error) { return decodeEpisodeAt(b, false) }

// decodeEpisodeAt is decodeEpisode; inPlace, a format-2 value's strings alias b.
func decodeEpisodeAt(b []byte, inPlace bool) (*Episode, error) {
	if len(b) > 0 && b[0] == formatV2 {
		return decodeEpisodeV2(b, inPlace)
	}
	var e Episode
	emb, err := decodeValue(b, &e)
	if err != nil {
		return nil, err
	}
	e.Embedding = emb
	return &e, nil
}

// embeddingLen reads the embedding count of an encoded node, edge or
// episode without decoding the rest (in format 3, the count of the
// floats stored apart).
func embeddingLen(b []byte) (int, error) {
	if isBinary(b) {
		if len(b) < 2 {
			return 0, fmt.Errorf("%w: value header", ErrCorrupt)
		}
		r := &rd{b: b, off: 2}
		if b[0] == formatV3 {
			n := r.uvar()
			if n > maxVectorLen+1 {
				r.fail("embedding count")
			}
			return int(max(n, 1) - 1), r.err
		}
		n, _ := r.count(4)
		return n, r.err
	}
	if len(b) < 9 || b[0] != formatV1 {
		return 0, fmt.Errorf("%w: value header", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 0 || 5+n+4 > len(b) {
		return 0, fmt.Errorf("%w: value length %d of %d bytes", ErrCorrupt, n, len(b))
	}
	return int(binary.BigEndian.Uint32(b[5+n:])), nil
}
