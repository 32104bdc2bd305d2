package planner

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// inUTCRequest is q with its times in UTC: msgpack timestamps carry no
// zone, the JSON's times keep theirs.
func inUTCRequest(q *Request) *Request {
	c := *q
	if w := q.TimeWindow; w != nil {
		c.TimeWindow = &TimeWindow{From: utcOrZero(w.From), To: utcOrZero(w.To)}
	}
	if q.AsOf != nil {
		t := q.AsOf.UTC()
		c.AsOf = &t
	}
	return &c
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func TestMsgpackRequestsDecodeAsTheirJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for range 500 {
		q := randomRequest(r)
		b, err := json.Marshal(&q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		mp := q.AppendMsgpack(nil)
		got, err := DecodeRequest(mp)
		if err != nil {
			t.Fatalf("msgpack of %s refused: %v", b, err)
		}
		if !reflect.DeepEqual(inUTCRequest(got), inUTCRequest(want)) {
			t.Fatalf("msgpack decodes to\n%+v\nwant\n%+v", got, want)
		}
	}
}

// A request written by a generic MessagePack library from the JSON's
// shape decodes as the JSON does.
func TestMsgpackRequestFromAGenericEncoder(t *testing.T) {
	want, err := DecodeRequest([]byte(`{"query":"cup","vector":[0.5,-1,2],"roles":["operator"],"agent":"r1",` +
		`"time_window":{"from":"2026-11-22T05:00:00Z","to":"2026-11-22T06:00:00Z"},"min_confidence":0.25,` +
		`"same_agent":true,"k":5,"hops":2,"budget":100,"as_of":"2026-11-22T07:00:00Z","format":"msgpack"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := msgp.AppendIntf(nil, map[string]any{
		"query": "cup", "vector": []any{0.5, float32(-1), int64(2)}, "roles": []any{"operator"}, "agent": "r1",
		"time_window":    map[string]any{"from": time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC), "to": "2026-11-22T06:00:00Z"},
		"min_confidence": 0.25, "same_agent": true, "k": int64(5), "hops": uint64(2), "budget": int64(100),
		"as_of": "2026-11-22T07:00:00Z", "format": "msgpack", "session_id": nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inUTCRequest(got), inUTCRequest(want)) {
		t.Fatalf("generic msgpack decodes to\n%+v\nwant\n%+v", got, want)
	}
}

func TestMsgpackRequestBadInputIsRefusedNamingTheField(t *testing.T) {
	enc := func(m map[string]any) []byte {
		b, err := msgp.AppendIntf(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dup := msgp.AppendMapHeader(nil, 2)
	dup = msgp.AppendInt(msgp.AppendString(dup, "k"), 5)
	dup = msgp.AppendInt(msgp.AppendString(dup, "k"), 6)
	good := (&Request{Query: "cup", K: 5}).AppendMsgpack(nil)
	for _, c := range []struct {
		name string
		b    []byte
		says string
	}{
		{"unknown field", enc(map[string]any{"qeury": "cup"}), "qeury: unknown field"},
		{"key given twice", dup, "k: given twice"},
		{"k not an integer", enc(map[string]any{"k": 1.5}), "k:"},
		{"query a number", enc(map[string]any{"query": int64(3)}), "query:"},
		{"NaN in the vector", enc(map[string]any{"vector": []any{1.0, math.NaN()}}), "vector[1] is NaN"},
		{"infinite confidence", enc(map[string]any{"query": "x", "min_confidence": math.Inf(1)}), "min_confidence"},
		{"bad time window", enc(map[string]any{"time_window": map[string]any{"from": "yesterday"}}), "time_window: from"},
		{"trailing data", append(good, 0xc0), "trailing data"},
		{"truncated", good[:len(good)-2], "malformed msgpack"},
	} {
		_, err := DecodeRequest(c.b)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want ErrInvalid saying %q", c.name, err, c.says)
		}
	}
}
