package rlds

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// smallRecord is the first record of a sample shard cut down to a real
// record's first step, with byte values cut to 32 bytes and per-step
// vectors over 64 values dropped. The fuzzers minimise every new input,
// and minimising a whole 10-140 KB record takes longer than a fuzz run.
func smallRecord(tb testing.TB, rel string) []byte {
	tb.Helper()
	ex, err := ParseExample(firstRecord(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	t := len(ex["steps/is_first"].Ints)
	for k, v := range ex {
		if !strings.HasPrefix(k, "steps/") {
			continue
		}
		per := v.Len() / t
		if per > 64 {
			delete(ex, k)
			continue
		}
		switch v.Kind {
		case FeatureBytes:
			v.Bytes = v.Bytes[:per]
			for i, b := range v.Bytes {
				v.Bytes[i] = b[:min(len(b), 32)]
			}
		case FeatureFloat:
			v.Floats = v.Floats[:per]
		case FeatureInt64:
			v.Ints = v.Ints[:per]
		}
		ex[k] = v
	}
	return encodeExample(ex, false)
}

func FuzzTFRecordReader(f *testing.F) {
	head, err := os.ReadFile(samplePath(bridgeTrain))
	if err != nil {
		f.Fatal(err)
	}
	// Seeds stay small (see smallRecord): a real record, cut down.
	recs := tfrecordStream(smallRecord(f, "bridge/1.0.0/bridge-train.tfrecord-00000-of-00001"), []byte("x"))
	stream := tfrecordStream([]byte("a"), nil, []byte("a longer payload"))
	f.Add(recs, false)
	f.Add(damage(recs, 100), true)
	f.Add(head[:256], true) // a real header and the start of a real payload
	f.Add(stream, false)
	f.Add(damage(stream, 20), true)
	f.Add(stream[:len(stream)-3], false)
	f.Add([]byte{}, false)
	f.Add(make([]byte, 12), true)

	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		r := NewTFRecordReader(bytes.NewReader(data), "fuzz")
		r.MaxRecordSize = 1 << 20
		r.SkipCorrupt = skip
		lastOff := int64(-1)
		// Every call consumes input or ends it, so this bound is generous.
		for range len(data) + 2 {
			b, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var re *RecordError
				if !errors.As(err, &re) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v (%T) is not a *RecordError wrapping ErrCorrupt", err, err)
				}
				if re.Offset < 0 || re.Offset > int64(len(data)) {
					t.Fatalf("error offset %d outside the %d-byte input", re.Offset, len(data))
				}
				continue
			}
			off := r.Offset()
			if off <= lastOff || off+16+int64(len(b)) > int64(len(data)) {
				t.Fatalf("record at %d (previous %d), %d bytes, in a %d-byte input", off, lastOff, len(b), len(data))
			}
			if !bytes.Equal(b, data[off+12:off+12+int64(len(b))]) {
				t.Fatalf("record at %d is not the input's bytes", off)
			}
			lastOff = off
		}
		t.Fatalf("reader did not finish a %d-byte input", len(data))
	})
}

func FuzzExample(f *testing.F) {
	f.Add(smallRecord(f, bridgeTrain))
	f.Add(smallRecord(f, "bridge/1.0.0/bridge-train.tfrecord-00000-of-00001"))
	f.Add(encodeExample(Example{
		"steps/is_first": {Kind: FeatureInt64, Ints: []int64{1, 0}},
		"steps/action":   {Kind: FeatureFloat, Floats: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
		"steps/observation/clip_function_input/workspace_bounds": {Kind: FeatureBytes, Bytes: [][]byte{
			zlibBytes(f, float32LE(1, 2, 3, 4, 5, 6, 7, 8, 9)), zlibBytes(f, float32LE(1, 2, 3, 4, 5, 6, 7, 8, 9))}},
		"success": {Kind: FeatureInt64, Ints: []int64{1}},
	}, true))
	f.Add([]byte{})
	schemas := []*Schema{
		nil,
		mustSchema(f, "bridge_dataset/1.0.0/features.json"),
		mustSchema(f, "bridge/1.0.0/features.json"),
		mustSchema(f, "_oxe-metadata/kuka/0.1.0/features.json"),
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := ParseExample(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not marked ErrCorrupt", err)
			}
			return
		}
		// Whatever parses re-encodes to the same features.
		for _, unpacked := range []bool{false, true} {
			ex2, err := ParseExample(encodeExample(ex, unpacked))
			if err != nil || !sameExample(ex, ex2) {
				t.Fatalf("round trip (unpacked=%v): %v\n%+v\n%+v", unpacked, err, ex, ex2)
			}
		}
		// Decoding into an episode fails cleanly or yields sane steps.
		for _, s := range schemas {
			e, err := DecodeEpisode(data, s, Source{Dataset: "fuzz"})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrDType) && !errors.Is(err, ErrShape) {
					t.Fatalf("decode error %v wraps none of ErrCorrupt, ErrDType, ErrShape", err)
				}
				continue
			}
			for i, st := range e.Steps {
				if st.Index != i {
					t.Fatalf("step %d has index %d", i, st.Index)
				}
			}
			if e.Agent == "" || e.ID == "" {
				t.Fatalf("episode without agent or ID: %+v", e)
			}
		}
	})
}
