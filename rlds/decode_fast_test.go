package rlds

import (
	"reflect"
	"strings"
	"testing"
)

// checkFastAgrees fails when the fast decoder accepts b but decodes it
// differently from encoding/json, or accepts what encoding/json refuses.
// It reports whether the fast decoder took b.
func checkFastAgrees(t *testing.T, b []byte) bool {
	t.Helper()
	fast, ok := decodeFast(b)
	if !ok {
		return false
	}
	slow, err := decodeJSON(b)
	if err != nil {
		t.Fatalf("fast decoder accepted what encoding/json refuses (%v):\n%s", err, b)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast and encoding/json decodings differ:\nfast %+v\njson %+v\n%s", fast, slow, b)
	}
	return true
}

func TestDecodeFastAgreesWithEncodingJSON(t *testing.T) {
	lines := testdataLines(t, "episodes.jsonl")
	took := 0
	for _, b := range lines {
		if checkFastAgrees(t, b) {
			took++
		}
	}
	if took != len(lines) {
		t.Errorf("fast decoder took %d of the %d lines of testdata/episodes.jsonl, want all", took, len(lines))
	}
	if !checkFastAgrees(t, fleetStep(t)) {
		t.Error("fast decoder did not take the bench workload's step")
	}
	// Forms it must take, and forms it must leave to encoding/json (which
	// may accept or refuse them).
	base := `{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,%s}}`
	for _, c := range []struct {
		field string
		fast  bool
	}{
		{`"action":[0.5,-1,2e3,0.000001,-0]`, true},
		{`"observation":{"s":[1,2,3]},"action":{"":{"dtype":"float32","shape":[3],"data":[1,2,3]}}`, true},
		{`"observation":{"img":{"dtype":"image","encoding":"jpeg","bytes":"AAEC"}}`, true},
		{`"observation":{"t":{"dtype":"string","text":["a","b"]}}`, true},
		{`"reward":1.5,"discount":0.99,"is_first":true,"is_last":false,"is_terminal":false`, true},
		{`"metadata":{"a":[1,"x",{"b":null}],"c":"d"},"language_instruction":"pick the cup"}`, false},
		{`"metadata":{"a":[1,"x",{"b":null}],"c":"d"},"language_instruction":"pick the cup"`, true},
		{`"annotations":{"entities":["cup é"],"events":[{"subject":"a","predicate":"b","object":"c","confidence":0,"embedding":[1,-2,3.5,12345678,1e-3]}]}`, true},
		{` "annotations" : { "events" : [ ] , "scene_tags" : [ ] } `, true},
		{`"Index":1`, false},                     // encoding/json matches keys without case
		{`"index":0`, false},                     // repeated key
		{`"reward":null`, false},                 // null
		{`"language_instruction":"a\"b"`, false}, // escapes
		{`"action":[[1,2],[3,4]]`, false},        // nested array
		{`"action":{"x":{"dtype":"float32","data":[1],"bogus":1}}`, false},
		{`"reward":1e400`, false},
		{`"index":01`, false},
		{`"index":1.0`, false},
		{`"bogus":1`, false},
	} {
		b := []byte(strings.Replace(base, "%s", c.field, 1))
		if got := checkFastAgrees(t, b); got != c.fast {
			t.Errorf("fast decoder took %s: %v, want %v", b, got, c.fast)
		}
	}
	for _, s := range []string{
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0}} x`,
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0}}}`,
		"{\"kind\":\"step\",\"agent\":\"a\xff\",\"episode_id\":\"e\",\"step\":{\"index\":0}}",
		`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0},}`,
	} {
		if checkFastAgrees(t, []byte(s)) {
			t.Errorf("fast decoder took %q", s)
		}
	}
}

// DecodeMessage's errors are still encoding/json's: the dead-letter
// records quote them.
func TestDecodeMessageErrorsNameTheField(t *testing.T) {
	_, err := DecodeMessage([]byte(`{"kind":"step","agent":"a","episode_id":"e","step":{"index":0,"bogus":1}}`))
	if err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Fatalf("err = %v, want it to name the unknown field", err)
	}
	_, err = DecodeMessage([]byte(`{"kind":"step","agent":"a","episode_id":"e","step":{"index":"3"}}`))
	if err == nil || !strings.Contains(err.Error(), "Step.step.index") {
		t.Fatalf("err = %v, want it to name step.index", err)
	}
}

// FuzzDecodeFast holds the fast decoder to encoding/json's decoding.
func FuzzDecodeFast(f *testing.F) {
	addJSONLSeeds(f, "episodes.jsonl")
	f.Add(fleetStep(f))
	f.Add([]byte(`{"kind":"episode_end","agent":"a","episode_id":"e","end":{"success":true,"reward_sum":-0,"steps":3}}`))
	f.Add([]byte(`{"kind":"episode_start","agent":"a","episode_id":"e","start":{"source":{"dataset":"d","record":-1,"offset":12}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { checkFastAgrees(t, b) })
}
