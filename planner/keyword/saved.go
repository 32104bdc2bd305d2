package keyword

import (
	"encoding/binary"
	"errors"

	"github.com/ctxgraph/ctxgraph/particle"
)

// savedDocs is what a clean index on disk was closed with: every
// document's text, the nodes listing each span, and the store
// generation they were current at (if the store was open then).
type savedDocs struct {
	gen       particle.Generation
	hasGen    bool
	texts     map[docKey]document
	spanNodes map[docKey][]string
}

// matches reports whether the saved documents are those of the store
// at generation gen: nothing was committed since they were saved.
func (s *savedDocs) matches(gen particle.Generation) bool { return s.hasGen && s.gen == gen }

// The saved documents on disk: a version byte, a flags byte (bit 0: a
// generation follows), uvarint(generation version) and its sum (8 bytes,
// little-endian), then uvarint(count) documents, each its key (kind
// byte, namespace, id) and its namespace and text, then uvarint(count)
// spans, each its key and uvarint(count) node ids. Strings are
// uvarint(len) bytes.
const docsV1 = 1

func encodeDocs(s *savedDocs) []byte {
	out := []byte{docsV1, 0}
	if s.hasGen {
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

// docsReader decodes saved documents. Its strings share one copy of the
// bytes (a reopen reads tens of thousands).
type docsReader struct {
	b   string
	bad bool
}

func (r *docsReader) uvarint() uint64 {
	var x uint64
	for shift, i := uint(0), 0; i < len(r.b) && i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		c := r.b[i]
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			r.b = r.b[i+1:]
			return x
		}
	}
	r.bad = true
	r.b = ""
	return 0
}

func (r *docsReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, ""
		return ""
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *docsReader) key() docKey {
	if len(r.b) == 0 {
		r.bad = true
		return docKey{}
	}
	kind := r.b[0]
	r.b = r.b[1:]
	return docKey{kind: kind, ns: r.str(), id: r.str()}
}

// count reads a count of items each at least min bytes long, refusing
// one the remaining bytes cannot hold (so corrupt input cannot size a
// huge map).
func (r *docsReader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.bad, r.b = true, ""
		return 0
	}
	return int(n)
}

func decodeDocs(b []byte) (*savedDocs, error) {
	if len(b) < 2 || b[0] != docsV1 || b[1]&^1 != 0 {
		return nil, errBadDocs
	}
	s := &savedDocs{hasGen: b[1] == 1}
	r := &docsReader{b: string(b[2:])}
	if s.hasGen {
		s.gen.Version = r.uvarint()
		if len(r.b) < 8 {
			return nil, errBadDocs
		}
		s.gen.Sum = binary.LittleEndian.Uint64([]byte(r.b[:8]))
		r.b = r.b[8:]
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
	if r.bad || len(r.b) != 0 {
		return nil, errBadDocs
	}
	return s, nil
}
