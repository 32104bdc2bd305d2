package rlds_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/wave"
)

// eventStep is a step whose one event carries vec as its embedding.
func eventStep(vec []float32) *rlds.Message {
	return &rlds.Message{Kind: rlds.KindStep, Agent: "ur5", EpisodeID: "ep-1", Step: &rlds.Step{
		Index: 0, Timestamp: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		Annotations: &rlds.Annotations{Events: []rlds.Event{{
			Subject: "red block", Predicate: "located_in", Object: "blue bowl", Embedding: vec,
		}}},
	}}
}

func TestEventEmbeddingIsTheEdgeVector(t *testing.T) {
	const dims = 8
	vec := []float32{3, 0, 0, 4, 0, 0, 0, 0} // stored normalised: 0.6, 0.8
	m := eventStep(vec)
	// Through the wire: the field round-trips and validates.
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	m, err = rlds.DecodeMessage(body)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	s, edge := applyEventStep(t, m, dims)
	want := []float32{0.6, 0, 0, 0.8, 0, 0, 0, 0}
	if len(edge.Embedding) != dims {
		t.Fatalf("edge embedding has %d dims, want %d", len(edge.Embedding), dims)
	}
	for i := range want {
		if math.Abs(float64(edge.Embedding[i]-want[i])) > 1e-6 {
			t.Fatalf("edge embedding = %v, want %v", edge.Embedding, want)
		}
	}
	if vec[0] != 3 {
		t.Error("Apply changed the caller's vector")
	}
	// The step record does not repeat the vector.
	var raw []byte
	if err := s.Steps(particle.DefaultNamespace, "ep-1", func(_ int, b []byte) error { raw = b; return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := rlds.DecodeStep(raw)
	if err != nil {
		t.Fatal(err)
	}
	if ev := st.Annotations.Events[0]; ev.Embedding != nil || ev.Subject != "red block" {
		t.Errorf("stored step event = %+v, want the event without its embedding", ev)
	}
	// Other edges of the step are embedded from their text as before.
	s.Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if e.ID != edge.ID && len(e.Embedding) == dims && wave.Dot(e.Embedding, want) > 0.999 {
				t.Errorf("edge %s %s took the event's vector", e.Type, e.Predicate())
			}
			return true
		})
	})
}

// A step whose embeddings were normalised when it was decoded (as the
// daemon's decoders do) gives each vector to its edge without a copy.
func TestNormalisedEventEmbeddingIsNotCopied(t *testing.T) {
	m := eventStep([]float32{3, 0, 0, 4, 0, 0, 0, 0})
	m.NormalizeEmbeddings()
	v := m.Step.Annotations.Events[0].Embedding
	if !wave.IsUnit(v) || math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[3])-0.8) > 1e-6 {
		t.Fatalf("normalised embedding = %v, want 0.6 and 0.8", v)
	}
	_, edge := applyEventStep(t, m, len(v))
	if &edge.Embedding[0] != &v[0] {
		t.Error("the edge holds a copy of a vector already at unit length")
	}
	// A vector that cannot be scaled is left for Validate to refuse.
	z := eventStep(make([]float32, 8))
	z.NormalizeEmbeddings()
	if err := z.Validate(); !errors.Is(err, rlds.ErrInvalid) {
		t.Errorf("zero vector after NormalizeEmbeddings: Validate = %v, want ErrInvalid", err)
	}
}

// applyEventStep applies m to a new in-memory store and returns the
// store and the edge of m's located_in event.
func applyEventStep(t *testing.T, m *rlds.Message, dims int) (*particle.Store, *particle.Edge) {
	t.Helper()
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ap := &rlds.Applier{Embedder: embed.NewHashing(dims)}
	ctx := context.Background()
	if _, err := s.Update(ctx, func(b *particle.Batch) error { return ap.Apply(ctx, b, m.MsgID(), m) }); err != nil {
		t.Fatal(err)
	}
	var edge *particle.Edge
	s.Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if e.Predicate() == "located_in" {
				edge = e
			}
			return true
		})
	})
	if edge == nil {
		t.Fatal("no located_in edge")
	}
	return s, edge
}

func TestEventEmbeddingRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		vec  []float32
		want error // from DecodeMessage (nil: decodes, Apply refuses)
	}{
		{"NaN", []float32{1, float32(math.NaN()), 0, 0, 0, 0, 0, 0}, rlds.ErrNonFinite},
		{"Inf", []float32{1, float32(math.Inf(-1)), 0, 0, 0, 0, 0, 0}, rlds.ErrNonFinite},
		{"zero", make([]float32, 8), rlds.ErrInvalid},
		{"wrong dimension", []float32{1, 2, 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := eventStep(tc.vec)
			err := m.Validate()
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Validate = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate = %v", err)
			}
			s, err := particle.Open(particle.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ap := &rlds.Applier{Embedder: embed.NewHashing(8)}
			ctx := context.Background()
			_, err = s.Update(ctx, func(b *particle.Batch) error { return ap.Apply(ctx, b, m.MsgID(), m) })
			if !errors.Is(err, rlds.ErrInvalid) || !strings.Contains(err.Error(), "3 dimensions, want 8") {
				t.Fatalf("Apply = %v, want ErrInvalid naming the dimensions", err)
			}
			if c := s.Counts(); sum(c.Edges) != 0 {
				t.Errorf("a refused step left edges: %v", c.Edges)
			}
		})
	}
}

func sum(m map[particle.EdgeType]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}
