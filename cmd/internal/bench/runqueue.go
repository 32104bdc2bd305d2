package bench

import (
	"strconv"
	"strings"
	"time"
)

// parseRunDelay reads the run-queue wait, in ns, from a schedstat line
// (/proc/.../schedstat): the time on a CPU, the time waiting for one,
// and the slices run.
func parseRunDelay(s string) (time.Duration, bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || ns < 0 {
		return 0, false
	}
	return time.Duration(ns), true
}
