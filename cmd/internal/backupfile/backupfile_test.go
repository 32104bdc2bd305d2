package backupfile

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

type manifest struct {
	Format string `json:"format"`
	N      int    `json:"n"`
}

func encode(t testing.TB, m manifest, payload []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// read reads a whole file: its manifest and payload, or the error.
func read(file []byte) (manifest, []byte, error) {
	var m manifest
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		return m, nil, err
	}
	if err := r.Manifest(&m); err != nil {
		return m, nil, err
	}
	payload, err := io.ReadAll(r)
	return m, payload, err
}

func TestRoundTripAcrossFrames(t *testing.T) {
	for _, size := range []int{0, 1, 256 << 10, 256<<10 + 1, 3 << 20} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		file := encode(t, manifest{Format: "x", N: size}, payload)
		m, got, err := read(file)
		if err != nil || m.N != size || !bytes.Equal(got, payload) {
			t.Fatalf("size %d: %v, manifest %+v, %d bytes back", size, err, m, len(got))
		}
	}
}

func TestDamageIsRefused(t *testing.T) {
	file := encode(t, manifest{Format: "x"}, bytes.Repeat([]byte("snapshot"), 100000))
	flip := func(i int) []byte { b := bytes.Clone(file); b[i] ^= 1; return b }
	for name, bad := range map[string][]byte{
		"empty":           nil,
		"other magic":     append([]byte("ctxgraph-backup 2\n"), file[len(Magic):]...),
		"truncated":       file[:len(file)/2],
		"no trailer":      file[:len(file)-20],
		"payload flipped": flip(len(file) / 2),
		"manifest flip":   flip(len(Magic) + 2),
		"trailing bytes":  append(bytes.Clone(file), 'x'),
	} {
		if _, _, err := read(bad); !errors.Is(err, ErrBad) {
			t.Errorf("%s: %v, want ErrBad", name, err)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encode(f, manifest{Format: "x", N: 1}, []byte("hello")))
	f.Add(encode(f, manifest{}, nil))
	f.Add([]byte(Magic + "{}\n\x00\x00\x00\x00{\"bytes\":0}\n"))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, file []byte) {
		m, payload, err := read(file)
		if err != nil {
			if !errors.Is(err, ErrBad) {
				t.Fatalf("error not marked ErrBad: %v", err)
			}
			return
		}
		// What reads back whole writes back to a file that reads the same.
		m2, payload2, err := read(encode(t, m, payload))
		if err != nil || m2 != m || !bytes.Equal(payload, payload2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
