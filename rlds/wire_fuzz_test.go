package rlds

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// addJSONLSeeds adds every line of a testdata JSONL file to the corpus.
func addJSONLSeeds(f *testing.F, name string) {
	for _, l := range testdataLines(f, name) {
		f.Add(l)
	}
}

// checkMarked fails unless err is marked with one of the rlds
// sentinels a decoder refuses input with.
func checkMarked(t *testing.T, err error) {
	t.Helper()
	for _, known := range []error{ErrMalformed, ErrInvalid, ErrNonFinite, ErrShape, ErrDType} {
		if errors.Is(err, known) {
			return
		}
	}
	t.Fatalf("error not marked with an rlds sentinel: %v", err)
}

// FuzzDecodeMessage feeds the step/episode wire decoder what a
// controller might send: it must refuse with a marked error or accept a
// message that re-encodes to a stable form and stores as a step.
func FuzzDecodeMessage(f *testing.F) {
	addJSONLSeeds(f, "episodes.jsonl")
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"kind":"step"}`, `{"kind":"step",`,
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,"observation":{"s":{"dtype":"float32","shape":[2],"data":[1,2]}}}}`,
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,"action":[[1,2],[3]]}}`,
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,"action":{"dtype":"image","bytes":"AAEC"}}}`,
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,"reward":1e400}}`,
		`{"kind":"episode_end","agent":"a","episode_id":"e","end":{"steps":-1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			checkMarked(t, err)
			return
		}
		_, _ = m.MsgID(), m.Subject("ctxgraph")
		b2, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted message does not re-encode: %v", err)
		}
		m2, err := DecodeMessage(b2)
		if err != nil {
			t.Fatalf("re-encoded message refused: %v\n%s", err, b2)
		}
		if b3, _ := json.Marshal(m2); !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable:\n%s\n%s", b2, b3)
		}
		if m.Step != nil {
			raw, err := EncodeStep(m.Step)
			if err != nil {
				return
			}
			if _, err := DecodeStep(raw); err != nil {
				t.Fatalf("an accepted step does not read back from storage: %v", err)
			}
		}
	})
}
