package cms

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecode feeds the span decoder what a CMS writer might send: it
// must refuse with a marked error or accept a span that re-encodes to a
// stable form and survives storage and scrubbing.
func FuzzDecode(f *testing.F) {
	for _, b := range testSpans(f) {
		f.Add(b, uint16(384))
		// The same span in msgpack.
		if s, err := Decode(b, 0); err == nil {
			f.Add(s.AppendMsgpack(nil), uint16(384))
		}
	}
	for _, s := range []string{``, `{}`, `{"id":"s"}`, `{"id":"s","level":99}`, `{"id":"s","embedding":[1,2,3]}`,
		`{"id":"s","period":"10x"}`, `{"id":"s","update_size":-1}`, `{"id":"s","step_start":3,"step_end":1}`} {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, dims uint16) {
		s, err := Decode(b, int(dims))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not marked: %v", err)
			}
			return
		}
		_ = s.Subject("ctxgraph")
		_ = s.ConceptNames()
		b2, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("accepted span does not re-encode: %v", err)
		}
		s2, err := Decode(b2, int(dims))
		if err != nil {
			t.Fatalf("re-encoded span refused: %v\n%s", err, b2)
		}
		if b3, _ := json.Marshal(s2); !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable:\n%s\n%s", b2, b3)
		}
		stored, err := encodeSpan(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeStored(stored); err != nil {
			t.Fatalf("stored span does not read back: %v", err)
		}
		if _, _, err := ScrubSpan(stored, s.Entities); err != nil {
			t.Fatalf("scrub: %v", err)
		}
	})
}
