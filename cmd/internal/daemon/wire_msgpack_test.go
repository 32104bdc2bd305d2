package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
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

// The same episodes and CMS spans sent as msgpack through a real NATS
// connection make the same graph as their JSON; bad msgpack is
// dead-lettered with its reason, and a good step after it applies.
func TestMsgpackEpisodesMakeTheGraphTheirJSONMakes(t *testing.T) {
	msgs := readMessages(t, "episodes.jsonl")

	dj := startDaemon(t, testConfig(t.TempDir()))
	cj := connect(t, dj)
	cj.publishAll(msgs)
	cj.waitApplied()
	cj.publishSpans("spans.jsonl") // after the episodes, as below: the streams' order is the graph's
	cj.waitApplied()

	dm := startDaemon(t, testConfig(t.TempDir()))
	cm := connect(t, dm)
	cm.publishAs(msgs, true)
	cm.waitApplied()
	cm.publishSpansAs("spans.jsonl", true) // the CMS spans in msgpack too
	cm.waitApplied()
	if n := dm.Store().Counts().Spans; n == 0 {
		t.Fatal("no spans stored")
	}
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
	badSpan, err := msgp.AppendIntf(nil, map[string]any{"id": "s-mp", "levle": int64(0)})
	if err != nil {
		t.Fatal(err)
	}
	cm.publishRaw("ctxgraph.cms.0", badSpan)
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
	if cl := deadLetters(t, cm, StreamCMS); len(cl) != 1 || !strings.Contains(cl[0].Error, "levle: unknown field") || !bytes.Equal(cl[0].Payload, badSpan) {
		t.Errorf("bad msgpack span: dead letters %v", reasons(cl))
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

// A planner request in msgpack over NATS gets the answer its JSON gets,
// in msgpack when it asks for it; a bad one gets a clear error reply and
// the daemon serves on.
func TestMsgpackPlannerRequestsOverNATS(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	want := edgeNames(c.ask(redBlockQuery))
	if len(want) == 0 {
		t.Fatal("no edges in the JSON answer")
	}
	for _, format := range []string{"", "msgpack"} {
		req := redBlockQuery
		req.Format = format
		reply, err := c.nc.Request("ctxgraph.planner.context", req.AppendMsgpack(nil), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st := reply.Header.Get("Status"); st != "" {
			t.Fatalf("format %q: status %s: %s", format, st, reply.Data)
		}
		var a *planner.Answer
		if format == "msgpack" {
			a, err = planner.DecodeMsgpackAnswer(reply.Data)
		} else {
			a = new(planner.Answer)
			err = json.Unmarshal(reply.Data, a)
		}
		if err != nil {
			t.Fatalf("format %q: %v", format, err)
		}
		if got := edgeNames(a); !slices.Equal(got, want) {
			t.Errorf("format %q: msgpack request answered %v, JSON %v", format, got, want)
		}
	}
	// And over HTTP.
	req := redBlockQuery
	req.Format = "msgpack"
	resp, err := http.Post("http://"+d.HTTPAddr()+"/v1/context", planner.MsgpackMediaType, bytes.NewReader(req.AppendMsgpack(nil)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP: %s, %v: %s", resp.Status, err, body)
	}
	if a, err := planner.DecodeMsgpackAnswer(body); err != nil || !slices.Equal(edgeNames(a), want) {
		t.Errorf("HTTP msgpack request: %v, %v; want %v", a, err, want)
	}
	bad, err := msgp.AppendIntf(nil, map[string]any{"query": "red block", "hopz": int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	status, eb := c.askErr(bad)
	if status != "400" || eb.Error.Code != "invalid_request" || !strings.Contains(eb.Error.Message, "hopz: unknown field") {
		t.Errorf("bad msgpack request: status %q %+v", status, eb)
	}
	if got := edgeNames(c.ask(redBlockQuery)); !slices.Equal(got, want) {
		t.Errorf("after the bad request the answer is %v, want %v", got, want)
	}
}
