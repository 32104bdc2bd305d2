package cms_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

func TestDecodeRejectsBadSpans(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"id":"s1","level":0}`, ""},
		{`{"id":"s1","level":0,"bogus":1}`, "unknown field"},
		{`{"id":"","level":0}`, "id is required"},
		{`{"id":"s1","level":99}`, "level 99"},
		{`{"id":"s1","level":0,"start":"2026-01-02T00:00:00Z","end":"2026-01-01T00:00:00Z"}`, "before start"},
		{`{"id":"s1","level":0,"update_size":-0.5}`, "update_size"},
		{`{"id":"s1","level":0,"embedding":[1,2,3]}`, "3 dimensions, want 4"},
		{`{"id":"s1","level":0,"period":"often"}`, "period"},
		{`{"id":"s1","level":0,"tenant":"lab-a","project":"arm.2"}`, ""},
		{`{"id":"s1","level":0,"tenant":"lab/a"}`, "tenant"},
		{`{"id":"s1","level":0,"project":"a b"}`, "project"},
		{`{"id":"s1","level":0,"concepts":["ok"," "]}`, "concept 1 is empty"},
		{`{"id":"s1",`, "malformed"},
	} {
		_, err := cms.Decode([]byte(tc.body), 4)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !(errors.Is(err, cms.ErrInvalid) || errors.Is(err, cms.ErrMalformed)) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestBandFor(t *testing.T) {
	bands := cms.DefaultBands()
	if b := cms.BandFor(bands, 1); b.HalfLife != 6*time.Hour {
		t.Errorf("level 1: %+v", b)
	}
	if b := cms.BandFor(bands, 7); b.Level != 3 || b.Decay != wave.DecayPower {
		t.Errorf("a level slower than every band uses the slowest: %+v", b)
	}
}

func TestApplySpan(t *testing.T) {
	o := particle.DefaultOptions(t.TempDir())
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ap := &cms.Applier{Embedder: embed.NewHashing(16)}
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	apply := func(sp *cms.Span) {
		t.Helper()
		if _, err := s.Update(ctx, func(b *particle.Batch) error { return ap.Apply(ctx, b, sp) }); err != nil {
			t.Fatal(err)
		}
	}
	step := 2
	fast := &cms.Span{ID: "s-fast", Level: 0, Start: t0, End: t0.Add(time.Minute), StepStart: &step,
		Text: "gripper slips on the wet cup", Concepts: []string{"Grasp Slip", "wet surface"}, Entities: []string{"cup"}, UpdateSize: 0.6}
	slow := &cms.Span{ID: "s-slow", Level: 3, Start: t0, End: t0.Add(time.Hour),
		Concepts: []string{"grasp slip", "friction"}, UpdateSize: 0.3}
	apply(fast)
	apply(slow)
	apply(fast) // a redelivered span changes nothing

	s.Read(func(r particle.Reader) {
		slip := r.Lookup(particle.DefaultNamespace, particle.NodeConcept, "grasp slip")
		if slip == nil {
			t.Fatal("concept node missing")
		}
		if !slices.Equal(slip.Attributes.CMSSpanIDs, []string{"s-fast", "s-slow"}) {
			t.Errorf("cms_span_ids = %v", slip.Attributes.CMSSpanIDs)
		}
		cup := r.Lookup(particle.DefaultNamespace, particle.NodeEntity, "cup")
		var about *particle.Edge
		r.Out(slip.ID, func(e *particle.Edge) bool {
			if e.Target == cup.ID {
				about = e
			}
			return true
		})
		if about == nil || about.Evidence != 1 || about.Provenance[0].CMSSpanID != "s-fast" || *about.Provenance[0].StepIndex != 2 {
			t.Fatalf("concept -about-> entity edge = %+v", about)
		}
		if about.Salience.HalfLifeS != (10*time.Minute).Seconds() || about.Salience.Score != 0.6 {
			t.Errorf("level-0 edge salience %+v: want the fast band and the update size", about.Salience)
		}
		var related []*particle.Edge
		r.Edges(func(e *particle.Edge) bool {
			if e.Predicate() == "related_to" {
				related = append(related, e)
			}
			return true
		})
		if len(related) != 2 {
			t.Fatalf("%d related_to edges, want 2", len(related))
		}
		for _, e := range related {
			if e.Provenance[0].CMSSpanID == "s-slow" && e.Salience.DecayFn != string(wave.DecayPower) {
				t.Errorf("level-3 edge decays %s, want power", e.Salience.DecayFn)
			}
		}
	})
	if c := s.Counts(); c.Spans != 2 || c.SpansLevels[0] != 1 || c.SpansLevels[3] != 1 {
		t.Errorf("span counts %+v", c)
	}
	raw, err := s.Span(particle.DefaultNamespace, "s-fast")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := cms.DecodeStored(raw)
	if err != nil || len(stored.Embedding) != 16 {
		t.Errorf("stored span: embedding from text %d-d, %v", len(stored.Embedding), err)
	}
	if id, text, err := cms.DecodeStoredText(raw); err != nil || id != stored.ID || text != stored.Text || text == "" {
		t.Errorf("stored span's id and text: %q %q %v, want %q %q", id, text, err, stored.ID, stored.Text)
	}
	if _, _, err := cms.DecodeStoredText([]byte(`{"id": 7}`)); !errors.Is(err, cms.ErrMalformed) {
		t.Errorf("a malformed stored span: %v, want ErrMalformed", err)
	}
}
