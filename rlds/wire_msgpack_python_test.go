package rlds

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"os"
	"os/exec"
	"reflect"
	"testing"
)

//go:embed testdata/pymsgpack.py
var pyMsgpackScript string

// pythonWithMsgpack returns a Python interpreter that imports msgpack,
// or "".
func pythonWithMsgpack() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import msgpack").Run() == nil {
			return p
		}
	}
	return ""
}

// Messages written by another implementation, Python's msgpack library
// with the README's packb(message, datetime=True), decode as their JSON
// does. Without python3-msgpack the test skips, unless
// CTXGRAPH_REQUIRE_PYMSGPACK is set (make test and CI install it and
// set it), when it fails.
func TestMsgpackFromPython(t *testing.T) {
	py := pythonWithMsgpack()
	if py == "" {
		if os.Getenv("CTXGRAPH_REQUIRE_PYMSGPACK") != "" {
			t.Fatal("Python's msgpack is required (CTXGRAPH_REQUIRE_PYMSGPACK is set) but no python3 imports it: apt-get install python3-msgpack")
		}
		t.Skip("python3-msgpack is not installed (apt-get install python3-msgpack; make test does it)")
	}
	cmd := exec.Command(py, "-c", pyMsgpackScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	wants := []string{
		`{"kind":"episode_start","agent":"py-bot","episode_id":"py-1","start":{"start_time":"2026-10-01T02:03:04.5Z",` +
			`"location":"lab 2","language_instruction":"stack the cups","metadata":{"operator":"py","n":3,"gains":[0.5,1.25],` +
			`"nested":{"ok":true,"none":null}}}}`,
		`{"kind":"step","agent":"py-bot","episode_id":"py-1","step":{"index":0,"timestamp":"2026-10-01T02:03:04.5Z",` +
			`"observation":{"state":[0.1,-0.2,3],"image":{"dtype":"image","encoding":"jpeg","bytes":"/9j/AA=="},"label":"cup"},` +
			`"action":[0,0.5,-0.4],"reward":0,"discount":1,"is_first":true,"is_last":false,"is_terminal":false,` +
			`"annotations":{"entities":["red cup","blue cup"],"tool":"gripper","events":[{"subject":"red cup","predicate":"on",` +
			`"object":"blue cup","confidence":0.75,"embedding":[0.25,-0.5,1,2]}]}}}`,
		`{"kind":"steps","agent":"py-bot","episode_id":"py-1","steps":[{"index":1,"timestamp":"2026-10-01T02:03:05.5Z",` +
			`"action":[0.5,0.5,-0.4],"reward":0.5},{"index":2,"timestamp":"2026-10-01T02:03:06Z","action":[1,0.5,-0.4],"reward":1}]}`,
		`{"kind":"episode_end","agent":"py-bot","episode_id":"py-1","end":{"end_time":"2026-10-01T02:03:06.5Z",` +
			`"success":true,"reward_sum":1.5,"steps":1}}`,
	}
	for i, w := range wants {
		if len(out) < 4 {
			t.Fatalf("message %d: python wrote %d bytes too few", i, len(out))
		}
		n := int(binary.BigEndian.Uint32(out))
		b := out[4 : 4+n]
		out = out[4+n:]
		if !IsMsgpack(b) {
			t.Fatalf("message %d: not msgpack: %x", i, b[:min(8, len(b))])
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("message %d from python refused: %v", i, err)
		}
		want, err := DecodeMessage([]byte(w))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("message %d from python decodes to\n%+v\nwant\n%+v", i, got, want)
		}
		if got.Step != nil {
			a, err1 := EncodeStep(got.Step)
			b, err2 := EncodeStep(want.Step)
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("message %d: stored step differs from its JSON's (%v, %v)", i, err1, err2)
			}
		}
	}
	if len(out) != 0 {
		t.Errorf("python wrote %d bytes more than the messages", len(out))
	}
}
