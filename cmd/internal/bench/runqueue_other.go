//go:build !linux

package bench

import "time"

// threadWaits reads the threads' run-queue waits on Linux only
// (runqueue_linux.go); elsewhere it reports nothing.
type threadWaits struct{}

func newThreadWaits() *threadWaits { return &threadWaits{} }

func (w *threadWaits) current() (tid int, wait time.Duration, ok bool) { return 0, 0, false }

func (w *threadWaits) close() {}
