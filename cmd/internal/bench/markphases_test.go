package bench

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestOverlaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	spans := []timeSpan{{at(10), at(20)}, {at(40), at(50)}}
	for _, c := range []struct {
		from, to int
		want     bool
	}{
		{0, 5, false}, {0, 10, true}, {12, 15, true}, {15, 30, true}, {21, 39, false},
		{30, 60, true}, {50, 55, true}, {51, 60, false}, {0, 100, true},
	} {
		if got := overlaps(spans, at(c.from), at(c.to)); got != c.want {
			t.Errorf("[%d, %d]: overlaps %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if overlaps(nil, at(0), at(100)) {
		t.Error("no spans: overlaps")
	}
}

// node is a heap object with a pointer, for a heap that takes the
// collector a while to mark.
type node struct {
	next *node
	pad  [2]int64
}

// TestWatchMarksSeesACollection forces collections over a heap of
// millions of pointers (tens of milliseconds of marking, many polls)
// and checks that the watcher records a mark phase inside the calls,
// and none before them.
func TestWatchMarksSeesACollection(t *testing.T) {
	var head *node
	for range 4 << 20 {
		head = &node{next: head}
	}
	runtime.GC() // settle: no cycle in progress when watching starts
	ctx, stop := context.WithCancel(context.Background())
	m := watchMarks(ctx)
	time.Sleep(20 * time.Millisecond)
	if s := m.spans(); len(s) != 0 {
		t.Fatalf("%d mark phases before any collection: %v", len(s), s)
	}
	// The window of the forced collections: from the first one's call
	// (a poll delayed on a busy machine may see a mark phase only after
	// the loop has forced the next) to the last one's return.
	var gcFrom, gcTo time.Time
	deadline := time.Now().Add(10 * time.Second)
	for len(m.spans()) == 0 && time.Now().Before(deadline) {
		if gcFrom.IsZero() {
			gcFrom = time.Now()
		}
		runtime.GC()
		gcTo = time.Now()
		time.Sleep(3 * markPollEvery) // the watcher's next polls see the end
	}
	stop()
	runtime.KeepAlive(head)
	s := m.spans()
	if len(s) == 0 {
		t.Fatal("no mark phase seen in 10 s of forced collections")
	}
	// A phase is stamped when the watcher has read the counters, so it
	// starts no earlier than the first forced collection, and no later
	// than the sleep after the last one (the watcher may be scheduled
	// late between its read and its clock).
	last := s[len(s)-1]
	if !last.from.Before(last.to) || last.from.Before(gcFrom) || last.from.After(gcTo.Add(3*markPollEvery)) || last.to.Before(gcFrom) {
		t.Errorf("mark phase %v … %v, not within the collection %v … %v", last.from, last.to, gcFrom, gcTo)
	}
}
