package particle

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeValue feeds the value codec arbitrary bytes, as a damaged
// store would: every decoder must refuse with ErrCorrupt or decode a
// value that re-encodes to the same bytes' meaning.
func FuzzDecodeValue(f *testing.F) {
	n := &Node{ID: "n1", Namespace: DefaultNamespace, Type: NodeEntity, Name: "red block", Embedding: []float32{0.6, 0.8}, CreatedAt: time.Unix(1, 0).UTC()}
	e := &Edge{ID: "e1", Source: "a", Target: "b", Type: EdgeAssertion, Assertion: &Assertion{Predicate: "in"}, Embedding: []float32{1}}
	ep := &Episode{ID: "ep", Agent: "ur5", Steps: 3}
	for _, v := range []func() ([]byte, error){
		func() ([]byte, error) { return encodeNode(n) },
		func() ([]byte, error) { return encodeEdge(e) },
		func() ([]byte, error) { return encodeEpisode(ep) },
	} {
		b, err := v()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{formatV1})
	f.Add([]byte{formatV1, 0, 0, 0, 2, '{', '}', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []struct {
			decode func([]byte) (any, error)
			encode func(any) ([]byte, error)
		}{
			{func(b []byte) (any, error) { return decodeNode(b) }, func(v any) ([]byte, error) { return encodeNode(v.(*Node)) }},
			{func(b []byte) (any, error) { return decodeEdge(b) }, func(v any) ([]byte, error) { return encodeEdge(v.(*Edge)) }},
			{func(b []byte) (any, error) { return decodeEpisode(b) }, func(v any) ([]byte, error) { return encodeEpisode(v.(*Episode)) }},
		} {
			v, err := c.decode(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not marked ErrCorrupt: %v", err)
				}
				continue
			}
			b2, err := c.encode(v)
			if err != nil {
				continue // e.g. a NaN in the embedding trailer cannot go to JSON; the binary trailer keeps it
			}
			v2, err := c.decode(b2)
			if err != nil {
				t.Fatalf("re-encoded value refused: %v", err)
			}
			j1, _ := json.Marshal(v)
			j2, _ := json.Marshal(v2)
			if !bytes.Equal(j1, j2) {
				t.Fatalf("round trip changed the value:\n%s\n%s", j1, j2)
			}
		}
	})
}
