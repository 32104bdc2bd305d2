package bench

import (
	"os"
	"testing"
	"time"
)

// TestStealShare reads the machine's CPU time and the host's steal from
// /proc/stat's first line, and the share between two readings.
func TestStealShare(t *testing.T) {
	t0 := parseCPUTicks("cpu  134746 48 43465 115067 1936 0 919 4271 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	if !t0.ok || t0.all != 134746+48+43465+115067+1936+0+919+4271 || t0.steal != 4271 {
		t.Fatalf("parsed %+v", t0)
	}
	t1 := parseCPUTicks("cpu  134846 48 43465 115567 1936 0 919 4371 0 0\n")
	if got := stealShare(t0, t1); got != 100.0/700 {
		t.Errorf("steal share %v, want 1/7", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if parseCPUTicks(bad).ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if got := stealShare(t0, cpuTicks{}); got != -1 {
		t.Errorf("steal share with an unknown reading %v, want -1", got)
	}
	if got := stealShare(t0, t0); got != -1 {
		t.Errorf("steal share over no time %v, want -1", got)
	}
}

// pass is a measurement pass of one call per query, query i's taking
// us[i] µs.
func pass(us ...int) *result {
	res := newResult()
	for q, u := range us {
		res.calls = append(res.calls, call{query: q, lat: time.Duration(u) * time.Microsecond})
	}
	return res
}

// TestFasterOfTwo keeps each query's faster call of two passes.
func TestFasterOfTwo(t *testing.T) {
	best := fasterOfTwo(pass(500, 3000, 700), pass(900, 600, 650))
	if best.n() != 3 || best.pct(100) != 650 || best.pct(0) != 500 || best.mean() != (500+600+650)/3.0 {
		t.Errorf("faster of two: %v", best.v)
	}
}

// TestStalledCalls counts, in each of two passes, the calls that took 3
// times and 1 ms more than the same query's in the other pass.
func TestStalledCalls(t *testing.T) {
	// Query 0 stalled in the first pass, 1 in the second; 2 is 3 times
	// slower but not 1 ms; 3 is 1 ms slower but not 3 times; 4 is level.
	a := pass(5000, 400, 600, 2000, 700)
	b := pass(500, 1800, 200, 900, 700)
	if inA, inB := stalledCalls(a, b); inA != 1 || inB != 1 {
		t.Errorf("stalled %d in the first pass, %d in the second; want 1, 1", inA, inB)
	}
	if inA, inB := stalledCalls(b, a); inA != 1 || inB != 1 {
		t.Errorf("passes swapped: stalled %d, %d; want 1, 1", inA, inB)
	}
	if inA, inB := stalledCalls(a, pass()); inA != 0 || inB != 0 {
		t.Errorf("against an empty pass: stalled %d, %d", inA, inB)
	}
}

// TestPageFaultTime times fresh pages: a positive, finite time a page,
// and less than the 32 MiB took in all; readUsage counts the faults.
func TestPageFaultTime(t *testing.T) {
	u0, t0 := readUsage(), time.Now()
	us, ok := pageFaultTime()
	whole, u := time.Since(t0), readUsage().sub(u0)
	if !ok {
		t.Fatal("could not map the memory to fault in")
	}
	if !(us > 0) || us*float64(faultBytes/os.Getpagesize()) > float64(whole.Microseconds())+1 {
		t.Fatalf("%v µs a page, %v for all %d MiB", us, whole, faultBytes>>20)
	}
	// The process's counters saw the faults: at least one a 2 MiB page
	// (THP mode "always"), one a 4 KiB page elsewhere.
	if u.minorFaults < faultBytes>>21 || u.cpu() <= 0 || u.system < 0 {
		t.Errorf("usage over the touch: %+v", u)
	}
}
