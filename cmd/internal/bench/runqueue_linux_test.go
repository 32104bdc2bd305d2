package bench

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadWaits reads the calling thread's own schedstat: its id is the
// thread's, and its wait never goes back.
func TestThreadWaitsReadsTheCallingThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tw := newThreadWaits()
	defer tw.close()
	tid, w0, ok := tw.current()
	if tid != unix.Gettid() {
		t.Fatalf("thread %d, want the caller's %d", tid, unix.Gettid())
	}
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if kernelSays := err == nil; ok != kernelSays {
		t.Fatalf("current ok %v, schedstat readable %v (%v)", ok, kernelSays, err)
	}
	if !ok {
		return // this kernel keeps no schedstat: nothing to read
	}
	for range 20 {
		time.Sleep(100 * time.Microsecond) // off the CPU and back: a run-queue visit
	}
	tid2, w1, ok := tw.current()
	if !ok || tid2 != tid || w1 < w0 || w0 < 0 {
		t.Errorf("second read: thread %d ok %v, wait %v after %v", tid2, ok, w1, w0)
	}
	if len(tw.files) != 1 {
		t.Errorf("%d files open for one thread", len(tw.files))
	}
}
