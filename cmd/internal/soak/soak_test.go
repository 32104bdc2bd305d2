package soak

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSmallSoak runs the soak end to end at a tenth of a second's scale:
// a daemon process, five controllers, the planner, the audit and check.
func TestSmallSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a daemon process")
	}
	bin := filepath.Join(t.TempDir(), "ctxgraph")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/ctxgraph/ctxgraph/cmd/ctxgraph").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// One step a message, and four: the audit finds every acknowledged
	// step stored once either way.
	for _, perMessage := range []int{1, 4} {
		var log strings.Builder
		r, err := Run(context.Background(), Options{Binary: bin, Controllers: 5, Rate: 20, StepsPerEpisode: 15, StepsPerMessage: perMessage,
			PlannerRPS: 20, Duration: 3 * time.Second, Idle: time.Second, Check: true, Log: &log})
		if err != nil {
			t.Fatalf("%d steps a message: %v\n%s", perMessage, err, log.String())
		}
		var out strings.Builder
		r.Print(&out)
		t.Log("\n" + out.String())
		if !r.OK() || r.StepsAcked == 0 || r.StepsStored < r.StepsAcked || r.PlannerUnderLoad.N == 0 || r.PlannerIdleAfter.N == 0 || r.RSSMaxMB == 0 {
			t.Errorf("%d steps a message: report: %+v", perMessage, r)
		}
	}
}

func TestSoakRefusesMoreStepsAMessageThanAMessageMayCarry(t *testing.T) {
	if _, err := Run(context.Background(), Options{Binary: "/nonexistent", StepsPerMessage: 1025}); err == nil || !strings.Contains(err.Error(), "1..1024") {
		t.Errorf("err = %v, want the refusal naming 1..1024", err)
	}
}
