package rlds

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// randomAnnotations draws annotations whose names may need escaping
// (quotes, HTML, controls, non-ASCII, invalid UTF-8), with nil, empty
// and full lists, and confidences from tiny to huge, negative zero and
// non-finite ones.
func randomAnnotations(r *rand.Rand) *Annotations {
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		const plain = "abc XYZ_09-./:@"
		special := []string{`"`, `\`, "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\xff", "~"}
		var b []byte
		for range 1 + r.IntN(10) {
			if r.IntN(12) == 0 {
				b = append(b, special[r.IntN(len(special))]...)
			} else {
				b = append(b, plain[r.IntN(len(plain))])
			}
		}
		return string(b)
	}
	strs := func() []string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	floats := []float64{0, math.Copysign(0, -1), 1, 0.9, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 123456789, -0.25,
		math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(1), math.NaN()}
	an := &Annotations{Entities: strs(), Tool: str(), Goal: str(), Intent: str(), Location: str(), SceneTags: strs()}
	switch r.IntN(4) {
	case 0:
	case 1:
		an.Events = []Event{}
	default:
		for range 1 + r.IntN(3) {
			ev := Event{Subject: str(), Predicate: str(), Object: str(), EdgeType: str(), Value: str(),
				AllowRoles: strs(), DenyRoles: strs(), Audience: strs()}
			if r.IntN(3) > 0 {
				f := floats[r.IntN(len(floats))]
				if r.IntN(2) == 0 {
					f = r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
				}
				ev.Confidence = &f
			}
			if r.IntN(10) == 0 {
				ev.Embedding = []float32{0.5, 1}
			}
			an.Events = append(an.Events, ev)
		}
	}
	return an
}

// TestAnnotationsJSONIsMarshal checks the hand-written JSON of a step's
// annotations against encoding/json, byte for byte, wherever it writes.
func TestAnnotationsJSONIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	wrote := 0
	for range 50000 {
		an := randomAnnotations(r)
		got, ok := annotationsJSON(an)
		want, err := json.Marshal(stepExtra{Annotations: an})
		if !ok {
			continue
		}
		wrote++
		if err != nil {
			t.Fatalf("%+v: json.Marshal fails (%v), annotationsJSON wrote %s", an, err, got)
		}
		if string(got) != string(want) {
			t.Fatalf("%+v:\n got %s\nwant %s", an, got, want)
		}
	}
	if wrote < 5000 {
		t.Fatalf("annotationsJSON wrote only %d of 50000", wrote)
	}
	t.Logf("annotationsJSON wrote %d of 50000", wrote)
}
