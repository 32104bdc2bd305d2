package keyword

import (
	"encoding/binary"
	"errors"

	"github.com/ctxgraph/ctxgraph/particle"
)

// savedDocs is what a clean index on disk was closed with, or what a
// running one saved at its last Checkpoint: every document's text, the
// nodes listing each span, and the store generation they were current
// at (nil if the store was not open then).
type savedDocs struct {
	gen       *particle.Generation
	texts     map[docKey]document
	spanNodes map[docKey][]string
}

// sameGeneration reports whether a and b name one generation (neither
// nil).
func sameGeneration(a, b *particle.Generation) bool { return a != nil && b != nil && *a == *b }

// The saved documents on disk: a version byte, a flags byte (bit 0: a
// generation follows), uvarint(generation version) and its sum (8 bytes,
// little-endian), then uvarint(count) documents, each its key (kind
// byte, namespace, id) and its namespace and text, then uvarint(count)
// spans, each its key and uvarint(count) node ids. Strings are
// uvarint(len) bytes.
const docsV1 = 1

func encodeDocs(s *savedDocs) []byte {
	out := []byte{docsV1, 0}
	if s.gen != nil {
		out[1] = 1
		out = binary.AppendUvarint(out, s.gen.Version)
		out = binary.LittleEndian.AppendUint64(out, s.gen.Sum)
	}
	str := func(v string) {
		out = binary.AppendUvarint(out, uint64(len(v)))
		out = append(out, v...)
	}
	key := func(k docKey) {
		out = append(out, k.kind)
		str(k.ns)
		str(k.id)
	}
	out = binary.AppendUvarint(out, uint64(len(s.texts)))
	for k, d := range s.texts {
		key(k)
		str(d.NS)
		str(d.Text)
	}
	out = binary.AppendUvarint(out, uint64(len(s.spanNodes)))
	for k, nodes := range s.spanNodes {
		key(k)
		out = binary.AppendUvarint(out, uint64(len(nodes)))
		for _, n := range nodes {
			str(n)
		}
	}
	return out
}

var errBadDocs = errors.New("keyword: corrupt saved documents")

// docsReader decodes saved documents at off in b. Its strings are cut
// from s, one copy of b (a reopen reads tens of thousands).
type docsReader struct {
	b   []byte
	s   string
	off int
	bad bool
}

func (r *docsReader) fail() { r.bad, r.off = true, len(r.b) }

func (r *docsReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.off += n
	return x
}

func (r *docsReader) u64() uint64 {
	if len(r.b)-r.off < 8 {
		r.fail()
		return 0
	}
	r.off += 8
	return binary.LittleEndian.Uint64(r.b[r.off-8:])
}

func (r *docsReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)-r.off) {
		r.fail()
		return ""
	}
	r.off += int(n)
	return r.s[r.off-int(n) : r.off]
}

func (r *docsReader) key() docKey {
	if r.off == len(r.b) {
		r.fail()
		return docKey{}
	}
	kind := r.b[r.off]
	r.off++
	return docKey{kind: kind, ns: r.str(), id: r.str()}
}

// count reads a count of items each at least min bytes long, refusing
// one the remaining bytes cannot hold (so corrupt input cannot size a
// huge map).
func (r *docsReader) count(min int) int {
	n := r.uvarint()
	if n > uint64((len(r.b)-r.off)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

func decodeDocs(b []byte) (*savedDocs, error) {
	if len(b) < 2 || b[0] != docsV1 || b[1]&^1 != 0 {
		return nil, errBadDocs
	}
	s := &savedDocs{}
	r := &docsReader{b: b, s: string(b), off: 2}
	if b[1] == 1 {
		s.gen = &particle.Generation{Version: r.uvarint(), Sum: r.u64()}
	}
	n := r.count(5)
	s.texts = make(map[docKey]document, n)
	for range n {
		k := r.key()
		s.texts[k] = document{NS: r.str(), Text: r.str()}
	}
	n = r.count(4)
	s.spanNodes = make(map[docKey][]string, n)
	for range n {
		k := r.key()
		nodes := make([]string, r.count(1))
		for i := range nodes {
			nodes[i] = r.str()
		}
		s.spanNodes[k] = nodes
	}
	if r.bad || r.off != len(b) {
		return nil, errBadDocs
	}
	return s, nil
}
