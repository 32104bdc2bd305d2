package bench

import (
	"testing"
	"time"
)

// A schedstat line's second field is the run-queue wait, in ns.
func TestParseRunDelay(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"13627367 60293 4\n", 60293, true},
		{"0 0 0", 0, true},
		{"13627367\n", 0, false},
		{"", 0, false},
		{"1 x 2", 0, false},
		{"1 -5 2", 0, false},
	} {
		if got, ok := parseRunDelay(c.in); got != c.want || ok != c.ok {
			t.Errorf("parseRunDelay(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
