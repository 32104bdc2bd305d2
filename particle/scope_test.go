package particle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

func TestCheckScope(t *testing.T) {
	for _, ok := range [][2]string{{"", ""}, {"lab-a", ""}, {"", "arm_2"}, {"Lab.B", "x-1.y"}, {strings.Repeat("t", particle.MaxScopeName), "p"}} {
		if err := particle.CheckScope(ok[0], ok[1]); err != nil {
			t.Errorf("tenant %q project %q refused: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{"lab/a", "x"}, {"lab", "a/x"}, {"a\x00b", ""}, {"", "a b"}, {"é", ""},
		{"", "x\n"}, {strings.Repeat("t", particle.MaxScopeName+1), ""}} {
		if err := particle.CheckScope(bad[0], bad[1]); !errors.Is(err, particle.ErrInvalid) {
			t.Errorf("tenant %q project %q: %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
	// What it accepts never joins two scopes into one namespace.
	if particle.Namespace("lab/a", "x") != particle.Namespace("lab", "a/x") {
		t.Error("the scopes CheckScope refuses are no longer the colliding ones; revisit its rules")
	}
}
