package rlds

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// testStepMessages is testdata/episodes.jsonl decoded.
func testStepMessages(t *testing.T) []*Message {
	t.Helper()
	var out []*Message
	for _, b := range testdataLines(t, "episodes.jsonl") {
		m, err := DecodeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// stepsOf lists the steps msgs carry, by episode, in the order sent.
func stepsOf(msgs []*Message) map[string][]Step {
	out := map[string][]Step{}
	for _, m := range msgs {
		if m.Step != nil {
			out[m.EpisodeID] = append(out[m.EpisodeID], *m.Step)
		}
		out[m.EpisodeID] = append(out[m.EpisodeID], m.Steps...)
	}
	return out
}

// A steps message reads the same from its JSON (fast decoder and
// encoding/json alike) and its msgpack, and carries its steps as they
// were.
func TestStepsMessageDecodesAsWritten(t *testing.T) {
	msgs := testStepMessages(t)
	grouped := GroupSteps(msgs, 3)
	n := 0
	for _, m := range grouped {
		if m.Kind != KindSteps {
			continue
		}
		n++
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFastAgrees(t, b) {
			t.Fatalf("fast decoder did not take a steps message:\n%s", b)
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("steps message refused: %v", err)
		}
		mp, err := got.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		fromMP, err := DecodeMessage(mp)
		if err != nil {
			t.Fatalf("msgpack steps message refused: %v", err)
		}
		if !reflect.DeepEqual(fromMP, got) {
			t.Fatalf("msgpack decodes to\n%+v\nwant\n%+v", fromMP, got)
		}
		first, last := got.Steps[0].Index, got.Steps[len(got.Steps)-1].Index
		if want := fmt.Sprintf("%s/%d-%d", got.EpisodeID, first, last); got.MsgID() != want {
			t.Errorf("MsgID %q, want %q", got.MsgID(), want)
		}
	}
	if n == 0 {
		t.Fatal("no steps message made of the test episodes")
	}
	if !reflect.DeepEqual(stepsOf(grouped), stepsOf(msgs)) {
		t.Fatal("the steps messages do not carry the episodes' steps as sent")
	}
}

// A steps message a sender got wrong is refused whole, naming the step
// at fault.
func TestStepsMessageRefusals(t *testing.T) {
	head := `{"kind":"steps","agent":"a","episode_id":"e",`
	many := make([]string, MaxStepsPerMessage+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"index":%d}`, i)
	}
	for _, c := range []struct{ body, want string }{
		{`"steps":[]}`, "at least one step"},
		{`"steps":null}`, "exactly one of start, step, steps, end"},
		{`"steps":[` + strings.Join(many, ",") + `]}`, "more than 1024"},
		{`"steps":[{"index":4},{"index":4}]}`, "steps[1] has index 4 after index 4"},
		{`"steps":[{"index":4},{"index":2}]}`, "indices must increase"},
		{`"steps":[{"index":1},{"index":2,"reward":1e400}]}`, "reward"},
		{`"steps":[{"index":1},{"index":2,"annotations":{"events":[{"subject":"a","predicate":"","object":"c"}]}}]}`, "steps[1] (index 2): rlds: invalid message: event 0 needs subject"},
		{`"steps":[{"index":1}],"step":{"index":2}}`, "exactly one of"},
		{`"step":{"index":2}}`, "kind steps needs at least one step"},
	} {
		body := []byte(head + c.body)
		_, err := DecodeMessage(body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.120s: err = %v, want it to say %q", body, err, c.want)
			continue
		}
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNonFinite) {
			t.Errorf("%.120s: err %v is not one the daemon dead-letters", body, err)
		}
		// The same refusal in msgpack, where the message can be written.
		var m Message
		if json.Unmarshal(body, &m) != nil {
			continue
		}
		mp, err := m.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeMessage(mp); err == nil {
			t.Errorf("msgpack of %.120s accepted", body)
		}
	}
}

func TestStepGrouper(t *testing.T) {
	step := func(ep string, idx int) *Message {
		return &Message{Kind: KindStep, Agent: "a", EpisodeID: ep, Step: &Step{Index: idx}}
	}
	mark := func(ep string, k Kind) *Message { return &Message{Kind: k, Agent: "a", EpisodeID: ep} }
	in := []*Message{
		mark("x", KindEpisodeStart), mark("y", KindEpisodeStart),
		step("x", 0), step("y", 0), step("x", 1), step("y", 1), step("x", 2), // x: 0-2 full
		step("y", 2), step("x", 3), step("y", 5), step("y", 4), // y: 4 does not follow 5
		mark("x", KindEpisodeEnd), step("z", 7), step("y", 6),
	}
	g := StepGrouper{N: 3}
	var out []string
	for _, m := range in {
		for _, r := range g.Add(m) {
			out = append(out, r.EpisodeID+":"+r.MsgID()[len(r.EpisodeID)+1:]+":"+string(r.Kind))
		}
	}
	out = append(out, "flush")
	for _, r := range g.Flush() {
		out = append(out, r.EpisodeID+":"+r.MsgID()[len(r.EpisodeID)+1:]+":"+string(r.Kind))
	}
	want := []string{
		"x:start:episode_start", "y:start:episode_start",
		"x:0-2:steps",
		"y:0-2:steps",
		"y:5:step", // sent alone when 4 came after it
		"x:3:step", // the end sends x's held step first
		"x:end:episode_end",
		"flush", "y:4-6:steps", "z:7:step", // y's held steps began before z's
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("grouped:\n%s\nwant:\n%s", strings.Join(out, "\n"), strings.Join(want, "\n"))
	}
	if got := (&StepGrouper{N: 1}).Add(step("x", 0)); len(got) != 1 || got[0].Kind != KindStep {
		t.Fatalf("N=1 gave %+v, want the step as it came", got)
	}
}
