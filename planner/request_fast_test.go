package planner

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// checkRequestFastAgrees fails when the fast decoder accepts b but
// decodes it differently from encoding/json, or accepts what
// encoding/json refuses. It reports whether the fast decoder took b.
func checkRequestFastAgrees(t *testing.T, b []byte) bool {
	t.Helper()
	fast, ok := decodeRequestFast(b)
	if !ok {
		return false
	}
	slow, err := decodeRequestJSON(b)
	if err != nil {
		t.Fatalf("fast decoder accepted what encoding/json refuses (%v):\n%s", err, b)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast and encoding/json decodings differ:\nfast %+v\njson %+v\n%s", fast, slow, b)
	}
	return true
}

// randomRequest fills the fields of a request at random, each present
// or not.
func randomRequest(r *rand.Rand) Request {
	some := func() bool { return r.IntN(2) == 0 }
	strs := func() []string {
		if !some() {
			return nil
		}
		out := make([]string, r.IntN(3))
		for i := range out {
			out[i] = fmt.Sprintf("s-%d é", r.IntN(100))
		}
		return out
	}
	var q Request
	if some() {
		q.Query = "where is the red cup"
	}
	if some() {
		q.Vector = make([]float32, r.IntN(40))
		for i := range q.Vector {
			q.Vector[i] = float32(r.NormFloat64() / 20)
			if r.IntN(10) == 0 {
				q.Vector[i] = float32(r.IntN(2000) - 1000)
			}
		}
	}
	q.Goals, q.Tools, q.Entities, q.Roles = strs(), strs(), strs(), strs()
	if some() {
		q.SessionID, q.Agent, q.Location = "sess-1", "robot-7", "lab/2"
	}
	t0 := time.Date(2026, 11, 22, 5, 0, 0, r.IntN(1e9), time.FixedZone("x", 3600*r.IntN(5)))
	if some() {
		q.TimeWindow = &TimeWindow{From: t0}
		if some() {
			q.TimeWindow.To = t0.Add(time.Hour)
		}
	}
	if some() {
		q.AsOf = &t0
	}
	if some() {
		q.MinConfidence = r.Float64()
	}
	q.SameAgent = some()
	q.K, q.Hops, q.Budget = r.IntN(20), r.IntN(3), r.IntN(300)
	if some() {
		q.Format, q.Strategy, q.Tenant, q.Project = "msgpack", "fast", "lab", "arm-3"
	}
	return q
}

func TestDecodeRequestFastAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 500 {
		q := randomRequest(r)
		b, err := json.Marshal(&q)
		if err != nil {
			t.Fatal(err)
		}
		if !checkRequestFastAgrees(t, b) {
			t.Fatalf("fast decoder did not take a request encoding/json wrote:\n%s", b)
		}
		got, err := DecodeRequest(b)
		if err != nil || !slices.Equal(got.Vector, q.Vector) || got.K != q.K || got.SameAgent != q.SameAgent {
			t.Fatalf("DecodeRequest: %+v, %v; want %+v", got, err, q)
		}
	}
	// Forms it must take, and forms it must leave to encoding/json (which
	// may accept or refuse them).
	for _, c := range []struct {
		body string
		fast bool
	}{
		{`{"vector":[0.5,-1,2e3,0.000001,-0],"k":5}`, true},
		{` { "query" : "cup" , "roles" : [ ] , "time_window" : { } } `, true},
		{`{"time_window":{"from":"2026-11-22T05:00:00Z","to":"2026-11-22T06:00:00+01:00"}}`, true},
		{`{"as_of":"2026-11-22T05:00:00.123456789Z","same_agent":true,"agent":"a"}`, true},
		{`{"K":5}`, false},              // encoding/json matches keys without case
		{`{"k":5,"k":6}`, false},        // repeated key
		{`{"time_window":null}`, false}, // null
		{`{"query":"a\"b"}`, false},     // escapes
		{`{"bogus":1}`, false},          // unknown: encoding/json refuses it
		{`{"k":1.5}`, false},            // not an int
		{`{"k":01}`, false},             // not JSON
		{`{"vector":[1e400]}`, false},   // out of float32's range
		{`{"time_window":{"from":"yesterday"}}`, false},
		{`{"time_window":{"from":"2026-11-22T05:00:00Z","bogus":1}}`, false},
		{`{"k":5} {"k":6}`, false}, // trailing data
		{"{\"k\":5}\x00", false},   // a NUL is trailing data too
		{`{"k":5`, false},
		{`{"query":"\xff"}`, false}, // invalid UTF-8: encoding/json replaces it
	} {
		if got := checkRequestFastAgrees(t, []byte(c.body)); got != c.fast {
			t.Errorf("%s: fast decoder took it %v, want %v", c.body, got, c.fast)
		}
		_, errJSON := decodeRequestJSON([]byte(c.body))
		_, err := DecodeRequest([]byte(c.body))
		if (err == nil) != (errJSON == nil) {
			t.Errorf("%s: DecodeRequest error %v, encoding/json's %v", c.body, err, errJSON)
		}
	}
}

func FuzzDecodeRequestFast(f *testing.F) {
	f.Add([]byte(`{"vector":[0.5,-1,2e3],"k":5,"time_window":{"from":"2026-11-22T05:00:00Z"}}`))
	f.Add([]byte(`{"query":"cup","roles":["operator"],"same_agent":true,"agent":"a","as_of":"2026-11-22T05:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRequestFastAgrees(t, b)
	})
}

func BenchmarkDecodeRequest(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, 384)
	for i := range v {
		v[i] = float32(r.NormFloat64() / 20)
	}
	now := time.Now()
	req := Request{Vector: v, Agent: "robot-17", Roles: []string{"operator"}, K: 10, Hops: 1, MinConfidence: 0.3,
		TimeWindow: &TimeWindow{From: now, To: now.Add(time.Hour)}, Location: "lab-2", Format: "msgpack"}
	body, err := json.Marshal(&req)
	if err != nil {
		b.Fatal(err)
	}
	mp := req.AppendMsgpack(nil)
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Request, error)
		body   []byte
	}{{"DecodeRequest", DecodeRequest, body}, {"encoding_json", decodeRequestJSON, body}, {"msgpack", DecodeRequest, mp}} {
		b.Run(c.name, func(b *testing.B) {
			body := c.body
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
