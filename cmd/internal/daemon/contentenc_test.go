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

// largeAnswer starts a daemon with the testdata applied and returns a
// request whose answer is large enough to be compressed, and that
// answer asked for plain.
func largeAnswer(t *testing.T) (*Daemon, *controller, planner.Request, string) {
	t.Helper()
	d, c := testdataDaemon(t, t.TempDir())
	req := redBlockQuery
	req.Strategy = planner.StrategySemantic
	req.Hops, req.Budget = 2, 256
	plain := c.askRaw(req)
	if len(plain) < contentenc.MinBytes {
		t.Fatalf("the plain answer is %d bytes, under the %d compressed: the test asks for too little", len(plain), contentenc.MinBytes)
	}
	return d, c, req, plain
}

// A planner asking for s2 or Snappy gets the answer it would have got
// plain, compressed and named in Content-Encoding; one asking for
// codings the daemon does not write, or for an answer too small to be
// worth it, gets it plain, and so does an error.
func TestCompressedAnswersOverNATS(t *testing.T) {
	d, c, req, plain := largeAnswer(t)
	var want planner.Answer
	if err := json.Unmarshal([]byte(plain), &want); err != nil {
		t.Fatal(err)
	}
	want.Timings = planner.Timings{}
	wantJSON, _ := json.Marshal(&want)
	for _, ask := range []struct{ header, accept, coding string }{
		{"Accept-Encoding", "s2", contentenc.S2},
		{"accept-encoding", "br, snappy", contentenc.Snappy},
		{"Accept-Encoding", "gzip", contentenc.Gzip},
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
	if reply := c.askCoded(req, "Accept-Encoding", "br, zstd"); reply.Header.Get(contentenc.ContentHeader) != "" || !json.Valid(reply.Data) {
		t.Errorf("br, zstd: Content-Encoding %q, a JSON body %v", reply.Header.Get(contentenc.ContentHeader), json.Valid(reply.Data))
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
	// the msgpack one too when it was large enough), two Snappy ones and
	// a gzip one.
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
	if n := series[`ctxgraph_planner_replies_total{coding="gzip"}`]; n != 1 {
		t.Errorf("gzip replies counted %v, want 1", n)
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

// POST /v1/context answers in the coding its Accept-Encoding asks for:
// gzip for Go's client by default (which inflates it transparently),
// s2 when asked, plain when nothing it writes is asked for; errors stay
// plain.
func TestCompressedAnswersOverHTTP(t *testing.T) {
	d, _, req, plain := largeAnswer(t)
	body, _ := json.Marshal(req)
	url := "http://" + d.HTTPAddr() + "/v1/context"

	// Go's client asks for gzip and inflates the answer itself.
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Uncompressed || !json.Valid(got) {
		t.Errorf("default client: status %d, came gzipped %v, a JSON body %v", resp.StatusCode, resp.Uncompressed, json.Valid(got))
	}
	if v := resp.Header.Get("Vary"); v != contentenc.AcceptHeader {
		t.Errorf("Vary %q", v)
	}

	for _, ask := range []struct{ accept, coding string }{
		{"s2", contentenc.S2},
		{"br, snappy;q=0.9", contentenc.Snappy},
		{"gzip", contentenc.Gzip},
		{"identity", ""},
	} {
		hr, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept-Encoding", ask.accept)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		coding := resp.Header.Get(contentenc.ContentHeader)
		if resp.StatusCode != 200 || coding != ask.coding {
			t.Fatalf("Accept-Encoding %q: status %d, Content-Encoding %q, want %q", ask.accept, resp.StatusCode, coding, ask.coding)
		}
		if coding != "" && len(raw)*2 > len(plain) {
			t.Errorf("%q: %d bytes of %d plain", ask.accept, len(raw), len(plain))
		}
		dec, err := contentenc.Decode(nil, raw, coding)
		if err != nil {
			t.Fatalf("%q: %v", ask.accept, err)
		}
		var a planner.Answer
		if err := json.Unmarshal(dec, &a); err != nil || len(a.Edges) == 0 {
			t.Errorf("%q: the decoded body is not an answer (%v, %d edges)", ask.accept, err, len(a.Edges))
		}
	}

	// An error is plain JSON whatever is asked.
	hr, _ := http.NewRequest("POST", url, strings.NewReader(`{"k": "ten"`))
	hr.Header.Set("Accept-Encoding", "s2")
	resp, err = http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get(contentenc.ContentHeader) != "" || !json.Valid(raw) {
		t.Errorf("a bad request: status %d, Content-Encoding %q, body %s", resp.StatusCode, resp.Header.Get(contentenc.ContentHeader), raw)
	}
}
