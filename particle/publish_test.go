package particle

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/wave"
)

// putEdges commits n new edges from one node to n others in one batch
// and returns their ids.
func putEdges(tb testing.TB, s *Store, n int, round int) []string {
	tb.Helper()
	ids := make([]string, 0, n)
	_, err := s.Update(context.Background(), func(b *Batch) error {
		hub, _, err := b.Resolve(DefaultNamespace, NodeEntity, "hub")
		if err != nil {
			return err
		}
		if err := b.PutNode(hub); err != nil {
			return err
		}
		at := time.Unix(1_800_000_000, 0).UTC()
		for i := range n {
			o, _, err := b.Resolve(DefaultNamespace, NodeEntity, fmt.Sprintf("thing %d", i))
			if err != nil {
				return err
			}
			if err := b.PutNode(o); err != nil {
				return err
			}
			idx := i
			e, _, err := b.Observe(Observation{
				Source: hub.ID, Target: o.ID, Type: EdgeAssertion, Predicate: fmt.Sprintf("saw in round %d", round), At: at,
				Provenance: Provenance{EpisodeID: "ep", StepIndex: &idx},
				Decay:      wave.DecayExp, HalfLife: time.Hour, Reinforce: 0.2,
			})
			if err != nil {
				return err
			}
			ids = append(ids, e.ID)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

// A reader that arrives while a large batch is published gets in
// before the batch is through, and sees what it sees whole: an edge in
// the view has its facts and is in its source's adjacency.
func TestPublishLetsReadersInBetweenHolds(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	putEdges(t, s, 10, 0) // the hub and some nodes exist: the batch below is mostly edges
	const n = 320         // five holds of 64
	var seen []int
	var torn []string
	betweenHolds = func() {
		s.Read(func(r Reader) {
			visible := 0
			hub := r.Node(EntityID(DefaultNamespace, NodeEntity, "hub"))
			r.OutNewestFacts(hub.ID, func(seq uint64, f *EdgeFacts, target uint64) bool {
				e := r.EdgeBySeq(seq)
				switch {
				case e == nil:
					torn = append(torn, fmt.Sprintf("seq %d in the adjacency but not in the view", seq))
				case r.EdgeFactsBySeq(seq) == nil:
					torn = append(torn, e.ID+" without facts")
				case r.Edge(e.ID) != e:
					torn = append(torn, e.ID+" not found by its id")
				case e.Predicate() == "saw in round 1":
					visible++
				}
				return true
			})
			seen = append(seen, visible)
		})
	}
	defer func() { betweenHolds = nil }()
	want := putEdges(t, s, n, 1)
	betweenHolds = nil
	if len(torn) > 0 {
		t.Fatalf("readers between holds saw torn items: %v", torn[:min(5, len(torn))])
	}
	if len(seen) == 0 {
		t.Fatalf("a batch of %d edges (and their nodes) let no reader in while it was published", n)
	}
	if !slices.IsSorted(seen) || seen[0] == 0 && seen[len(seen)-1] == 0 {
		t.Fatalf("edges seen at each hold %v: want a growing part of the batch", seen)
	}
	if last := seen[len(seen)-1]; last >= n {
		t.Fatalf("a reader between holds saw all %d edges: the batch was not published in parts (%v)", n, seen)
	}
	s.Read(func(r Reader) {
		for _, id := range want {
			if r.Edge(id) == nil {
				t.Fatalf("edge %s missing once the batch is published", id)
			}
		}
	})
}

// A hold ends on time as well as on its count: with no time allowed, a
// batch of fewer than publishHold items still lets readers in every
// holdClockEvery items.
func TestPublishHoldEndsOnTime(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	putEdges(t, s, 40, 0) // the nodes exist: the batch below is its 40 edges and the hub
	saved := publishHoldTime
	publishHoldTime = 0
	gaps := 0
	betweenHolds = func() { gaps++ }
	defer func() { publishHoldTime, betweenHolds = saved, nil }()
	putEdges(t, s, 40, 1)
	if want := 40 / holdClockEvery; gaps < want {
		t.Fatalf("a batch of 40 edges let readers in %d times with no hold time allowed, want at least %d", gaps, want)
	}
}

// A reader that starts waiting in the middle of a hold gets in at the
// writer's next item, not at the hold's end: with no time bound on a
// hold, it sees exactly what the batch had published when it began to
// wait.
func TestPublishLetsAWaitingReaderInAtTheNextItem(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	putEdges(t, s, 10, 0)   // the hub's first 10 edges; the batch below adds 200
	s.Read(func(Reader) {}) // the policies loaded (under the read lock) before the hook below waits for a reader
	saved := publishHoldTime
	publishHoldTime = time.Hour // a hold ends on its count, or on a reader
	hub := EntityID(DefaultNamespace, NodeEntity, "hub")
	want, got := -1, -1
	read := make(chan struct{})
	inHold = func() {
		// The writer's goroutine, holding the write lock: it may read
		// the view as it is.
		if want >= 0 || len(s.v.out[hub]) != 40 {
			return
		}
		want = len(s.v.out[hub])
		go func() {
			defer close(read)
			s.Read(func(r Reader) { got = len(r.v.out[hub]) })
		}()
		for s.readersWaiting.Load() == 0 {
			runtime.Gosched() // until the reader waits for the lock
		}
	}
	defer func() { publishHoldTime, inHold = saved, nil }()
	putEdges(t, s, 200, 1)
	inHold = nil
	<-read
	if want < 0 {
		t.Fatal("the hub's list never held 40 edges during the publish")
	}
	if got != want {
		t.Fatalf("a reader that began waiting with %d of the hub's edges published got in with %d: the hold went on past it", want, got)
	}
}

// A batch whose seqs pass the end of the view's arrays by seq, and
// whose new edges outgrow a hub's adjacency list, has them grown before
// its first hold of the lock (seqroom.go): between its holds they are
// the arrays it began with.
func TestPublishGrowsArraysAndListsBeforeItsHolds(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	putEdges(t, s, 8, 0)
	saved := publishHoldTime
	publishHoldTime = 0 // a hold every holdClockEvery items
	hub := EntityID(DefaultNamespace, NodeEntity, "hub")
	type arrays struct{ facts, ends, edges, hubOut uintptr }
	at := func(p unsafe.Pointer) uintptr { return uintptr(p) }
	now := func() arrays {
		v := s.v
		return arrays{at(unsafe.Pointer(unsafe.SliceData(v.edgeFacts))), at(unsafe.Pointer(unsafe.SliceData(v.ends))),
			at(unsafe.Pointer(unsafe.SliceData(v.edgeSeq))), at(unsafe.Pointer(unsafe.SliceData(v.out[hub])))}
	}
	var seen []arrays
	betweenHolds = func() { seen = append(seen, now()) }
	defer func() { publishHoldTime, betweenHolds = saved, nil }()
	before := cap(s.v.edgeFacts)
	putEdges(t, s, 4*before, 1) // far past the arrays' room
	if cap(s.v.edgeFacts) <= before {
		t.Fatalf("the facts' capacity %d did not grow past %d", cap(s.v.edgeFacts), before)
	}
	if n := len(s.v.out[hub]); n < 4*before {
		t.Fatalf("the hub's out list holds %d edges, want at least %d", n, 4*before)
	}
	if len(seen) < 2 {
		t.Fatalf("the batch let readers in %d times, want many", len(seen))
	}
	for i, a := range seen {
		if a != seen[0] {
			t.Fatalf("the arrays by seq or the hub's list moved between holds %d and %d of the publish: %+v, then %+v", 0, i, seen[0], a)
		}
	}
	if got := now(); got != seen[0] {
		t.Fatalf("the arrays by seq or the hub's list moved after the last hold: %+v, then %+v", seen[0], got)
	}
}

// BenchmarkReadWaitWhilePublishing times how long a reader waits for
// the view while a writer publishes batches of 2,048 edges back to
// back (a bulk ingest's batch size), and reports the wait's p50, p99
// and max.
//
//	go test ./particle -run '^$' -bench ReadWaitWhilePublishing -benchtime 2000x
func BenchmarkReadWaitWhilePublishing(b *testing.B) {
	s := openScratchStore(b, b.TempDir())
	putEdges(b, s, 16, 0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; !stop.Load(); round++ {
			putEdges(b, s, 2048, round)
		}
	}()
	waits := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		s.Read(func(Reader) { waits = append(waits, time.Since(t0)) })
		time.Sleep(200 * time.Microsecond) // a planner's pace, not a spin on the lock
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	slices.Sort(waits)
	at := func(p float64) float64 { return float64(waits[int(float64(len(waits)-1)*p)].Microseconds()) }
	b.ReportMetric(at(0.5), "wait-p50-µs")
	b.ReportMetric(at(0.99), "wait-p99-µs")
	b.ReportMetric(at(1), "wait-max-µs")
}
