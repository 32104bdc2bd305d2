package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// largestStep is the size of the largest step message of msgs, in
// msgpack.
func largestStep(t *testing.T, msgs []*rlds.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Step == nil {
			continue
		}
		b, err := m.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		n = max(n, len(b))
	}
	return n
}

// Episodes sent as steps messages, over NATS in JSON and in msgpack,
// build the graph their steps sent one by one build; a steps message a
// sender got wrong is dead-lettered whole, naming the step, and nothing
// stored is lost; the daemon keeps applying and answering.
func TestStepsMessagesOverNATS(t *testing.T) {
	msgs := readMessages(t, "episodes.jsonl")
	one := startDaemon(t, testConfig(t.TempDir()))
	c1 := connect(t, one)
	c1.publishAll(msgs)
	c1.waitApplied()

	for _, asMsgpack := range []bool{false, true} {
		cfg := testConfig(t.TempDir())
		cfg.Ingest.BatchSize = 6 // a pull of several steps messages takes several transactions
		d := startDaemon(t, cfg)
		c := connect(t, d)
		p := c.publishGrouped(msgs, 4, asMsgpack)
		c.waitApplied()
		if p.Sent >= int64(len(msgs)) {
			t.Fatalf("msgpack %v: %d messages sent for %d, want fewer", asMsgpack, p.Sent, len(msgs))
		}
		if got, want := facts(d.Store()), facts(one.Store()); got != want {
			t.Fatalf("msgpack %v: the steps messages built\n%s\none by one:\n%s", asMsgpack, got, want)
		}
		if got, want := d.Store().Counts().Steps, one.Store().Counts().Steps; got != want {
			t.Fatalf("msgpack %v: %d steps stored, one by one %d", asMsgpack, got, want)
		}
		if asMsgpack {
			// Under a limit of about two steps a message, the publisher
			// sends its steps messages in parts that fit.
			small := startDaemon(t, testConfig(t.TempDir()))
			cs := connect(t, small)
			p := client.NewPublisher(cs.js, "ctxgraph", 0)
			p.Msgpack, p.StepsPerMessage, p.MaxMessageBytes = true, 8, 2*largestStep(t, msgs)
			for _, m := range msgs {
				if err := p.Publish(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			cs.waitApplied()
			if whole := len(rlds.GroupSteps(msgs, 8)); p.Sent <= int64(whole) {
				t.Errorf("%d messages sent under the limit, as many as %d without it", p.Sent, whole)
			}
			if got, want := facts(small.Store()), facts(one.Store()); got != want {
				t.Fatalf("steps messages halved to fit built\n%s\none by one:\n%s", got, want)
			}
			continue
		}
		before := facts(d.Store())
		answer := answerShape(c.ask(redBlockQuery))
		bad := []struct{ name, body, reason string }{
			{"indices not increasing", `{"kind":"steps","agent":"bad-bot","episode_id":"s1","steps":[{"index":2},{"index":1}]}`,
				"steps[1] has index 1 after index 2"},
			{"a step that cannot be read", `{"kind":"steps","agent":"bad-bot","episode_id":"s2","steps":[{"index":0},{"index":1,"reward":"lots"}]}`,
				"malformed"},
			{"a feature changing shape", `{"kind":"steps","agent":"bad-bot","episode_id":"s3","steps":[{"index":0,"observation":{"state":[1,2,3]}},{"index":1,"observation":{"state":[1,2]}}]}`,
				"steps[1] (index 1)"},
		}
		for _, b := range bad {
			c.publishRaw("ctxgraph.rlds.bad-bot."+strings.Split(strings.Split(b.body, `"episode_id":"`)[1], `"`)[0], []byte(b.body))
		}
		good := []*rlds.Message{
			{Kind: rlds.KindEpisodeStart, Agent: "good-bot", EpisodeID: "g1", Start: &rlds.EpisodeStart{LanguageInstruction: "stack the green cube"}},
			{Kind: rlds.KindStep, Agent: "good-bot", EpisodeID: "g1", Step: &rlds.Step{Index: 0, Annotations: &rlds.Annotations{Entities: []string{"green cube"}}}},
			{Kind: rlds.KindStep, Agent: "good-bot", EpisodeID: "g1", Step: &rlds.Step{Index: 1}},
		}
		c.publishGrouped(good, 8, false)
		c.waitApplied()
		dls := deadLetters(t, c, StreamRLDS)
		for _, b := range bad {
			found := false
			for _, dl := range dls {
				if strings.Contains(dl.Error, b.reason) && string(dl.Payload) == b.body {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no dead letter saying %q; have %v", b.name, b.reason, reasons(dls))
			}
		}
		for _, ep := range []string{"s1", "s2", "s3"} {
			if _, err := d.Store().Episode(particle.DefaultNamespace, ep); err == nil {
				t.Errorf("episode %s of a refused steps message was stored", ep)
			}
		}
		if ep, err := d.Store().Episode(particle.DefaultNamespace, "g1"); err != nil || ep.Steps != 2 {
			t.Errorf("good episode after the bad steps messages: %+v, %v", ep, err)
		}
		after := strings.Split(facts(d.Store()), "\n")
		for _, line := range strings.Split(before, "\n") {
			if (strings.HasPrefix(line, "N ") || strings.HasPrefix(line, "E ")) && !slices.Contains(after, line) {
				t.Errorf("after the bad steps messages, %q is gone", line)
			}
		}
		if got := answerShape(c.ask(redBlockQuery)); got != answer {
			t.Error("the planner's answer changed after bad steps messages")
		}
	}
}
