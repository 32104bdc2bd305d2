package bench

import (
	"context"
	"runtime/metrics"
	"slices"
	"sync"
	"time"
)

// markPhases records when this process's garbage collector was marking,
// for telling apart the steps whose visibility lag a collection
// stretched: with the daemon in the same process, its collections are
// these. Each cycle stops the world twice, at its start (sweep
// termination, marking begins) and at its end (mark termination), and
// the runtime counts both pauses in /sched/pauses/total/gc:seconds and
// the finished cycles in /gc/cycles/total:gc-cycles: a cycle marks from
// the pause count's 2k+1st pause until the cycle count passes k. A
// poll every markPollEvery places each phase to within that.
type markPhases struct {
	mu     sync.Mutex
	phases []timeSpan
	open   time.Time // start of the phase in progress (zero: none)
}

// timeSpan is [from, to].
type timeSpan struct{ from, to time.Time }

// markPollEvery is how often markPhases reads the runtime's counters.
const markPollEvery = 2 * time.Millisecond

// gcCounts reads the GC pauses and finished cycles so far.
func gcCounts(s []metrics.Sample) (pauses, cycles uint64, ok bool) {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0, false
	}
	for _, c := range s[0].Value.Float64Histogram().Counts {
		pauses += c
	}
	return pauses, s[1].Value.Uint64(), true
}

// watchMarks records mark phases until ctx ends; the phase in progress
// then ends at that moment.
func watchMarks(ctx context.Context) *markPhases {
	m := &markPhases{}
	s := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	if _, _, ok := gcCounts(s); !ok {
		return m // a runtime without these metrics: no phases known
	}
	go func() {
		t := time.NewTicker(markPollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				m.note(false, time.Now())
				return
			case <-t.C:
				pauses, cycles, _ := gcCounts(s)
				// Marking while the pauses are one past two per cycle
				// finished (the second pause can be counted a little
				// after the cycle: then not marking either). The time
				// is read after the counters, not taken from the tick:
				// a tick received late carries the time it fired,
				// which can be before a phase the counters then show.
				m.note(pauses > 2*cycles, time.Now())
			}
		}
	}()
	return m
}

// note records whether the collector was marking at now.
func (m *markPhases) note(marking bool, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case marking && m.open.IsZero():
		m.open = now
	case !marking && !m.open.IsZero():
		m.phases = append(m.phases, timeSpan{m.open, now})
		m.open = time.Time{}
	}
}

// spans returns the mark phases recorded so far, the one in progress
// ending now.
func (m *markPhases) spans() []timeSpan {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.phases)
	if !m.open.IsZero() {
		out = append(out, timeSpan{m.open, time.Now()})
	}
	return out
}

// overlaps reports whether [from, to] overlaps any of spans (sorted by
// start, as recorded).
func overlaps(spans []timeSpan, from, to time.Time) bool {
	for _, s := range spans {
		if s.from.After(to) {
			return false
		}
		if !s.to.Before(from) {
			return true
		}
	}
	return false
}
