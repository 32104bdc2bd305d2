package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeRequest feeds the planner's request decoder what a planner
// client might send: it must refuse with ErrInvalid or accept a request
// that normalises without panicking and re-encodes to a stable form.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"query":`, `{"query":"x","k":"ten"}`, `{"vector":[0.1,0.2]}`,
		`{"query":"where is the red block","entities":["red block"],"roles":["operator"],"hops":2,"k":10,"budget":256}`,
		`{"query":"x","time_window":{"from":"2026-01-01T00:00:00Z","to":"2025-01-01T00:00:00Z"}}`,
		`{"query":"x","as_of":"2026-01-01T00:00:00Z","format":"turtle","strategy":"hybrid"}`,
		`{"query":"x","min_confidence":2,"hops":99,"k":-1,"budget":1e9}`,
	} {
		f.Add([]byte(s))
	}
	// Requests in msgpack.
	asOf := time.Unix(1.8e9, 0)
	for _, q := range []Request{
		{Query: "where is the red block", Entities: []string{"red block"}, Roles: []string{"operator"}, Hops: 2, K: 10, Budget: 256},
		{Vector: []float32{0.5, -1, 0.125}, TimeWindow: &TimeWindow{From: time.Unix(1.7e9, 5)}, AsOf: &asOf, MinConfidence: 0.3, Format: "msgpack"},
	} {
		f.Add(q.AppendMsgpack(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not marked ErrInvalid: %v", err)
			}
			return
		}
		b2, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted request does not re-encode: %v", err)
		}
		r2, err := DecodeRequest(b2)
		if err != nil {
			t.Fatalf("re-encoded request refused: %v\n%s", err, b2)
		}
		if b3, _ := json.Marshal(r2); !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable:\n%s\n%s", b2, b3)
		}
		if err := r.normalize(8); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("normalize error not marked ErrInvalid: %v", err)
		}
	})
}
