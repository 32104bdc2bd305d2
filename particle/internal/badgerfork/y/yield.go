package y

import "runtime"

// Yielder lets a background loop (a memtable's flush, a compaction)
// give way to the goroutines that wait to run, every so many steps
// (ctxgraph's change, see CTXGRAPH.md).
//
// Go's scheduler has no priorities: a flush or a compaction holds its
// processor for a whole time slice (10 ms) while ingest's writer and
// its delivery wait behind it, and on a 2-core machine a compaction's
// goroutines take both. runtime.Gosched puts the loop's goroutine on
// the global run queue, which a processor serves after its own, so the
// loop runs on what the others leave and at once when they leave it.
type Yielder struct{ n uint32 }

// yieldEvery is how many steps a Yielder lets pass between yields:
// a table's key or block takes a microsecond or less, so a waiting
// goroutine runs within a few hundred microseconds.
const yieldEvery = 256

// gosched is runtime.Gosched (a test counts the calls).
var gosched = runtime.Gosched

// Step counts one step of the loop and yields every yieldEvery.
func (y *Yielder) Step() {
	y.n++
	if y.n%yieldEvery == 0 {
		gosched()
	}
}
