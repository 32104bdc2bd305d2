package rlds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// testdataLines is every line of the repo's testdata file name.
func testdataLines(tb testing.TB, name string) [][]byte {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	return out
}

// testMessages is every line of testdata/episodes.jsonl and the bench
// workload's step, as JSON.
func testMessages(tb testing.TB) [][]byte {
	return append(testdataLines(tb, "episodes.jsonl"), fleetStep(tb))
}

// toMsgpack decodes the JSON message b and writes it as msgpack.
func toMsgpack(tb testing.TB, b []byte) (*Message, []byte) {
	tb.Helper()
	m, err := DecodeMessage(b)
	if err != nil {
		tb.Fatal(err)
	}
	mp, err := m.AppendMsgpack(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return m, mp
}

func TestMsgpackMessagesDecodeAsTheirJSON(t *testing.T) {
	msgs := testMessages(t)
	kinds := map[Kind]int{}
	for _, b := range msgs {
		want, mp := toMsgpack(t, b)
		if !IsMsgpack(mp) || IsMsgpack(b) {
			t.Fatalf("IsMsgpack: msgpack %v, JSON %v", IsMsgpack(mp), IsMsgpack(b))
		}
		got, err := DecodeMessage(mp)
		if err != nil {
			t.Fatalf("msgpack of %s refused: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("msgpack decodes to\n%+v\nwant\n%+v", got, want)
		}
		// What is stored is the same bytes either way.
		if got.Step != nil {
			a, err1 := EncodeStep(got.Step)
			b, err2 := EncodeStep(want.Step)
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Fatalf("stored steps differ (%v, %v)", err1, err2)
			}
		}
		kinds[got.Kind]++
	}
	if kinds[KindEpisodeStart] == 0 || kinds[KindStep] == 0 || kinds[KindEpisodeEnd] == 0 {
		t.Fatalf("the test messages lack a kind: %v", kinds)
	}
	// The bench's step: its vectors of whole numbers travel as small
	// integers, under half the JSON's bytes.
	fleet := fleetStep(t)
	_, mp := toMsgpack(t, fleet)
	if len(mp)*2 > len(fleet) {
		t.Errorf("the fleet step is %d bytes in msgpack against %d in JSON", len(mp), len(fleet))
	}
}

// A message written by a generic MessagePack library from the JSON's
// shape (float64 numbers, times as strings, the short tensor forms, a
// bin for bytes) decodes as the JSON does.
func TestMsgpackFromAGenericEncoder(t *testing.T) {
	conf := 0.75
	jsonMsg := `{"kind":"step","agent":"r1","episode_id":"e1","tenant":"lab","step":{"index":3,` +
		`"timestamp":"2026-10-01T02:03:04.5Z","observation":{"state":[1,2.5,-3],"img":{"dtype":"image","encoding":"jpeg","bytes":"AAEC"},` +
		`"grid":[[1,2],[3,4]],"label":"cup","flag":true,"temp":21.5},"action":[0.5,-1],"reward":1,"discount":0.99,` +
		`"is_first":false,"is_last":true,"is_terminal":true,"metadata":{"n":2,"tags":["a","b"],"x":{"y":null}},` +
		`"annotations":{"entities":["cup"],"tool":"gripper","events":[{"subject":"cup","predicate":"on","object":"table",` +
		`"confidence":0.75,"embedding":[0.25,-0.5,1],"allow_roles":["ops"]}],"scene_tags":["lab"]}}}`
	want, err := DecodeMessage([]byte(jsonMsg))
	if err != nil {
		t.Fatal(err)
	}
	generic := map[string]any{
		"kind": "step", "agent": "r1", "episode_id": "e1", "tenant": "lab",
		"step": map[string]any{
			"index":     int64(3),
			"timestamp": time.Date(2026, 10, 1, 2, 3, 4, 5e8, time.UTC),
			"observation": map[string]any{
				"state": []any{1.0, 2.5, -3.0},
				"img":   map[string]any{"dtype": "image", "encoding": "jpeg", "bytes": []byte{0, 1, 2}},
				"grid":  []any{[]any{1.0, 2.0}, []any{int64(3), uint64(4)}},
				"label": "cup", "flag": true, "temp": float32(21.5),
			},
			"action": []any{0.5, -1.0}, "reward": 1.0, "discount": 0.99,
			"is_first": false, "is_last": true, "is_terminal": true,
			"metadata": map[string]any{"n": int64(2), "tags": []any{"a", "b"}, "x": map[string]any{"y": nil}},
			"annotations": map[string]any{
				"entities": []any{"cup"}, "tool": "gripper", "scene_tags": []any{"lab"},
				"events": []any{map[string]any{"subject": "cup", "predicate": "on", "object": "table",
					"confidence": conf, "embedding": []any{float32(0.25), -0.5, int64(1)}, "allow_roles": []any{"ops"}}},
			},
		},
	}
	b, err := msgp.AppendIntf(nil, generic)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("generic msgpack decodes to\n%s\nwant\n%s", gj, wj)
	}
	// Times as RFC 3339 strings too.
	generic["step"].(map[string]any)["timestamp"] = "2026-10-01T02:03:04.5Z"
	b, _ = msgp.AppendIntf(nil, generic)
	if got, err := DecodeMessage(b); err != nil || !got.Step.Timestamp.Equal(want.Step.Timestamp) {
		t.Fatalf("string timestamp: %v, %v", got, err)
	}
}

// Bad msgpack is refused with a marked error that names the field.
func TestMsgpackBadInputIsRefusedNamingTheField(t *testing.T) {
	_, good := toMsgpack(t, fleetStep(t))
	step := func(fields map[string]any) []byte {
		s := map[string]any{"index": int64(0)}
		for k, v := range fields {
			s[k] = v
		}
		b, err := msgp.AppendIntf(nil, map[string]any{"kind": "step", "agent": "a", "episode_id": "e", "step": s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A map whose key "agent" is given twice.
	dup := msgp.AppendMapHeader(nil, 4)
	for _, kv := range [][2]string{{"kind", "episode_end"}, {"agent", "a"}, {"agent", "b"}, {"episode_id", "e"}} {
		dup = msgp.AppendString(msgp.AppendString(dup, kv[0]), kv[1])
	}
	deep := any(1.0)
	for range 100 {
		deep = []any{deep}
	}
	for _, c := range []struct {
		name string
		b    []byte
		is   error
		says string
	}{
		{"truncated", good[:len(good)/2], ErrMalformed, "msgpack"},
		{"trailing data", append(bytes.Clone(good), 0xc0), ErrMalformed, "trailing data"},
		{"unknown field", step(map[string]any{"rewardd": 1.0}), ErrMalformed, "step: rewardd: unknown field"},
		{"key given twice", dup, ErrMalformed, "agent: given twice"},
		{"index not an integer", step(map[string]any{"index": 1.5}), ErrMalformed, "step: index"},
		{"reward a string", step(map[string]any{"reward": "1"}), ErrMalformed, "step: reward: want a number"},
		{"NaN reward", step(map[string]any{"reward": math.NaN()}), ErrNonFinite, "reward"},
		{"NaN embedding", step(map[string]any{"annotations": map[string]any{"events": []any{map[string]any{
			"subject": "a", "predicate": "b", "object": "c", "embedding": []any{1.0, math.NaN()}}}}}), ErrNonFinite, "event 0 embedding"},
		{"infinite tensor", step(map[string]any{"action": []any{1.0, math.Inf(1)}}), ErrNonFinite, "action"},
		{"NaN metadata", step(map[string]any{"metadata": map[string]any{"x": math.NaN()}}), ErrNonFinite, "metadata: x"},
		{"shape against data", step(map[string]any{"action": map[string]any{"x": map[string]any{
			"dtype": "float32", "shape": []any{int64(3)}, "data": []any{1.0}}}}), ErrShape, "action: x"},
		{"ragged tensor", step(map[string]any{"action": []any{[]any{1.0}, []any{1.0, 2.0}}}), ErrMalformed, "ragged"},
		{"nested too deep", step(map[string]any{"metadata": map[string]any{"x": deep}}), ErrMalformed, "nested deeper"},
		{"timestamp out of range", step(map[string]any{"timestamp": time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}), ErrMalformed, "year 12000"},
		{"no agent", func() []byte {
			b, _ := msgp.AppendIntf(nil, map[string]any{"kind": "step", "episode_id": "e", "step": map[string]any{"index": int64(0)}})
			return b
		}(), ErrInvalid, "agent is required"},
		{"array for a message", msgp.AppendArrayHeader(nil, 0), ErrMalformed, ""},
	} {
		_, err := DecodeMessage(c.b)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %q, want %v saying %q", c.name, err, c.is, c.says)
		}
	}
}

// FuzzDecodeMsgpack feeds the msgpack decoder damaged messages: it must
// refuse with a marked error, or accept a message that writes back to
// msgpack, decodes to the same message and stores as a step.
func FuzzDecodeMsgpack(f *testing.F) {
	for _, b := range testMessages(f) {
		_, mp := toMsgpack(f, b)
		f.Add(mp)
	}
	f.Add([]byte{0x80})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if !IsMsgpack(b) {
			return
		}
		m, err := DecodeMessage(b)
		if err != nil {
			checkMarked(t, err)
			return
		}
		b2, err := m.AppendMsgpack(nil)
		if err != nil {
			t.Fatalf("accepted message does not write back: %v", err)
		}
		m2, err := DecodeMessage(b2)
		if err != nil {
			t.Fatalf("written-back message refused: %v", err)
		}
		j1, err1 := json.Marshal(m)
		j2, err2 := json.Marshal(m2)
		if err1 != nil || err2 != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("written back, the message changed (%v, %v):\n%s\n%s", err1, err2, j1, j2)
		}
		if m.Step != nil {
			if _, err := EncodeStep(m.Step); err != nil {
				t.Fatalf("accepted step does not store: %v", err)
			}
		}
	})
}
