package rlds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// appendTFRecord frames payload as one TFRecord (the writer side of
// TFRecordReader, for tests).
func appendTFRecord(dst, payload []byte) []byte {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(payload)))
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	dst = append(dst, hdr[:]...)
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(payload))
}

func tfrecordStream(payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = appendTFRecord(b, p)
	}
	return b
}

// readAll reads every record, copying each, and returns the first error
// other than io.EOF.
func readAll(r *TFRecordReader) (recs [][]byte, idx, offs []int64, err error) {
	for {
		b, err := r.Next()
		if err == io.EOF {
			return recs, idx, offs, nil
		}
		if err != nil {
			return recs, idx, offs, err
		}
		recs = append(recs, append([]byte(nil), b...))
		idx = append(idx, r.Record())
		offs = append(offs, r.Offset())
	}
}

func TestMaskedCRC(t *testing.T) {
	// Expected values from an independent bitwise CRC-32C in Python:
	// crc32c("123456789") = 0xe3069283 (the standard check value).
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0xa282ead8},
		{"123456789", 0xc78ab0e5},
		// The first 8 bytes of bridge_dataset-train.tfrecord-00000-of-00001
		// (length 144644) and the masked CRC stored after them.
		{"\x04\x35\x02\x00\x00\x00\x00\x00", 0xa2cf1f8c},
	} {
		if got := maskedCRC([]byte(tc.in)); got != tc.want {
			t.Errorf("maskedCRC(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

func TestTFRecordReaderSample(t *testing.T) {
	path := samplePath("bridge_dataset/1.0.0/bridge_dataset-train.tfrecord-00000-of-00001")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, idx, offs, err := readAll(NewTFRecordReader(f, path))
	if err != nil {
		t.Fatal(err)
	}
	// Record offsets and lengths from an independent Python framing
	// reader (/tmp scripts, struct.unpack('<Q')), see dataset_test.go.
	if len(recs) != 25 {
		t.Fatalf("got %d records, want 25", len(recs))
	}
	wantOffs := []int64{0, 144660, 283789, 420549, 556565}
	wantLens := []int{144644, 139113, 136744, 136000, 143073}
	for i := range wantOffs {
		if offs[i] != wantOffs[i] || len(recs[i]) != wantLens[i] || idx[i] != int64(i) {
			t.Errorf("record %d: index %d offset %d len %d, want offset %d len %d", i, idx[i], offs[i], len(recs[i]), wantOffs[i], wantLens[i])
		}
	}
	if offs[24] != 3340993 || len(recs[24]) != 134133 {
		t.Errorf("last record at %d len %d, want 3340993 len 134133", offs[24], len(recs[24]))
	}
}

func TestTFRecordReaderRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16) // 3 MiB, past the initial buffer
	payloads := [][]byte{{}, []byte("x"), big, []byte("after big"), {}}
	r := NewTFRecordReader(bytes.NewReader(tfrecordStream(payloads...)), "mem")
	recs, idx, offs, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(payloads) {
		t.Fatalf("got %d records, want %d", len(recs), len(payloads))
	}
	var off int64
	for i, p := range payloads {
		if !bytes.Equal(recs[i], p) || idx[i] != int64(i) || offs[i] != off {
			t.Errorf("record %d: len %d index %d offset %d, want len %d offset %d", i, len(recs[i]), idx[i], offs[i], len(p), off)
		}
		off += int64(16 + len(p))
	}
	// Reset reuses the reader.
	r.Reset(bytes.NewReader(tfrecordStream([]byte("again"))), "mem2")
	b, err := r.Next()
	if err != nil || string(b) != "again" || r.Record() != 0 || r.Offset() != 0 {
		t.Fatalf("after Reset: %q %v record %d offset %d", b, err, r.Record(), r.Offset())
	}
}

// damage returns a copy of b with the byte at off flipped.
func damage(b []byte, off int) []byte {
	c := append([]byte(nil), b...)
	c[off] ^= 0x5a
	return c
}

func TestTFRecordReaderCorrupt(t *testing.T) {
	payloads := [][]byte{[]byte("record zero"), []byte("record one, to be damaged"), []byte("record two")}
	stream := tfrecordStream(payloads...)
	off1 := 16 + len(payloads[0])
	tests := []struct {
		name    string
		data    []byte
		errOff  int64
		errText string
		// records that come through when skipping, and their indexes
		good    []string
		goodIdx []int64
	}{
		{"payload CRC", damage(stream, off1+12+3), int64(off1), "payload CRC mismatch",
			[]string{"record zero", "record two"}, []int64{0, 2}},
		{"payload CRC field", damage(stream, off1+12+len(payloads[1])), int64(off1), "payload CRC mismatch",
			[]string{"record zero", "record two"}, []int64{0, 2}},
		{"length", damage(stream, off1), int64(off1), "length CRC mismatch",
			[]string{"record zero", "record two"}, []int64{0, 2}},
		{"length CRC", damage(stream, off1+9), int64(off1), "length CRC mismatch",
			[]string{"record zero", "record two"}, []int64{0, 2}},
		{"truncated payload", stream[:off1+20], int64(off1), "truncated record",
			[]string{"record zero"}, []int64{0}},
		{"truncated header", stream[:off1+5], int64(off1), "truncated record header",
			[]string{"record zero"}, []int64{0}},
		{"garbage between records", append(append(append([]byte(nil), stream[:off1]...), "GARBAGE!GARBAGE!"...), stream[off1:]...),
			int64(off1), "length CRC mismatch", []string{"record zero", "record one, to be damaged", "record two"}, []int64{0, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Without skipping: record 0, then a clear error.
			r := NewTFRecordReader(bytes.NewReader(tc.data), "shard.tfrecord")
			if b, err := r.Next(); err != nil || string(b) != "record zero" {
				t.Fatalf("first record: %q, %v", b, err)
			}
			_, err := r.Next()
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v (%T) is not a *RecordError wrapping ErrCorrupt", err, err)
			}
			if re.File != "shard.tfrecord" || re.Offset != tc.errOff || re.Record != 1 || r.Offset() != tc.errOff {
				t.Errorf("error at %s offset %d record %d (reader offset %d), want offset %d record 1", re.File, re.Offset, re.Record, r.Offset(), tc.errOff)
			}
			msg := err.Error()
			for _, want := range []string{"shard.tfrecord", "offset", tc.errText} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}

			// With SkipCorrupt: the good records, each error reported once.
			r = NewTFRecordReader(bytes.NewReader(tc.data), "shard.tfrecord")
			r.SkipCorrupt = true
			var reported []*RecordError
			r.OnCorrupt = func(e *RecordError) { reported = append(reported, e) }
			recs, idx, _, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range recs {
				got = append(got, string(b))
			}
			if strings.Join(got, "|") != strings.Join(tc.good, "|") {
				t.Errorf("records %q, want %q", got, tc.good)
			}
			if len(idx) != len(tc.goodIdx) {
				t.Fatalf("indexes %v, want %v", idx, tc.goodIdx)
			}
			for i := range idx {
				if idx[i] != tc.goodIdx[i] {
					t.Errorf("indexes %v, want %v", idx, tc.goodIdx)
					break
				}
			}
			if len(reported) != 1 || r.Skipped() != 1 || reported[0].Offset != tc.errOff {
				t.Errorf("reported %v (Skipped %d), want one error at offset %d", reported, r.Skipped(), tc.errOff)
			}
		})
	}
}

func TestTFRecordReaderResync(t *testing.T) {
	payloads := [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}
	stream := tfrecordStream(payloads...)
	data := damage(stream, 17+2) // inside record 1's length word
	r := NewTFRecordReader(bytes.NewReader(data), "mem")
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want a corrupt-record error, got %v", err)
	}
	if err := r.Resync(); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	b, err := r.Next()
	if err != nil || string(b) != "ccc" || r.Offset() != 17+18 {
		t.Fatalf("after Resync: %q %v at %d, want \"ccc\" at %d", b, err, r.Offset(), 17+18)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("want io.EOF, got %v", err)
	}
	// Resync with nothing valid left reports io.EOF.
	r = NewTFRecordReader(bytes.NewReader([]byte("no records in here at all")), "mem")
	if _, err := r.Next(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want a corrupt-record error, got %v", err)
	}
	if err := r.Resync(); err != io.EOF {
		t.Fatalf("Resync = %v, want io.EOF", err)
	}
}

func TestTFRecordReaderMaxRecordSize(t *testing.T) {
	stream := tfrecordStream([]byte("small"), bytes.Repeat([]byte{7}, 5000), []byte("tail"))
	r := NewTFRecordReader(bytes.NewReader(stream), "mem")
	r.MaxRecordSize = 1000
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exceeds the 1000-byte limit") {
		t.Fatalf("want a size-limit error, got %v", err)
	}
	// Skipping steps over the big record without reading it.
	r.Reset(bytes.NewReader(stream), "mem")
	r.SkipCorrupt = true
	recs, idx, _, err := readAll(r)
	if err != nil || len(recs) != 2 || string(recs[1]) != "tail" || idx[1] != 2 {
		t.Fatalf("got %q %v %v", recs, idx, err)
	}
}

func TestTFRecordReaderHugeLengthShortFile(t *testing.T) {
	// A header whose CRC is right but whose length runs far past the end
	// of the input: a truncation error, without allocating the claim.
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], 200<<20)
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	data := append(hdr[:], bytes.Repeat([]byte{1}, 100)...)
	r := NewTFRecordReader(bytes.NewReader(data), "mem")
	if _, err := r.Next(); !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want a truncation error, got %v", err)
	}
	if cap(r.buf) > 2<<20 {
		t.Errorf("reader allocated %d bytes for a 100-byte payload", cap(r.buf))
	}
}
