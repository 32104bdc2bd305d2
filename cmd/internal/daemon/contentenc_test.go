package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
)

// askCoded sends req with accept as its Accept-Encoding header (under
// the header name given) and returns the reply.
func (c *controller) askCoded(req planner.Request, header, accept string) *nats.Msg {
	c.t.Helper()
	body, _ := json.Marshal(req)
	m := &nats.Msg{Subject: "ctxgraph.planner.context", Data: body, Header: nats.Header{header: {accept}}}
	reply, err := c.nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return reply
}

// A planner asking for s2 or Snappy gets the answer it would have got
// plain, compressed and named in Content-Encoding; one asking for
// codings the daemon does not write, or for an answer too small to be
// worth it, gets it plain, and so does an error.
func TestCompressedAnswersOverNATS(t *testing.T) {
	d, c := testdataDaemon(t, t.TempDir())
	req := redBlockQuery
	req.Strategy = planner.StrategySemantic
	req.Hops, req.Budget = 2, 256
	plain := c.askRaw(req)
	if len(plain) < contentenc.MinBytes {
		t.Fatalf("the plain answer is %d bytes, under the %d compressed: the test asks for too little", len(plain), contentenc.MinBytes)
	}
	var want planner.Answer
	if err := json.Unmarshal([]byte(plain), &want); err != nil {
		t.Fatal(err)
	}
	want.Timings = planner.Timings{}
	wantJSON, _ := json.Marshal(&want)
	for _, ask := range []struct{ header, accept, coding string }{
		{"Accept-Encoding", "s2", contentenc.S2},
		{"accept-encoding", "gzip, snappy", contentenc.Snappy},
		{"Accept-Encoding", "s2;q=0, snappy", contentenc.Snappy},
	} {
		reply := c.askCoded(req, ask.header, ask.accept)
		if s := reply.Header.Get("Status"); s != "" {
			t.Fatalf("%q: planner error %s: %s", ask.accept, s, reply.Data)
		}
		coding := reply.Header.Get(contentenc.ContentHeader)
		if coding != ask.coding {
			t.Fatalf("%s: %q: Content-Encoding %q, want %q", ask.header, ask.accept, coding, ask.coding)
		}
		if len(reply.Data)*2 > len(plain) {
			t.Errorf("%q: %d bytes compressed of %d plain", ask.accept, len(reply.Data), len(plain))
		}
		raw, err := contentenc.Decode(nil, reply.Data, coding)
		if err != nil {
			t.Fatalf("%q: %v", ask.accept, err)
		}
		var got planner.Answer
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%q: the decoded reply is not an answer: %v", ask.accept, err)
		}
		got.Timings = planner.Timings{}
		if g, _ := json.Marshal(&got); !bytes.Equal(g, wantJSON) {
			t.Errorf("%q: the decoded answer differs from the plain one", ask.accept)
		}
	}
	// msgpack answers are compressed the same way.
	mreq := req
	mreq.Format = "msgpack"
	if reply := c.askCoded(mreq, "Accept-Encoding", "s2"); reply.Header.Get(contentenc.ContentHeader) == contentenc.S2 {
		raw, err := contentenc.Decode(nil, reply.Data, contentenc.S2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := planner.DecodeMsgpackAnswer(raw); err != nil {
			t.Errorf("a compressed msgpack answer: %v", err)
		}
	} else if len(reply.Data) >= contentenc.MinBytes {
		t.Errorf("a %d-byte msgpack answer asked for in s2 came plain", len(reply.Data))
	}
	// Not a coding the daemon writes: plain.
	if reply := c.askCoded(req, "Accept-Encoding", "gzip, br"); reply.Header.Get(contentenc.ContentHeader) != "" || !json.Valid(reply.Data) {
		t.Errorf("gzip, br: Content-Encoding %q, a JSON body %v", reply.Header.Get(contentenc.ContentHeader), json.Valid(reply.Data))
	}
	// A small answer: plain.
	small := req
	small.K, small.Hops, small.Budget = 1, 0, 1
	if reply := c.askCoded(small, "Accept-Encoding", "s2"); len(reply.Data) < contentenc.MinBytes && reply.Header.Get(contentenc.ContentHeader) != "" {
		t.Errorf("a %d-byte answer was compressed", len(reply.Data))
	}
	// An error: plain, with its status, and the daemon keeps serving.
	bad := &nats.Msg{Subject: "ctxgraph.planner.context", Data: []byte(`{"k": "ten"`), Header: nats.Header{"Accept-Encoding": {"s2"}}}
	reply, err := c.nc.RequestMsg(bad, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Header.Get("Status") == "" || reply.Header.Get(contentenc.ContentHeader) != "" || !json.Valid(reply.Data) {
		t.Errorf("a bad request asking for s2: status %q, Content-Encoding %q, body %s", reply.Header.Get("Status"), reply.Header.Get(contentenc.ContentHeader), reply.Data)
	}
	var again planner.Answer
	if err := json.Unmarshal([]byte(c.askRaw(req)), &again); err != nil || len(again.Edges) != len(want.Edges) {
		t.Errorf("after the bad request: %v, %d edges, were %d", err, len(again.Edges), len(want.Edges))
	}
	// The replies and their bytes by coding: one s2 answer (the JSON one;
	// the msgpack one too when it was large enough) and two Snappy ones.
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	series := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "ctxgraph_planner_repl") {
			series[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	if n := series[`ctxgraph_planner_replies_total{coding="snappy"}`]; n != 2 {
		t.Errorf("snappy replies counted %v, want 2 (%v)", n, series)
	}
	if n := series[`ctxgraph_planner_replies_total{coding="s2"}`]; n < 1 {
		t.Errorf("s2 replies counted %v (%v)", n, series)
	}
	plainN, plainB := series[`ctxgraph_planner_replies_total{coding="identity"}`], series[`ctxgraph_planner_reply_bytes_total{coding="identity"}`]
	snappyB := series[`ctxgraph_planner_reply_bytes_total{coding="snappy"}`]
	if plainN < 3 || snappyB == 0 || plainB/plainN < 2*(snappyB/2) {
		t.Errorf("identity replies %v of %v bytes in all, against the 2 snappy ones' %v: the compressed should be under half the plain", plainN, plainB, snappyB)
	}
}
