package daemon

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// facts lists what ingest made of the episodes: every node with its
// episodes, every edge by its ends with its evidence, confidence and
// provenance, and the stored steps (edge ids, made from the clock, and
// salience, which decays with it, left out).
func facts(s *particle.Store) string {
	var lines []string
	s.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			lines = append(lines, fmt.Sprintf("N %s %s %s %v", n.ID, n.Type, n.Name, n.Attributes.RLDSEpisodeIDs))
			return true
		})
		r.Edges(func(e *particle.Edge) bool { // edge ids are made from the clock
			l := fmt.Sprintf("E %s %s %s %s %d %.9f", e.Type, e.Source, e.Predicate(), e.Target, e.Evidence, e.Confidence)
			for _, p := range e.Provenance {
				step := -1
				if p.StepIndex != nil {
					step = *p.StepIndex
				}
				l += fmt.Sprintf(" (%s %d %s %s %s)", p.EpisodeID, step, p.CMSSpanID, p.Agent, p.ObservedAt.UTC().Format(time.RFC3339Nano))
			}
			lines = append(lines, l)
			return true
		})
	})
	slices.Sort(lines)
	return fmt.Sprintf("%d steps\n%s", s.Counts().Steps, strings.Join(lines, "\n"))
}

// The same episodes sent as msgpack through a real NATS connection make
// the same graph as their JSON; bad msgpack is dead-lettered with its
// reason, and a good step after it applies.
func TestMsgpackEpisodesMakeTheGraphTheirJSONMakes(t *testing.T) {
	msgs := readMessages(t, "episodes.jsonl")

	dj := startDaemon(t, testConfig(t.TempDir()))
	cj := connect(t, dj)
	cj.publishAll(msgs)
	cj.waitApplied()

	dm := startDaemon(t, testConfig(t.TempDir()))
	cm := connect(t, dm)
	p := cm.publishAll(nil)
	p.Msgpack = true
	for _, m := range msgs {
		if err := p.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	cm.waitApplied()
	if want, got := facts(dj.Store()), facts(dm.Store()); got != want {
		t.Fatalf("msgpack made\n%s\nJSON made\n%s", got, want)
	}
	if n := dm.Store().Counts().Steps; n == 0 {
		t.Fatal("no steps stored")
	}
	if a, b := edgeNames(cj.ask(redBlockQuery)), edgeNames(cm.ask(redBlockQuery)); !slices.Equal(a, b) || len(a) == 0 {
		t.Fatalf("planner answers differ: msgpack %v, JSON %v", b, a)
	}
	before := facts(dm.Store())

	// Bad msgpack: dead-lettered with the reason, as its sender's JSON
	// would be.
	good := &rlds.Message{Kind: rlds.KindStep, Agent: "mp-bot", EpisodeID: "m1", Step: &rlds.Step{Index: 0,
		Annotations: &rlds.Annotations{Entities: []string{"yellow cone"}}}}
	goodBody, err := good.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	step := func(ep string, fields map[string]any) []byte {
		s := map[string]any{"index": int64(0)}
		for k, v := range fields {
			s[k] = v
		}
		b, err := msgp.AppendIntf(nil, map[string]any{"kind": "step", "agent": "mp-bot", "episode_id": ep, "step": s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := []struct {
		name, subject string
		body          []byte
		reason        string
	}{
		{"truncated", "ctxgraph.rlds.mp-bot.b1", goodBody[:len(goodBody)-3], "malformed"},
		{"unknown field", "ctxgraph.rlds.mp-bot.b2", step("b2", map[string]any{"rewardd": 1.0}), "rewardd: unknown field"},
		{"NaN embedding", "ctxgraph.rlds.mp-bot.b3", step("b3", map[string]any{"annotations": map[string]any{"events": []any{
			map[string]any{"subject": "a", "predicate": "on", "object": "b", "embedding": []any{1.0, math.NaN()}}}}}), "non-finite"},
		{"wrong type", "ctxgraph.rlds.mp-bot.b4", step("b4", map[string]any{"is_first": "yes"}), "is_first"},
	}
	for _, b := range bad {
		cm.publishRaw(b.subject, b.body)
	}
	cm.publishRaw("ctxgraph.rlds.mp-bot.m1", goodBody)
	cm.waitApplied()
	dls := deadLetters(t, cm, StreamRLDS)
	for _, b := range bad {
		found := false
		for _, dl := range dls {
			if dl.Subject == b.subject && strings.Contains(dl.Error, b.reason) && bytes.Equal(dl.Payload, b.body) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no dead letter with reason %q: %v", b.name, b.reason, reasons(dls))
		}
	}
	if len(dls) != len(bad) {
		t.Errorf("%d dead letters, want %d: %v", len(dls), len(bad), reasons(dls))
	}
	after := facts(dm.Store())
	if !strings.Contains(after, "yellow cone") {
		t.Error("the good msgpack step after the bad ones was not applied")
	}
	// Nothing stored before is lost: every line of before is still there.
	have := map[string]bool{}
	for _, l := range strings.Split(after, "\n")[1:] {
		have[l] = true
	}
	for _, l := range strings.Split(before, "\n")[1:] {
		if !have[l] {
			t.Errorf("lost after bad input: %s", l)
		}
	}
}
