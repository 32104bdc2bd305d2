package particle

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeValue feeds the value codec arbitrary bytes, as a damaged
// store would: every decoder (both formats) must refuse with ErrCorrupt
// or decode a value whose encoding is stable: encode, decode, encode
// again gives the same bytes.
func FuzzDecodeValue(f *testing.F) {
	n := &Node{ID: "n1", Namespace: DefaultNamespace, Type: NodeEntity, Name: "red block", Embedding: []float32{0.6, 0.8}, CreatedAt: time.Unix(1, 0).UTC()}
	e := &Edge{ID: "e1", Source: "a", Target: "b", Type: EdgeAssertion, Assertion: &Assertion{Predicate: "in"}, Embedding: []float32{1}}
	ep := &Episode{ID: "ep", Agent: "ur5", Steps: 3}
	step := 7
	yes := true
	e.Provenance = []Provenance{{EpisodeID: "ep", StepIndex: &step, Agent: "ur5", ObservedAt: time.Unix(2, 3).In(time.FixedZone("", 3600))}}
	e.Policy.Portable = &yes
	ep.Metadata = map[string]any{"k": "v"}
	ep.Outcome.Success = &yes
	for _, v := range []func() ([]byte, error){
		func() ([]byte, error) { return encodeNode(n) },
		func() ([]byte, error) { return encodeEdge(e) },
		func() ([]byte, error) { return encodeEpisode(ep) },
		func() ([]byte, error) { c := *ep; c.sealed = 2; return encodeEpisode(&c) }, // its edge list partly in chunks
		func() ([]byte, error) { c := *n; c.Embedding = nil; return encodeValue(&c, n.Embedding) },
		func() ([]byte, error) { c := *e; c.Embedding = nil; return encodeValue(&c, e.Embedding) },
		func() ([]byte, error) { c := *ep; c.Embedding = nil; return encodeValue(&c, ep.Embedding) },
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
	f.Add([]byte{formatV2, kindEdge, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []struct {
			decode func([]byte) (any, error)
			encode func(any) ([]byte, error)
		}{
			{func(b []byte) (any, error) { return decodeNode(b, nil) }, func(v any) ([]byte, error) { return encodeNode(v.(*Node)) }},
			{func(b []byte) (any, error) { return decodeEdge(b, nil) }, func(v any) ([]byte, error) { return encodeEdge(v.(*Edge)) }},
			{func(b []byte) (any, error) { return decodeEpisode(b) }, func(v any) ([]byte, error) { return encodeEpisode(v.(*Episode)) }},
		} {
			v, err := c.decode(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not marked ErrCorrupt: %v", err)
				}
				continue
			}
			if _, err := embeddingLen(b); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("embeddingLen error not marked ErrCorrupt: %v", err)
			}
			b2, err := c.encode(v)
			if err != nil {
				continue // e.g. a time whose zone offset has no binary form
			}
			v2, err := c.decode(b2)
			if err != nil {
				t.Fatalf("re-encoded value refused: %v", err)
			}
			b3, err := c.encode(v2)
			if err != nil {
				t.Fatalf("decoded value does not encode again: %v", err)
			}
			if !bytes.Equal(b2, b3) {
				t.Fatalf("round trip changed the value:\n%x\n%x", b2, b3)
			}
		}
	})
}

// FuzzDecodeApart feeds the format-3 decoders a value and a vector, as a
// damaged store would: either is refused with ErrCorrupt, or the record
// decodes to one that encodes (record and vector) and decodes again to
// the same bytes.
func FuzzDecodeApart(f *testing.F) {
	n := &Node{ID: "n1", Namespace: DefaultNamespace, Type: NodeEntity, Name: "red block", Embedding: []float32{0.6, 0.8}, Seq: 3}
	e := &Edge{ID: "e1", Source: "a", Target: "b", Type: EdgeCausal, Embedding: []float32{1, 0, -1}, Seq: 4}
	for _, emb := range [][]float32{nil, {}, n.Embedding} {
		c := *n
		c.Embedding = emb
		b, err := encodeNodeV2(&c, nil, true)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, vectorValue(emb, nil))
	}
	b, err := encodeEdgeV2(e, nil, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, vectorValue(e.Embedding, nil))
	f.Add(b, []byte{1, 2, 3})
	f.Add([]byte{formatV3, kindNode, 0xff, 0xff, 0xff, 0xff, 0x0f}, []byte(nil))
	f.Fuzz(func(t *testing.T, b, vec []byte) {
		check := func(v any, err error, encode func(v any) ([]byte, []byte, error), decode func(b, vec []byte) (any, error)) {
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not marked ErrCorrupt: %v", err)
				}
				return
			}
			b2, vec2, err := encode(v)
			if err != nil {
				return // e.g. a time whose zone offset has no binary form
			}
			v2, err := decode(b2, vec2)
			if err != nil {
				t.Fatalf("re-encoded value refused: %v", err)
			}
			b3, vec3, err := encode(v2)
			if err != nil || !bytes.Equal(b2, b3) || !bytes.Equal(vec2, vec3) {
				t.Fatalf("round trip changed the value (%v):\n%x\n%x", err, b2, b3)
			}
		}
		nv, err := decodeNode(b, vec)
		check(nv, err, func(v any) ([]byte, []byte, error) {
			n := v.(*Node)
			b, err := encodeNodeV2(n, nil, true)
			return b, vectorValue(n.Embedding, nil), err
		}, func(b, vec []byte) (any, error) { return decodeNode(b, vec) })
		ev, err := decodeEdge(b, vec)
		check(ev, err, func(v any) ([]byte, []byte, error) {
			e := v.(*Edge)
			b, err := encodeEdgeV2(e, nil, true)
			return b, vectorValue(e.Embedding, nil), err
		}, func(b, vec []byte) (any, error) { return decodeEdge(b, vec) })
	})
}
