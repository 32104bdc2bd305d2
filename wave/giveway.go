package wave

import "runtime"

// giveWay lets a background loop of the vector index (a retraining's
// k-means and its placing of every entry) give way to the goroutines
// that wait to run, every so many steps.
//
// Go's scheduler has no priorities: a retraining holds its processor
// for a whole time slice (10 ms) while ingest's graph writer, the
// bound on ingest, waits behind it, and on a 2-core machine the writer
// was runnable but not running for a quarter of its time in the bulk
// phase (BENCHMARKS.md, seventieth round). runtime.Gosched puts the
// loop's goroutine on the global run queue, which a processor serves
// after its own, so the loop runs on what the others leave and at once
// when they leave it, as the graph store's flushes and compactions do
// (particle/internal/badgerfork/y.Yielder). The indexer's inserts do not
// give way so: a step is visible to the planner once the index holds
// it, and with them yielding too the visibility p99 was worse in three
// pairs of runs of three (BENCHMARKS.md, seventy-seventh round).
type giveWay struct {
	n, every int
	yield    func()
}

// giveWayDots is about how much work a loop does between yields, in
// dot products of 384 dimensions: some 80 µs on the bench's machine,
// so a waiting goroutine runs within a tenth of a millisecond.
const giveWayDots = 4096

// newGiveWay yields every giveWayDots of work for a loop whose step
// costs about dots dot products.
func newGiveWay(dots int) giveWay {
	return giveWay{every: max(1, giveWayDots/max(1, dots)), yield: gosched}
}

// gosched is runtime.Gosched (a test of k-means counts the calls).
var gosched = runtime.Gosched

// step counts one step of the loop and yields every g.every.
func (g *giveWay) step() {
	if g.n++; g.n >= g.every {
		g.n = 0
		g.yield()
	}
}
