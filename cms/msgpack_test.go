package cms

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// testSpans is every span of testdata/spans.jsonl, as JSON.
func testSpans(tb testing.TB) [][]byte {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "spans.jsonl"))
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

func TestMsgpackSpansDecodeAsTheirJSON(t *testing.T) {
	spans := testSpans(t)
	if len(spans) == 0 {
		t.Fatal("no test spans")
	}
	for _, b := range spans {
		want, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		want.Embedding = []float32{0.25, -0.5, 1, 3} // the testdata's spans carry none
		got, err := Decode(want.AppendMsgpack(nil), 0)
		if err != nil {
			t.Fatalf("msgpack of %s refused: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("msgpack decodes to\n%+v\nwant\n%+v", got, want)
		}
	}
	// From a generic encoder, the JSON's shape.
	want, err := Decode([]byte(`{"id":"s1","level":1,"period":"10m","agent":"a","step_start":0,"step_end":3,`+
		`"start":"2026-01-01T10:00:00Z","end":"2026-01-01T10:10:00Z","update_index":2,"text":"t","embedding":[0.5,-1],`+
		`"concepts":["c"],"entities":["e"],"update_size":0.7}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := msgp.AppendIntf(nil, map[string]any{"id": "s1", "level": int64(1), "period": "10m", "agent": "a",
		"step_start": int64(0), "step_end": uint64(3), "start": "2026-01-01T10:00:00Z", "end": "2026-01-01T10:10:00Z",
		"update_index": int64(2), "text": "t", "embedding": []any{0.5, int64(-1)}, "concepts": []any{"c"},
		"entities": []any{"e"}, "update_size": float32(0.7), "parent_id": nil})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	got.UpdateSize = want.UpdateSize // float32(0.7) is not 0.7
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("generic msgpack decodes to\n%+v\nwant\n%+v", got, want)
	}
}

func TestMsgpackSpanBadInputIsRefused(t *testing.T) {
	enc := func(m map[string]any) []byte {
		b, err := msgp.AppendIntf(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := (&Span{ID: "s", Level: 0}).AppendMsgpack(nil)
	for _, c := range []struct {
		name string
		b    []byte
		is   error
		says string
	}{
		{"unknown field", enc(map[string]any{"id": "s", "levle": int64(0)}), ErrMalformed, "levle: unknown field"},
		{"level a string", enc(map[string]any{"id": "s", "level": "0"}), ErrMalformed, "level:"},
		{"NaN embedding", enc(map[string]any{"id": "s", "embedding": []any{1.0, math.NaN()}}), ErrInvalid, "embedding[1]"},
		{"wrong dimension", enc(map[string]any{"id": "s", "embedding": []any{1.0, 2.0, 3.0}}), ErrInvalid, "dimensions"},
		{"trailing data", append(bytes.Clone(good), 0xc0), ErrMalformed, "trailing data"},
		{"truncated", good[:len(good)-1], ErrMalformed, "msgpack"},
	} {
		_, err := Decode(c.b, 2)
		if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want %v saying %q", c.name, err, c.is, c.says)
		}
	}
}
