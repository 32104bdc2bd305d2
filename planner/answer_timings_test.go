package planner

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// timedAnswers are answers with distinct timings, some of whose strings
// and metadata say "timings_us" as a key would.
func timedAnswers(t *testing.T) []*Answer {
	answers := append(labAnswers(t), oddAnswer(), bigAnswer(), &Answer{})
	r := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		answers = append(answers, finite(randomAnswer(r)))
	}
	decoy := bigAnswer()
	decoy.Nodes[0].Name = `"timings_us":{"total":1}`
	decoy.Edges[0].Value = `timings_us`
	decoy.StrategyReason = `"timings_us": {"total": 2}`
	answers = append(answers, decoy)
	last := oddAnswer()
	last.Strategy, last.StrategyReason = "timings_us", "timings_us"
	answers = append(answers, last)
	for i, a := range answers {
		a.Timings = Timings{EmbedUS: int64(i), WaitUS: int64(i % 2), PrefilterUS: int64(100 + i), KeywordUS: int64(i % 3), ExpandUS: int64(200 + i),
			RerankUS: int64(300 + i), StitchUS: int64(400 + i), TotalUS: int64(1000 + i)}
	}
	return answers
}

func TestAnswerTimingsReadOnlyTheTimings(t *testing.T) {
	for i, a := range timedAnswers(t) {
		mp, err := a.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MsgpackAnswerTimings(mp)
		if err != nil || got != a.Timings {
			t.Fatalf("answer %d, msgpack: %+v, %v; want %+v", i, got, err, a.Timings)
		}
		js, err := a.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = JSONAnswerTimings(js); err != nil || got != a.Timings {
			t.Fatalf("answer %d, JSON: %+v, %v; want %+v", i, got, err, a.Timings)
		}
	}
}

func TestAnswerTimingsRefuseWhatIsNoAnswer(t *testing.T) {
	a := bigAnswer()
	a.Timings.TotalUS = 7
	mp, err := a.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A truncation before the timings fails; none panics.
	for n := range len(mp) {
		if got, err := MsgpackAnswerTimings(mp[:n]); err == nil && got.TotalUS != 7 {
			t.Fatalf("truncated to %d of %d bytes: %+v and no error", n, len(mp), got)
		}
	}
	noTimings := msgp.AppendString(msgp.AppendMapHeader(nil, 1), "v")
	noTimings = msgp.AppendInt(noTimings, MsgpackLayoutVersion)
	if _, err := MsgpackAnswerTimings(noTimings); err == nil || !strings.Contains(err.Error(), "no timings_us") {
		t.Fatalf("an answer without timings: %v", err)
	}
	newer := msgp.AppendString(msgp.AppendMapHeader(nil, 2), "v")
	newer = msgp.AppendInt(newer, MsgpackLayoutVersion+1)
	if _, err := MsgpackAnswerTimings(newer); err == nil || !strings.Contains(err.Error(), "layout version") {
		t.Fatalf("a newer layout: %v", err)
	}
	for _, bad := range []string{``, `{}`, `{"timings_us"}`, `{"strategy":"timings_us"}`, `{"timings_us":[1]}`, `{"timings_us":{"total":"x"}}`, `{"nodes":"timings_us"}`} {
		if got, err := JSONAnswerTimings([]byte(bad)); err == nil {
			t.Fatalf("%s: %+v and no error", bad, got)
		}
	}
	if got, err := JSONAnswerTimings([]byte(`{"timings_us" : {"total": 9}, "truncated": false}`)); err != nil || got.TotalUS != 9 {
		t.Fatalf("white space around the colon: %+v, %v", got, err)
	}
}
