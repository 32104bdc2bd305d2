package keyword

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/blevesearch/bleve/v2"

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

// The saved documents: a version byte, a flags byte (bit 0: a
// generation follows), uvarint(generation version) and its sum (8 bytes,
// little-endian), then uvarint(count) documents, each its key (kind
// byte, namespace, id) and its namespace and text, then uvarint(count)
// spans, each its key and uvarint(count) node ids. Strings are
// uvarint(len) bytes.
//
// They live in a file of their own in Dir, beside bleve's
// index_meta.json and store/ (which bleve leaves alone), named by their
// stamp: documents-<16 hex digits>, the CRC-64 (ECMA) of the file's
// bytes. bleve's internal storage holds only the stamp, under
// keyDocsFile: a version byte, then the CRC-64 and the file's length,
// 8 bytes each, little-endian. They used to be an internal value of
// bleve themselves (keyDocs, still read from an index that has no
// stamp, and deleted by the next save), but scorch writes every
// internal value again into root.bolt, and fsyncs it, on each snapshot
// it persists, several a second during ingest: at 1M edges the
// documents took 10.5 MB, each persist copied them and root.bolt had
// grown to 206 MB.
//
// A save (saveDocs) writes the file through a temporary one, synced
// and renamed, the directory synced; then sets the stamp in a bleve
// batch, waited for until persisted; only then removes the other
// documents-* files. So a stamp bleve has persisted names a file
// complete on disk, at any crash. A file missing or whose CRC or
// length differs from its stamp is saved documents missing: the index
// is rebuilt.
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

// docsReader decodes saved documents at off in s. Its strings are cut
// from s (a reopen reads tens of thousands), which is read from the
// file once, with no other copy; b is s's bytes, read only, for
// encoding/binary's decoders.
type docsReader struct {
	s   string
	b   []byte
	off int
	bad bool
}

func newDocsReader(s string, off int) *docsReader {
	return &docsReader{s: s, b: unsafe.Slice(unsafe.StringData(s), len(s)), off: off}
}

func (r *docsReader) fail() { r.bad, r.off = true, len(r.s) }

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
	if n > uint64(len(r.s)-r.off) {
		r.fail()
		return ""
	}
	r.off += int(n)
	return r.s[r.off-int(n) : r.off]
}

func (r *docsReader) key() docKey {
	if r.off == len(r.s) {
		r.fail()
		return docKey{}
	}
	kind := r.s[r.off]
	r.off++
	return docKey{kind: kind, ns: r.str(), id: r.str()}
}

// count reads a count of items each at least min bytes long, refusing
// one the remaining bytes cannot hold (so corrupt input cannot size a
// huge map).
func (r *docsReader) count(min int) int {
	n := r.uvarint()
	if n > uint64((len(r.s)-r.off)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

// decodeDocs decodes what encodeDocs wrote; the documents' strings
// share s's memory.
func decodeDocs(s string) (*savedDocs, error) {
	if len(s) < 2 || s[0] != docsV1 || s[1]&^1 != 0 {
		return nil, errBadDocs
	}
	d := &savedDocs{}
	r := newDocsReader(s, 2)
	if s[1] == 1 {
		d.gen = &particle.Generation{Version: r.uvarint(), Sum: r.u64()}
	}
	n := r.count(5)
	d.texts = make(map[docKey]document, n)
	for range n {
		k := r.key()
		d.texts[k] = document{NS: r.str(), Text: r.str()}
	}
	n = r.count(4)
	d.spanNodes = make(map[docKey][]string, n)
	for range n {
		k := r.key()
		nodes := make([]string, r.count(1))
		for i := range nodes {
			nodes[i] = r.str()
		}
		d.spanNodes[k] = nodes
	}
	if r.bad || r.off != len(s) {
		return nil, errBadDocs
	}
	return d, nil
}

// docsStamp names a file of saved documents: the CRC-64 of its bytes
// and its length.
type docsStamp struct {
	sum, size uint64
}

const (
	docsStampV1     = 1
	docsStampLen    = 17
	docsFilePrefix  = "documents-"
	docsFilePattern = docsFilePrefix + "*.tmp" // a file being written (os.CreateTemp)
)

var crcTable = crc64.MakeTable(crc64.ECMA)

func stampOf(docs []byte) docsStamp {
	return docsStamp{sum: crc64.Checksum(docs, crcTable), size: uint64(len(docs))}
}

// name is the stamped file's name in Dir.
func (st docsStamp) name() string { return fmt.Sprintf("%s%016x", docsFilePrefix, st.sum) }

func (st docsStamp) encode() []byte {
	b := append(make([]byte, 0, docsStampLen), docsStampV1)
	b = binary.LittleEndian.AppendUint64(b, st.sum)
	return binary.LittleEndian.AppendUint64(b, st.size)
}

func decodeStamp(b []byte) (docsStamp, error) {
	if len(b) != docsStampLen || b[0] != docsStampV1 {
		return docsStamp{}, fmt.Errorf("%w: documents stamp %x", errBadDocs, b)
	}
	return docsStamp{sum: binary.LittleEndian.Uint64(b[1:]), size: binary.LittleEndian.Uint64(b[9:])}, nil
}

// readSaved reads the saved documents of the index bl in dir: the file
// its stamp names, its CRC and length checked; or, from an index saved
// before the documents had a file (no stamp), the internal value
// keyDocs. file is the stamped file's name ("" for the legacy value).
// Both openDisk and Verify read them so.
func readSaved(bl bleve.Index, dir string) (saved *savedDocs, file string, err error) {
	raw, err := bl.GetInternal(keyDocsFile)
	if err != nil {
		return nil, "", err
	}
	if raw == nil {
		legacy, err := bl.GetInternal(keyDocs)
		if err != nil {
			return nil, "", err
		}
		if legacy == nil {
			return nil, "", errors.New("keyword: no saved documents")
		}
		saved, err = decodeDocs(string(legacy))
		return saved, "", err
	}
	st, err := decodeStamp(raw)
	if err != nil {
		return nil, "", err
	}
	file = st.name()
	text, err := readDocsFile(filepath.Join(dir, file), st)
	if err != nil {
		return nil, file, fmt.Errorf("keyword: saved documents file %s: %w", file, err)
	}
	saved, err = decodeDocs(text)
	return saved, file, err
}

// readDocsFile reads the file at path into one string (decodeDocs cuts
// the documents from it), checking it against st.
func readDocsFile(path string, st docsStamp) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if uint64(fi.Size()) != st.size {
		return "", fmt.Errorf("%d bytes, its stamp says %d", fi.Size(), st.size)
	}
	var b strings.Builder
	b.Grow(int(st.size))
	h := crc64.New(crcTable)
	n, err := io.Copy(&b, io.TeeReader(io.LimitReader(f, int64(st.size)), h))
	if err != nil {
		return "", err
	}
	if uint64(n) != st.size || h.Sum64() != st.sum {
		return "", fmt.Errorf("its %d bytes have CRC-64 %016x, its stamp says %d bytes with %016x", n, h.Sum64(), st.size, st.sum)
	}
	return b.String(), nil
}

// writeDocsFile writes docs to their stamped file in dir, whole or not
// at all: into a temporary file, synced, renamed, and dir synced, so
// that the file is on disk before a stamp naming it is.
func writeDocsFile(dir string, docs []byte) (docsStamp, error) {
	st := stampOf(docs)
	f, err := os.CreateTemp(dir, docsFilePattern)
	if err != nil {
		return st, err
	}
	tmp := f.Name()
	_, err = f.Write(docs)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, st.name()))
	}
	if err != nil {
		os.Remove(tmp)
		return st, err
	}
	return st, syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeDocsFiles removes the files of saved documents in dir but keep
// (every one when keep is ""): those of earlier saves, and any left by
// a save that did not complete. Only once no stamp that bleve holds, or
// may yet persist, names them: after a save persisted, or at open.
func removeDocsFiles(log *slog.Logger, dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("keyword: listing saved documents files", "dir", dir, "err", err)
		return
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, docsFilePrefix) && name != keep {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn("keyword: removing an old saved documents file", "file", name, "err", err)
			}
		}
	}
}
