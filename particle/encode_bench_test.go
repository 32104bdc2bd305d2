package particle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

// ingestValues are a node, an edge and an episode as an RLDS ingest
// rewrites them: an entity seen in 64 episodes, an assertion with a full
// provenance window, an episode 40 steps in; 384-dimension embeddings.
func ingestValues() (*Node, *Edge, *Episode) {
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 123456789, time.UTC)
	emb := make([]float32, 384)
	for i := range emb {
		emb[i] = float32(i%17) / 17
	}
	n := &Node{ID: EntityID("default/default", NodeEntity, "red cup 3"), Namespace: "default/default", Type: NodeEntity,
		Name: "red cup 3", Embedding: emb, Belief: Belief{Score: 0.93, Alpha: 40.5, Beta: 2.5, Evidence: 41, UpdatedAt: t0},
		CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0, Seq: 123456}
	for i := range MaxAttributeIDs {
		n.Attributes.RLDSEpisodeIDs = append(n.Attributes.RLDSEpisodeIDs, fmt.Sprintf("ep-%06d", 1000+i))
	}
	n.Attributes.Tags = []string{"kitchen"}
	step := 17
	e := &Edge{ID: "0199a3b2-7c1d-7e55-8f00-0123456789ab", Namespace: "default/default", Source: n.ID,
		Target: EntityID("default/default", NodeEntity, "blue bowl 4"), Type: EdgeAssertion, Embedding: emb,
		Scope:    Scope{TimeRange: TimeRange{From: t0.Add(-time.Minute), To: t0}, Location: "lab 3"},
		Evidence: 12, Assertion: &Assertion{Predicate: "next_to"}, Confidence: 0.81,
		Belief:    Belief{Score: 0.81, Alpha: 9.7, Beta: 2.3, Evidence: 12, UpdatedAt: t0},
		Salience:  Salience{Score: 0.7, DecayFn: "exp", HalfLifeS: 21600, LastUpdated: t0},
		Policy:    Policy{DenyRoles: []string{"visitor"}},
		ValidFrom: t0.Add(-time.Minute), Status: StatusActive, CreatedAt: t0.Add(-time.Minute), UpdatedAt: t0, Seq: 987654}
	for i := range MaxProvenance {
		e.Provenance = append(e.Provenance, Provenance{EpisodeID: fmt.Sprintf("ep-%06d", 1000+i), StepIndex: &step,
			Agent: "robot-017", ObservedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	ep := &Episode{ID: "ep-001063", Namespace: "default/default", Agent: "robot-017", StartTime: t0.Add(-4 * time.Second),
		EndTime: t0, Location: "lab 3", LanguageInstruction: "pick up the red cup 3 and put it in the blue bowl 4",
		Steps: 40, Metadata: map[string]any{"operator": "fleet-sim"}, LastTool: n.ID,
		Features: map[string]string{"observation/state": "float32[7]", "action": "float32[7]"},
		NodeID:   EpisodeNodeID("default/default", "ep-001063"), Seq: 4242}
	for i := range 14 {
		ep.Nodes = append(ep.Nodes, EntityID("default/default", NodeEntity, fmt.Sprint("n", i)))
	}
	for i := range 120 {
		ep.Edges = append(ep.Edges, fmt.Sprintf("0199a3b2-7c1d-7e55-8f00-%012d", i))
	}
	return n, e, ep
}

// TestIngestEncodingStable pins the bytes of the values ingest writes
// most: a faster encoder must write exactly what the format did.
func TestIngestEncodingStable(t *testing.T) {
	n, e, ep := ingestValues()
	sum := func(b []byte, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:8])
	}
	for _, c := range []struct{ what, got, want string }{
		{"node", sum(encodeNode(n)), "ad5399ef4581014b"},
		{"edge", sum(encodeEdge(e)), "76e4aad2cb11825d"},
		{"episode", sum(encodeEpisode(ep)), "b7666ad5b0ea4fed"},
	} {
		if c.got != c.want {
			t.Errorf("%s encodes to %s, want %s", c.what, c.got, c.want)
		}
	}
}

func BenchmarkEncodeIngest(b *testing.B) {
	n, e, ep := ingestValues()
	b.Run("node", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeNode(n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeEdge(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("episode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeEpisode(ep); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeEdge decodes the edge of ingestValues as a reopen from
// the view snapshot does: strings in place, the embedding apart.
func BenchmarkDecodeEdge(b *testing.B) {
	_, e, _ := ingestValues()
	e.Embedding = nil
	v, err := encodeEdge(e)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeEdgeAt(v, nil, true); err != nil {
			b.Fatal(err)
		}
	}
}
