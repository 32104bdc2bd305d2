package particle

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestPauseGCOverlapping pauses the collector from many goroutines, in
// overlapping and nested pauses, and checks that GOGC is off while any
// pause lasts and back as it was after the last.
func TestPauseGCOverlapping(t *testing.T) {
	before := debug.SetGCPercent(137)
	defer debug.SetGCPercent(before)
	outer := PauseGC()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := PauseGC()
			inner := PauseGC()
			inner()
			inner() // twice: harmless
			r()
		}()
	}
	wg.Wait()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d while a pause lasts, want off", p)
	}
	outer()
	if p := debug.SetGCPercent(137); p != 137 {
		t.Fatalf("GOGC %d after the last pause, want 137 back", p)
	}
}
