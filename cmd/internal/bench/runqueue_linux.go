//go:build linux

package bench

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxThreadFiles bounds the schedstat files a threadWaits keeps open:
// one per OS thread the runtime ran the caller on (a dozen here).
const maxThreadFiles = 64

// threadWaits reads how long the OS threads of this process have waited
// on the kernel's run queue: runnable, for a CPU another thread held
// (the second field of /proc/self/task/TID/schedstat). A goroutine
// that runs on a thread of its own as Go sees it can still wait so, for
// threads working inside system calls (the runtime hands their P to
// another thread meanwhile) and for the kernel's own (BENCHMARKS.md,
// sixty-third round). It keeps each thread's file open, read again
// from its start. Not safe for concurrent use.
type threadWaits struct {
	files map[int]*os.File
	buf   [128]byte
}

func newThreadWaits() *threadWaits { return &threadWaits{files: map[int]*os.File{}} }

// current returns the calling thread's id and how long it has waited
// on the run queue so far. ok is false where the kernel does not say
// (no schedstat) or when the goroutine moved to another thread during
// the read.
func (w *threadWaits) current() (tid int, wait time.Duration, ok bool) {
	tid = unix.Gettid()
	f := w.files[tid]
	if f == nil {
		if len(w.files) >= maxThreadFiles {
			return tid, 0, false
		}
		var err error
		if f, err = os.Open(fmt.Sprintf("/proc/self/task/%d/schedstat", tid)); err != nil {
			return tid, 0, false
		}
		w.files[tid] = f
	}
	n, err := f.ReadAt(w.buf[:], 0)
	if err != nil && err != io.EOF {
		// The thread is gone (its id may come back for another): open
		// the file again next time.
		f.Close()
		delete(w.files, tid)
		return tid, 0, false
	}
	if unix.Gettid() != tid {
		return tid, 0, false
	}
	wait, ok = parseRunDelay(string(w.buf[:n]))
	return tid, wait, ok
}

// close closes the files.
func (w *threadWaits) close() {
	for _, f := range w.files {
		f.Close()
	}
	clear(w.files)
}
