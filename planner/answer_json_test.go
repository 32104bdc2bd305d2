package planner

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

func reflectJSON(t *testing.T, a *Answer) []byte {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnswerJSONIsWhatEncodingJSONWrites(t *testing.T) {
	answers := labAnswers(t)
	answers = append(answers, oddAnswer(), &Answer{})
	for i, a := range answers {
		got, err := a.AppendJSON(nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := reflectJSON(t, a); !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Fatalf("answer %d: JSON differs at byte %d:\n got …%s\nwant …%s", i, at, got[max(0, at-80):min(len(got), at+80)],
				want[max(0, at-80):min(len(want), at+80)])
		}
	}
}

// oddAnswer has what the lab's answers lack: characters JSON escapes,
// invalid UTF-8, tiny and huge numbers, zoned times, open fields.
func oddAnswer() *Answer {
	step := 7
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, zone)
	return &Answer{
		Nodes: []NodeOut{{ID: "n<1>", Type: "entity", Name: "a \"b\" \\ c & d\n\t\x01\x7f é \u2028\u2029 \xff", Aliases: []string{"x", ""},
			Tags: []string{"t"}, Score: 1e-7, Belief: 1e21, Seed: true, Hop: 3, Episodes: []string{"ep"}, Spans: []string{"sp"}},
			{ID: "n2", Score: 123456789.125, Belief: -0.5}},
		Edges: []EdgeOut{{ID: "e1", Source: "n<1>", Target: "n2", Type: "assertion", Predicate: "p", Value: "v",
			Confidence: 0.1 + 0.2, Salience: 5e-324, Score: math.MaxFloat64, Status: "active", Hypothesis: true, Evidence: -2,
			Provenance: []particle.Provenance{{EpisodeID: "ep", StepIndex: &step, CMSSpanID: "s", Agent: "a", ObservedAt: at}, {ObservedAt: at.UTC()}},
			Scope:      particle.Scope{TimeRange: particle.TimeRange{To: at}, Location: "lab", Audience: []string{"ops"}},
			ValidFrom:  at, ValidTo: at.Add(time.Hour)},
			{ID: "e2", Scope: particle.Scope{TimeRange: particle.TimeRange{From: at}}},
			{ID: "e3", Scope: particle.Scope{TimeRange: particle.TimeRange{From: at, To: at}}, Provenance: []particle.Provenance{}}},
		Unknowns:       []Unknown{{Kind: "tool", Name: "<laser>"}},
		Contradictions: []Contradiction{{Subject: "s", Predicate: "p", EdgeA: "a", EdgeB: "b", ConfidenceA: 0.25, ConfidenceB: 1}},
		ContextState:   &ContextState{Dim: 3, Norm: 1, Top: []DimWeight{{Dim: 1, Value: 1e-7}}, Vector: []float32{0.1, -3e-9, 1e22}},
		Timings:        Timings{EmbedUS: 1, WaitUS: 3, KeywordUS: 2, TotalUS: 9},
		Strategy:       "hybrid", StrategyReason: "because", Truncated: true,
	}
}

func TestAnswerJSONRejectsWhatJSONCannotHold(t *testing.T) {
	for _, bad := range []*Answer{
		{Nodes: []NodeOut{{Score: math.NaN()}}},
		{Edges: []EdgeOut{{Score: math.Inf(1)}}},
		{Edges: []EdgeOut{{ValidFrom: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
	} {
		if _, err := bad.AppendJSON(nil); err == nil {
			t.Errorf("%+v encoded without an error", bad)
		}
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("encoding/json took %+v", bad)
		}
	}
}

// The hand-written encoder knows these types' JSON fields: a field added
// to one of them must be added to answer_json.go (and here).
func TestAnswerJSONKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Answer{}, "nodes edges unknowns hypotheses contradictions context_state,omitempty timings_us strategy strategy_reason,omitempty truncated"},
		{NodeOut{}, "id type name aliases,omitempty tags,omitempty score belief seed hop rlds_episode_ids,omitempty cms_span_ids,omitempty"},
		{EdgeOut{}, "id source target source_name target_name type predicate value,omitempty confidence salience score status hypothesis evidence provenance scope valid_from valid_to,omitzero"},
		{Unknown{}, "kind name"},
		{Contradiction{}, "subject predicate edge_a edge_b confidence_a confidence_b"},
		{ContextState{}, "dim norm top vector"},
		{DimWeight{}, "dim value"},
		{Timings{}, "embed wait,omitempty prefilter keyword,omitempty expand rerank stitch total"},
		{particle.Provenance{}, "episode_id,omitempty step_index,omitempty cms_span_id,omitempty agent,omitempty observed_at"},
		{particle.Scope{}, "time_range location,omitempty audience,omitempty"},
		{particle.TimeRange{}, "from,omitzero to,omitzero"},
	} {
		rt := reflect.TypeOf(c.v)
		var tags []string
		for f := range rt.Fields() {
			if tag := f.Tag.Get("json"); tag != "-" && f.IsExported() { // not in the formats
				tags = append(tags, tag)
			}
		}
		if got := strings.Join(tags, " "); got != c.want {
			t.Errorf("%s has JSON fields %q; the encoder writes %q", rt, got, c.want)
		}
		for m := range reflect.PointerTo(rt).Methods() {
			if slices.Contains([]string{"MarshalJSON", "MarshalText"}, m.Name) {
				t.Errorf("%s has %s, which the encoder does not call", rt, m.Name)
			}
		}
	}
}

// TestJSONStringMatchesEncodingJSON writes strings built from every
// byte class str treats differently (safe ASCII runs longer and shorter
// than the 8-byte fast path, controls, quotes, backslashes, <, > and &,
// multi-byte UTF-8, U+2028/U+2029, invalid bytes) at every offset, and
// compares with encoding/json.
func TestJSONStringMatchesEncodingJSON(t *testing.T) {
	pieces := []string{"a", "robot-7 ", "0123456789abcdef", "\"", "\\", "<", ">", "&", "\n", "\x00", "\x1f", "\x7f",
		"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		checkJSONString(t, sb.String())
	}
}

// FuzzJSONString compares str with encoding/json on arbitrary strings.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain ascii text here", "a<b>&\"\\\n", "\xff\xfe", "\u2028x"} {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}

func checkJSONString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	w := jsonWriter{}
	w.str(s)
	if string(w.b) != string(want) {
		t.Fatalf("%q: str wrote %s, encoding/json %s", s, w.b, want)
	}
}
