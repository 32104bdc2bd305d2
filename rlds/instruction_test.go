package rlds

import (
	"reflect"
	"testing"
)

func TestParseInstruction(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Parsed
	}{
		{"put the red block in the blue bowl", Parsed{Goal: "put the red block in the blue bowl", Intent: "put", Objects: []string{"red block", "blue bowl"}}},
		{"Pick up the can", Parsed{Goal: "Pick up the can", Intent: "pick up", Objects: []string{"can"}}},
		{"pick up the red block and put it in the blue bowl", Parsed{Goal: "pick up the red block and put it in the blue bowl", Intent: "pick up", Objects: []string{"red block", "blue bowl"}}},
		{"wipe the table and the counter", Parsed{Goal: "wipe the table and the counter", Intent: "wipe", Objects: []string{"table", "counter"}}},
		{"put cup from counter or drying rack into sink", Parsed{Goal: "put cup from counter or drying rack into sink", Intent: "put", Objects: []string{"cup", "counter", "drying rack", "sink"}}},
		{"  ", Parsed{}},
		{"open", Parsed{Goal: "open", Intent: "open"}},
	} {
		if got := ParseInstruction(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseInstruction(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
