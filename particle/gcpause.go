package particle

import (
	"runtime/debug"
	"sync"
)

// gcPause counts the loads that want the garbage collector off.
var gcPause struct {
	mu    sync.Mutex
	n     int
	saved int // GOGC before the first pause
}

// PauseGC turns the garbage collector off (a memory limit set with
// GOMEMLIMIT or debug.SetMemoryLimit still applies) while something
// builds data that stays reachable, such as a store's view, and returns
// the function that ends the pause; calling it more than once is
// harmless. Pauses nest and overlap: GOGC comes back, as it was before
// the first, when the last one ends, so stores opened side by side in
// one process cannot leave the collector off.
func PauseGC() (resume func()) {
	gcPause.mu.Lock()
	if gcPause.n == 0 {
		gcPause.saved = debug.SetGCPercent(-1)
	}
	gcPause.n++
	gcPause.mu.Unlock()
	return sync.OnceFunc(func() {
		gcPause.mu.Lock()
		defer gcPause.mu.Unlock()
		if gcPause.n--; gcPause.n == 0 {
			debug.SetGCPercent(gcPause.saved)
		}
	})
}
