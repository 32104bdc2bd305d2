package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/plannertest"
)

// askRaw sends a planner request over NATS and returns the reply body,
// failing the test on an error reply.
func (c *controller) askRaw(req planner.Request) string {
	c.t.Helper()
	body, _ := json.Marshal(req)
	reply, err := c.nc.Request("ctxgraph.planner.context", body, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	if s := reply.Header.Get("Status"); s != "" {
		c.t.Fatalf("planner error %s: %s", s, reply.Data)
	}
	return string(reply.Data)
}

// testdataDaemon starts a daemon in dir with the testdata episodes and
// CMS spans applied and indexed.
func testdataDaemon(t *testing.T, dir string) (*Daemon, *controller) {
	t.Helper()
	d := startDaemon(t, testConfig(dir))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.publishSpans("spans.jsonl")
	c.waitApplied()
	return d, c
}

// factLines counts the lines of a line format that are not comments.
func factLines(s string) int {
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// Every format, asked for over NATS like a planner would, renders the
// same answer: the Turtle parses with rdflib and has as many facts as
// the triples format has lines; the Cypher parses and declares every
// edge; the text has a sentence per fact.
func TestFormatsThroughTheDaemon(t *testing.T) {
	d, c := testdataDaemon(t, t.TempDir())

	req := redBlockQuery
	req.Strategy = planner.StrategySemantic
	ans := c.ask(req)
	if len(ans.Edges) == 0 {
		t.Fatal("empty answer")
	}
	out := map[string]string{}
	for _, f := range []string{"triples", "cypher", "turtle", "text"} {
		r := req
		r.Format = f
		out[f] = c.askRaw(r)
		if json.Valid([]byte(out[f])) {
			t.Errorf("format %s answered JSON:\n%s", f, out[f])
		}
	}

	typed := len(ans.Nodes) // every answer node has a type
	facts := typed + len(ans.Edges) + len(ans.Contradictions)
	if got := factLines(out["triples"]); got != facts {
		t.Errorf("triples: %d fact lines, want %d nodes + %d edges + %d contradictions", got, len(ans.Nodes), len(ans.Edges), len(ans.Contradictions))
	}
	res := plannertest.ParseTurtle(t, out["turtle"])[0]
	if res.Error != "" {
		t.Fatalf("rdflib: %s\n%s", res.Error, out["turtle"])
	}
	if len(res.Facts) != facts {
		t.Errorf("turtle: %d facts, triples: %d lines", len(res.Facts), facts)
	}
	if len(res.Edges) != len(ans.Edges) {
		t.Errorf("turtle: %d edge resources, want %d", len(res.Edges), len(ans.Edges))
	}
	st, err := plannertest.ParseCypher(out["cypher"])
	if err != nil {
		t.Fatalf("cypher: %v\n%s", err, out["cypher"])
	}
	if len(st.Rels) != len(ans.Edges) || st.Return[1] != len(ans.Edges) || len(st.Nodes) < len(ans.Nodes) {
		t.Errorf("cypher: %d nodes %d relationships, answer %d nodes %d edges", len(st.Nodes), len(st.Rels), len(ans.Nodes), len(ans.Edges))
	}
	if got := strings.Count(out["text"], "\n"); got != 1+facts+len(ans.Unknowns) {
		t.Errorf("text: %d lines, want %d:\n%s", got, 1+facts+len(ans.Unknowns), out["text"])
	}
	if !strings.Contains(out["text"], "red block located in blue bowl") {
		t.Errorf("text lacks the located_in fact:\n%s", out["text"])
	}
	// Over HTTP the media type says what the body is.
	b, _ := json.Marshal(planner.Request{Query: "red block", Format: "turtle"})
	resp, err := http.Post("http://"+d.HTTPAddr()+"/v1/context", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/turtle") {
		t.Errorf("POST /v1/context format turtle: %d %q", resp.StatusCode, ct)
	}
	// An unknown format is refused.
	body, _ := json.Marshal(planner.Request{Query: "red block", Format: "rdf/xml"})
	if status, eb := c.askErr(body); status != "400" || eb.Error.Code != "invalid_request" {
		t.Errorf("unknown format: status %s %+v", status, eb)
	}
}

// Keyword retrieval end to end: the span text the robots' CMS writers
// sent is searchable once ingest acknowledged it, auto picks keyword
// for a quoted phrase, /v1/strategies says why, /v1/search ranks
// without expanding, and the index on disk is reused after a restart.
func TestKeywordStrategyThroughTheDaemon(t *testing.T) {
	dir := t.TempDir()
	d, c := testdataDaemon(t, dir)

	a := c.ask(planner.Request{Query: `"fixture calibration"`, Hops: 1})
	if a.Strategy != planner.StrategyKeyword || !strings.HasPrefix(a.StrategyReason, "auto: ") {
		t.Errorf("auto on a quoted phrase: strategy %q (%s)", a.Strategy, a.StrategyReason)
	}
	if !slices.ContainsFunc(a.Nodes, func(n planner.NodeOut) bool { return n.Name == "fixture calibration" && n.Seed }) {
		t.Errorf("keyword answer lacks the span's concept as a seed: %v", nodeNamesOf(a))
	}
	h := c.ask(planner.Request{Query: "peg insertion calibration", Strategy: planner.StrategyHybrid})
	if h.Strategy != planner.StrategyHybrid || len(h.Nodes) == 0 {
		t.Errorf("hybrid: %q with %d nodes", h.Strategy, len(h.Nodes))
	}

	var adv planner.Advice
	if s := httpDo(t, d, "POST", "/v1/strategies", planner.Request{Query: "what happened in ep-alpha-0001"}, &adv); s != 200 {
		t.Fatalf("POST /v1/strategies: %d", s)
	}
	if adv.Chosen != planner.StrategyHybrid || len(adv.Suggestions) != 5 || !slices.Contains(adv.Signals.Identifiers, "ep-alpha-0001") {
		t.Errorf("advice %+v", adv)
	}
	if s := httpDo(t, d, "POST", "/v1/strategies", planner.Request{Query: "x", Strategy: "magic"}, nil); s != 400 {
		t.Errorf("unknown strategy: %d, want 400", s)
	}

	search := func(d *Daemon) planner.SearchResult {
		t.Helper()
		var res planner.SearchResult
		if s := httpDo(t, d, "POST", "/v1/search", planner.Request{Query: "fixture calibration", K: 3}, &res); s != 200 {
			t.Fatalf("POST /v1/search: %d", s)
		}
		return res
	}
	before := search(d)
	// The concept named exactly so ranks first (a short document), then
	// the span whose text holds the phrase, with the nodes it touched.
	span := slices.IndexFunc(before.Hits, func(h planner.SearchHit) bool { return h.Kind == "span" })
	if before.Strategy != planner.StrategyKeyword || len(before.Hits) == 0 || before.Hits[0].Name != "fixture calibration" || span < 0 ||
		before.Hits[span].ID != "span-0200" || before.Hits[span].Text != "peg insertion fails without the fixture calibration" || len(before.Hits[span].Nodes) == 0 {
		t.Fatalf("search: %+v", before)
	}

	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keyword")); err != nil {
		t.Fatalf("keyword index not on disk: %v", err)
	}
	d2 := startDaemon(t, testConfig(dir))
	after := search(d2)
	if len(after.Hits) != len(before.Hits) || after.Hits[0].ID != before.Hits[0].ID || after.Hits[0].Score != before.Hits[0].Score {
		t.Errorf("search after restart %+v, before %+v", after.Hits, before.Hits)
	}
	// The store was not written meanwhile: the index came back with the
	// documents it saved, the nodes listing each span among them.
	if i := slices.IndexFunc(after.Hits, func(h planner.SearchHit) bool { return h.Kind == "span" }); i < 0 ||
		!slices.Equal(after.Hits[i].Nodes, before.Hits[span].Nodes) {
		t.Errorf("span hit after restart %+v, before %+v", after.Hits, before.Hits[span])
	}
}

func nodeNamesOf(a *planner.Answer) []string {
	var out []string
	for _, n := range a.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// The msgpack format, asked for over NATS, is the JSON answer in
// MessagePack: the same nodes, edges and provenance, a third of the
// bytes; over HTTP its media type says so.
func TestMsgpackAnswersThroughTheDaemon(t *testing.T) {
	d, c := testdataDaemon(t, t.TempDir())
	req := redBlockQuery
	req.Strategy = planner.StrategySemantic
	req.Hops = 2
	asJSON := c.askRaw(req)
	req.Format = "msgpack"
	raw := c.askRaw(req)
	got, err := planner.DecodeMsgpackAnswer([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	var want planner.Answer
	if err := json.Unmarshal([]byte(asJSON), &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Edges) == 0 {
		t.Fatal("empty answer")
	}
	// Timings differ between the two calls; the subgraph does not.
	got.Timings, want.Timings = planner.Timings{}, planner.Timings{}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(&want)
	if !bytes.Equal(g, w) {
		t.Errorf("msgpack answer differs from the JSON one:\n got %s\nwant %s", g, w)
	}
	if len(raw)*2 > len(asJSON) {
		t.Errorf("msgpack answer %d bytes, JSON %d", len(raw), len(asJSON))
	}
	b, _ := json.Marshal(req)
	resp, err := http.Post("http://"+d.HTTPAddr()+"/v1/context", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != planner.MsgpackMediaType {
		t.Errorf("POST /v1/context format msgpack: %d %q", resp.StatusCode, ct)
	}
	if _, err := planner.DecodeMsgpackAnswer(body.Bytes()); err != nil {
		t.Errorf("the HTTP body: %v", err)
	}
}
