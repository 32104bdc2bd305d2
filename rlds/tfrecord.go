package rlds

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// DefaultMaxRecordSize is the largest TFRecord payload a reader accepts
// unless told otherwise: 256 MiB. Real RLDS episodes run to tens of MB.
const DefaultMaxRecordSize = 256 << 20

// tfrecordHeaderLen is the length word (8 bytes) plus its masked CRC (4).
const tfrecordHeaderLen = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// RecordError reports a record that could not be read or decoded: where
// it is and why. Err wraps [ErrCorrupt] for bad framing and protobuf,
// [ErrDType] or [ErrShape] for a record that does not fit its schema,
// and the underlying error for I/O failures.
type RecordError struct {
	// File names the shard (as given to the reader).
	File string
	// Offset is the byte offset of the record's header in File.
	Offset int64
	// Record is the record's index in File (0-based), -1 if unknown.
	Record int64
	Err    error
}

func (e *RecordError) Error() string {
	if e.Record >= 0 {
		return fmt.Sprintf("%s: record %d at byte offset %d: %v", e.File, e.Record, e.Offset, e.Err)
	}
	return fmt.Sprintf("%s: byte offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// TFRecordReader streams the records of one TFRecord file.
//
// Next returns a slice of an internal buffer that the following call to
// Next overwrites; copy what you keep. A TFRecordReader is not safe for
// concurrent use.
type TFRecordReader struct {
	// MaxRecordSize bounds the payload length. Zero means
	// DefaultMaxRecordSize. A longer record is reported as corrupt and,
	// when skipped, passed over without being read into memory.
	MaxRecordSize int64
	// SkipCorrupt makes Next step over corrupt records (bad CRC, bad
	// length, truncated tail) instead of returning them as errors: it
	// reports each to OnCorrupt, resynchronises and carries on.
	SkipCorrupt bool
	// OnCorrupt, if set, receives every error SkipCorrupt steps over.
	OnCorrupt func(*RecordError)

	br   *bufio.Reader
	name string
	off  int64 // bytes consumed from br
	cur  int64 // offset of the record Next last returned or failed on
	idx  int64 // index of the next record
	last int64 // index of the record Next last returned or failed on
	buf  []byte

	// state left by the last error, for Resync.
	pending resyncState
	skipLen int64
	skipped int64
}

type resyncState uint8

const (
	resyncNone    resyncState = iota
	resyncAdvance             // header at cur is bad: move past its first byte
	resyncSkip                // header is good but the record was too large: skip skipLen bytes
	resyncEOF                 // input ended inside a record
)

// NewTFRecordReader reads records from r; name appears in errors.
func NewTFRecordReader(r io.Reader, name string) *TFRecordReader {
	t := &TFRecordReader{}
	t.Reset(r, name)
	return t
}

// Reset makes t read from r, keeping its buffer and settings.
func (t *TFRecordReader) Reset(r io.Reader, name string) {
	if t.br == nil {
		t.br = bufio.NewReaderSize(r, 64<<10)
	} else {
		t.br.Reset(r)
	}
	t.name = name
	t.off, t.cur, t.idx, t.last = 0, 0, 0, -1
	t.pending, t.skipLen, t.skipped = resyncNone, 0, 0
}

// Name is the file name given to NewTFRecordReader or Reset.
func (t *TFRecordReader) Name() string { return t.name }

// Offset is the byte offset of the record Next last returned (or failed
// on).
func (t *TFRecordReader) Offset() int64 { return t.cur }

// Record is the index of the record Next last returned (or failed on).
// A record skipped as corrupt counts as one record, so the records after
// a damaged one keep their indexes.
func (t *TFRecordReader) Record() int64 { return t.last }

// Skipped is how many corrupt records SkipCorrupt has stepped over.
func (t *TFRecordReader) Skipped() int64 { return t.skipped }

func (t *TFRecordReader) maxSize() int64 {
	if t.MaxRecordSize > 0 {
		return t.MaxRecordSize
	}
	return DefaultMaxRecordSize
}

// Next returns the next record's payload, io.EOF at a clean end of the
// input, or a *RecordError. Call Resync after a corrupt-record error to
// move on to the next good record (SkipCorrupt does this itself).
func (t *TFRecordReader) Next() ([]byte, error) {
	for {
		b, err := t.next()
		if err == nil || err == io.EOF || !t.SkipCorrupt {
			return b, err
		}
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		t.skipped++
		if t.OnCorrupt != nil {
			t.OnCorrupt(re)
		}
		if err := t.Resync(); err != nil {
			return nil, err
		}
	}
}

func (t *TFRecordReader) fail(err error) error {
	return &RecordError{File: t.name, Offset: t.cur, Record: t.last, Err: err}
}

func (t *TFRecordReader) next() ([]byte, error) {
	if t.pending != resyncNone {
		// The caller did not Resync after an error: do it now rather than
		// returning the same error forever.
		if err := t.Resync(); err != nil {
			return nil, err
		}
	}
	t.cur = t.off
	hdr, err := t.br.Peek(tfrecordHeaderLen)
	if len(hdr) < tfrecordHeaderLen {
		if len(hdr) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		t.last, t.idx = t.idx, t.idx+1
		if err == io.EOF {
			t.pending = resyncEOF
			return nil, t.fail(corruptf("truncated record header: %d of %d bytes: %w", len(hdr), tfrecordHeaderLen, io.ErrUnexpectedEOF))
		}
		return nil, t.fail(err)
	}
	t.last, t.idx = t.idx, t.idx+1
	n := binary.LittleEndian.Uint64(hdr[:8])
	if have, want := binary.LittleEndian.Uint32(hdr[8:12]), maskedCRC(hdr[:8]); have != want {
		t.pending = resyncAdvance
		return nil, t.fail(corruptf("length CRC mismatch (stored %08x, computed %08x)", have, want))
	}
	if n > uint64(t.maxSize()) {
		t.pending, t.skipLen = resyncSkip, tfrecordHeaderLen+int64(n)+4
		return nil, t.fail(corruptf("record length %d exceeds the %d-byte limit", n, t.maxSize()))
	}
	t.discard(tfrecordHeaderLen)
	if err := t.readPayload(int(n) + 4); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			t.pending = resyncEOF
			return nil, t.fail(corruptf("truncated record: header says %d payload bytes, file ends %d bytes into the record: %w",
				n, t.off-t.cur, io.ErrUnexpectedEOF))
		}
		return nil, t.fail(err)
	}
	payload := t.buf[:n]
	if have, want := binary.LittleEndian.Uint32(t.buf[n:n+4]), maskedCRC(payload); have != want {
		// The header was good, so the next record starts right after
		// this one: Resync will find it without scanning.
		t.pending = resyncNone
		return nil, t.fail(corruptf("payload CRC mismatch (stored %08x, computed %08x), %d bytes", have, want, n))
	}
	return payload, nil
}

func (t *TFRecordReader) discard(n int) {
	d, _ := t.br.Discard(n)
	t.off += int64(d)
}

// readPayload reads n bytes into t.buf, growing it as data arrives so a
// corrupt length on a short file does not allocate the whole claim.
func (t *TFRecordReader) readPayload(n int) error {
	if cap(t.buf) >= n {
		t.buf = t.buf[:n]
		m, err := io.ReadFull(t.br, t.buf)
		t.off += int64(m)
		return err
	}
	t.buf = t.buf[:0]
	for len(t.buf) < n {
		grow := max(cap(t.buf)*2, 1<<20)
		if len(t.buf)+grow > n {
			grow = n - len(t.buf)
		}
		start := len(t.buf)
		t.buf = append(t.buf, make([]byte, grow)...)
		m, err := io.ReadFull(t.br, t.buf[start:])
		t.off += int64(m)
		if err != nil {
			t.buf = t.buf[:start+m]
			return err
		}
	}
	return nil
}

// Resync moves the reader to the next position where a header with a
// valid length CRC begins, after the record that caused the last error.
// It returns io.EOF if none remains. Without a pending error it checks
// that the reader is at a valid header and scans forward if not.
func (t *TFRecordReader) Resync() error {
	switch t.pending {
	case resyncEOF:
		t.pending = resyncNone
		// Drain whatever is left so that Next reports a clean EOF.
		m, _ := io.Copy(io.Discard, t.br)
		t.off += m
		return io.EOF
	case resyncAdvance:
		t.discard(1)
	case resyncSkip:
		for t.skipLen > 0 {
			step := int(min(t.skipLen, 1<<30))
			d, err := t.br.Discard(step)
			t.off += int64(d)
			t.skipLen -= int64(d)
			if err != nil {
				t.pending, t.skipLen = resyncNone, 0
				return io.EOF
			}
		}
	}
	t.pending, t.skipLen = resyncNone, 0
	for {
		hdr, err := t.br.Peek(tfrecordHeaderLen)
		if len(hdr) < tfrecordHeaderLen {
			if err == io.EOF {
				t.discard(len(hdr))
				return io.EOF
			}
			return &RecordError{File: t.name, Offset: t.off, Record: -1, Err: err}
		}
		if binary.LittleEndian.Uint32(hdr[8:12]) == maskedCRC(hdr[:8]) {
			return nil
		}
		t.discard(1)
	}
}
