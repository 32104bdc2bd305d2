package bench

import (
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/planner"
)

// The run-queue share is of the measured calls' time only.
func TestLoopCallsRunqShare(t *testing.T) {
	var c loopCalls
	if c.runqShare() != 0 {
		t.Errorf("no calls: share %v", c.runqShare())
	}
	c.addRunq(100*time.Microsecond, 400*time.Microsecond)
	c.addRunq(0, 600*time.Microsecond)
	c.add(5*time.Millisecond, planner.Timings{}) // a call whose thread said nothing
	if got := c.runqShare(); got != 0.1 {
		t.Errorf("share %v, want 0.1", got)
	}
	if c.runq.n() != 2 || c.runq.pct(99) != 100 {
		t.Errorf("%d waits, p99 %v µs", c.runq.n(), c.runq.pct(99))
	}
}
