package wave

import (
	"slices"
	"testing"
	"time"
)

// timeBase is the start of the time split tests' history (2026-10-01).
const timeBase = int64(1790812800e9)

// timeAt is the start of item i's scope in a history of n items spread
// over 200 hours.
func timeAt(i, n int) int64 { return timeBase + int64(i)*(200*timeBucketNS/int64(n)) }

// timeMeta gives item i of n a scope: one in ten none (a node), one in
// ten open (a fact that still holds), one in ten 30 hours long, the rest
// a few minutes from their start (a step's events); and one of 20
// agents, a confidence level.
func timeMeta(n int) func(int) Meta {
	return func(i int) Meta {
		m := Meta{Kind: KindEdge, Namespace: 1, Type: uint8(i % 7), Time: timeAt(i, n),
			Confidence: uint8(1 + i*37%250), Agent: splitAgents[i%len(splitAgents)]}
		switch i % 10 {
		case 2:
			m.Time, m.End = 0, 0
		case 5:
			m.End = 0
		case 8:
			m.End = m.Time + 30*timeBucketNS
		default:
			m.End = m.Time + int64(i%7)*60e9
		}
		return m
	}
}

// timeWindows are windowed filters of n items' history: narrow ones the
// split serves (hours of it, a confidence floor, an open start, an open
// end) and a wide one (most of the history) for the lists.
func timeWindows(n int) (narrow []*Filter, wide *Filter) {
	at := func(h int64) int64 { return timeBase + h*timeBucketNS + 17*60e9 }
	narrow = []*Filter{
		{From: at(40), To: at(42)},
		{From: at(100), To: at(101), MinConfidence: 120},
		{From: at(150), To: at(158), Types: []uint8{1, 4}},
		{To: at(3)},
		{From: at(197)},
	}
	return narrow, &Filter{From: at(20), To: at(180)}
}

// timeIVF builds an IVF split by time (before its first item) and a Flat
// over vecs with timeMeta.
func timeIVF(t testing.TB, vecs [][]float32) (*IVF, *Flat) {
	t.Helper()
	return buildIVFWith(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, timeMeta(len(vecs)), (*IVF).SplitByTime)
}

// TestTimeKey: an item is keyed by the hour it starts in only when its
// scope is closed and at most an hour long.
func TestTimeKey(t *testing.T) {
	h := int64(490000)
	for _, c := range []struct {
		time, end int64
		key       uint32
		ok        bool
	}{
		{h * timeBucketNS, h * timeBucketNS, uint32(h), true},
		{h*timeBucketNS + 5, (h+1)*timeBucketNS + 5, uint32(h), true},
		{h*timeBucketNS - 1, h*timeBucketNS + 60e9, uint32(h - 1), true},
		{h * timeBucketNS, (h+1)*timeBucketNS + 1, 0, false}, // too long
		{h * timeBucketNS, 0, 0, false},                      // open
		{0, 0, 0, false},                                     // timeless
		{0, h * timeBucketNS, 0, false},                      // open start
		{h * timeBucketNS, h*timeBucketNS - 1, 0, false},     // ends before it starts
		{-5, -1, 0, false},                                   // before 1970
	} {
		key, ok := timeKey(Meta{Time: c.time, End: c.end})
		if key != c.key || ok != c.ok {
			t.Errorf("timeKey(%d, %d) = %d, %v; want %d, %v", c.time, c.end, key, ok, c.key, c.ok)
		}
	}
}

// TestSplitByTimeRecall: searches under narrow windows, served by the
// split (the same hits as searchTime's, which reads the window's hours
// and the catch-alls), find what exact search finds; a wide window is
// left to the lists and finds it too; no hit breaks its filter.
func TestSplitByTimeRecall(t *testing.T) {
	const n = 12000
	all := clustered(31, n+100, 32, 40)
	vecs, qs := all[:n], all[n:]
	x, flat := timeIVF(t, vecs)
	if !x.TimeSplitReady() || x.SplitReady() {
		t.Fatalf("time split ready %v, agent split ready %v; want true, false", x.TimeSplitReady(), x.SplitReady())
	}
	sd := x.sides[byTime].Load()
	if got := sd.ids.len() + sd.shared.Len(); got != n {
		t.Fatalf("split holds %d items, want %d", got, n)
	}
	if sh := sd.shared.Len(); sh != 3*n/10 {
		t.Fatalf("catch-alls' index holds %d items, want the %d timeless, open and long ones", sh, 3*n/10)
	}
	meta := timeMeta(n)
	narrow, wide := timeWindows(n)
	for _, f := range append(narrow, wide) {
		wantRecall(t, x, flat, qs, f)
		for _, q := range qs[:20] {
			hits := x.Search(q, 10, f)
			checkHits(t, hits, 10, f, func(id uint64) (Meta, bool) { return meta(int(id)), id < n })
			var st SearchStats
			via, ok := x.searchTime(sd, q, 10, f, &st)
			if f == wide {
				if ok {
					t.Fatalf("wide window %+v served by the split", *f)
				}
				continue
			}
			if !ok || !slices.Equal(hits, via) {
				t.Fatalf("filter %+v: Search gave %v, the split %v (served %v)", *f, hits, via, ok)
			}
			// The window's hours (at most its span and the hour before),
			// then at least 8 of the catch-alls' lists.
			if st.Lists < min(8, sd.shared.Lists()) || st.Scored == 0 {
				t.Fatalf("filter %+v: the split's search %+v; the catch-alls have %d lists", *f, st, sd.shared.Lists())
			}
		}
	}
}

// TestSplitByTimeFollowsChanges: an item whose scope moves to another
// hour, opens, closes again, which is removed, added again or compacted,
// is found under the windows it overlaps now and no other, through the
// split.
func TestSplitByTimeFollowsChanges(t *testing.T) {
	const n = 3000
	vecs := clustered(32, n, 32, 20)
	x, _ := timeIVF(t, vecs)
	meta := timeMeta(n)
	const id = 41 // a few minutes long
	m := meta(id)
	first := m.Time / timeBucketNS
	hour := func(h int64) *Filter {
		start := (first + h) * timeBucketNS
		return &Filter{From: start, To: start + timeBucketNS - 1}
	}
	finds := func(f *Filter) bool {
		t.Helper()
		if !x.TimeSplitReady() {
			t.Fatal("split not ready")
		}
		if _, ok := x.searchTime(x.sides[byTime].Load(), vecs[id], 1, f, nil); !ok {
			t.Fatalf("window %+v not served by the split", *f)
		}
		hits := x.Search(vecs[id], 1, f)
		return len(hits) == 1 && hits[0].ID == id
	}
	if !finds(hour(0)) || finds(hour(5)) {
		t.Fatalf("item of hour 0: found in hour 0 %v, in hour 5 %v", finds(hour(0)), finds(hour(5)))
	}
	m.Time, m.End = m.Time+5*timeBucketNS, m.End+5*timeBucketNS
	x.SetMeta(id, m)
	if finds(hour(0)) || !finds(hour(5)) {
		t.Fatalf("moved to hour 5: found in hour 0 %v, in hour 5 %v", finds(hour(0)), finds(hour(5)))
	}
	m.End = 0 // it holds again: a catch-all from hour 5 on
	x.SetMeta(id, m)
	if finds(hour(0)) || !finds(hour(5)) || !finds(hour(40)) {
		t.Fatalf("open from hour 5: found in hours 0, 5, 40: %v %v %v", finds(hour(0)), finds(hour(5)), finds(hour(40)))
	}
	m.End = m.Time + 10*60e9 // closed again, within the hour
	m.Type = 99              // a field written once: the entry is re-appended
	x.SetMeta(id, m)
	if !finds(hour(5)) || finds(hour(40)) {
		t.Fatalf("closed in hour 5, new type: found in hours 5, 40: %v %v", finds(hour(5)), finds(hour(40)))
	}
	x.Remove(id)
	if finds(hour(5)) {
		t.Fatal("removed item found")
	}
	if err := x.Add(id, vecs[id], meta(id)); err != nil {
		t.Fatal(err)
	}
	if !finds(hour(0)) || finds(hour(5)) {
		t.Fatalf("added again in hour 0: found in hour 0 %v, in hour 5 %v", finds(hour(0)), finds(hour(5)))
	}
	x.Cleanup()
	if sd := x.sides[byTime].Load(); sd.dead != 0 || sd.shared.Tombstones() != 0 {
		t.Fatalf("after Cleanup the split keeps %d + %d tombstones", sd.dead, sd.shared.Tombstones())
	}
	if !finds(hour(0)) || finds(hour(5)) {
		t.Fatalf("after Cleanup: found in hour 0 %v, in hour 5 %v", finds(hour(0)), finds(hour(5)))
	}
	// Across an hour's end: kept in the hour it starts in, found by a
	// window that begins in the next.
	m = meta(id)
	m.Time, m.End = (first+8)*timeBucketNS-10*60e9, (first+8)*timeBucketNS+10*60e9
	x.SetMeta(id, m)
	if f := (&Filter{From: m.End - 60e9, To: m.End + 2*timeBucketNS}); !finds(f) || finds(hour(9)) {
		t.Fatalf("from hour 7 into 8: found by a window from its last minute %v, in hour 9 %v", finds(f), finds(hour(9)))
	}
}

// TestSplitsTogether: an index that holds its items already, split by
// agent and by time (the daemon's way), fills both in the background,
// each list sized to what it holds; a filter naming one agent goes to
// the agents' split, a narrow window without one to the hours', and both
// find what exact search finds.
func TestSplitsTogether(t *testing.T) {
	const n = 6000
	all := clustered(33, n+50, 32, 30)
	vecs, qs := all[:n], all[n:]
	x, flat := buildIVFMeta(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, timeMeta(n))
	x.SplitByAgent()
	x.SplitByTime()
	deadline := time.Now().Add(30 * time.Second)
	for !x.SplitReady() || !x.TimeSplitReady() {
		if time.Now().After(deadline) {
			t.Fatalf("splits of a filled index not ready after 30 s: agent %v, time %v", x.SplitReady(), x.TimeSplitReady())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for by := range splitKinds {
		sd := x.sides[by].Load()
		for slot, l := range sd.lists.Load().lists {
			if l.room() != l.len() {
				t.Errorf("split %d, list %d: room for %d entries, holds %d", by, slot, l.room(), l.len())
			}
		}
		sd.shared.WaitRebuild()
	}
	narrow, _ := timeWindows(n)
	agent := splitAgents[7]
	for _, f := range []*Filter{narrow[0], narrow[1], {Agent: agent, From: narrow[2].From, To: narrow[2].To}} {
		if r := recall(t, x, flat, qs, 10, f); r < 0.95 {
			t.Errorf("filter %+v: recall@10 = %.4f, want >= 0.95", *f, r)
		}
	}
	f := &Filter{Agent: agent, From: narrow[0].From, To: narrow[0].To}
	if got, want := x.Search(qs[0], 10, f), x.searchAgent(x.sides[byAgent].Load(), qs[0], 10, f, nil); !slices.Equal(got, want) {
		t.Fatalf("one agent under a window: Search gave %v, the agents' split %v", got, want)
	}
}

// TestSplitByTimeConcurrent: windowed searches through the split run
// beside a writer moving items between hours and removing and adding
// them (run with -race); every hit is an item.
func TestSplitByTimeConcurrent(t *testing.T) {
	const n = 3000
	vecs := clustered(34, n, 32, 20)
	x, _ := timeIVF(t, vecs)
	narrow, _ := timeWindows(n)
	searchWhileMoving(t, x, vecs, timeMeta(n), func(m Meta, i, round int) Meta {
		shift := int64(round%7) * timeBucketNS
		m.Time += shift
		if m.End != 0 {
			m.End += shift
		}
		return m
	}, func(i int) *Filter { return narrow[i%len(narrow)] })
}

// TestSplitAsksBestFirst: the lists a split scans first (an hour's, an
// agent's items, in time order) are asked about best first, so that
// Allow hears of about the items the heap keeps, not of every item that
// would enter a heap filling in time order; and what it refuses is left
// out, as exact search under the same predicate leaves it.
func TestSplitAsksBestFirst(t *testing.T) {
	const n = 12000
	all := clustered(35, n+40, 32, 40)
	vecs, qs := all[:n], all[n:]
	x, flat := buildIVFWith(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, timeMeta(n), func(x *IVF) {
		x.SplitByAgent()
		x.SplitByTime()
	})
	narrow, _ := timeWindows(n)
	const k = 10
	keep := max(4*k, 40)
	for _, base := range []*Filter{{From: narrow[2].From, To: narrow[2].To}, {Agent: splitAgents[7]}} {
		for _, refuse := range []bool{false, true} {
			f := *base
			f.Allow = func(id uint64) bool { return !refuse || id%3 != 0 }
			var st SearchStats
			f.Stats = &st
			for _, q := range qs {
				if x.Search(q, k, &f) == nil {
					t.Fatalf("filter %+v: no hit", *base)
				}
			}
			asked := float64(st.Asked) / float64(len(qs))
			t.Logf("filter %+v, a third refused %v: %.1f asked, %.1f scored per search", *base, refuse, asked, float64(st.Scored)/float64(len(qs)))
			// Best first, the first lists' asks are keep (or half as many
			// again, a third of them refused); the catch-alls' lists add
			// those better than the heap's worst.
			if limit := 2.5 * float64(keep); refuse && asked > 1.5*limit || !refuse && asked > limit {
				t.Errorf("filter %+v, a third refused %v: %.1f asked per search, want at most %.0f", *base, refuse, asked, limit)
			}
			f.Stats = nil
			wantRecall(t, x, flat, qs, &f)
		}
	}
}

// TestSplitByTimeStaysCompact: an hour's list, once the next hour has
// one, holds no room to grow into, and filled out of order little;
// items leaving the hours' lists (an
// edge observed again past its hour becomes a catch-all) leave
// tombstones that the split reclaims by itself once they pass 5% of it,
// with no Cleanup, and the items are found where they are now.
func TestSplitByTimeStaysCompact(t *testing.T) {
	const n = 6000
	vecs := clustered(36, n, 32, 20)
	x, _ := timeIVF(t, vecs)
	sd := x.sides[byTime].Load()
	al := sd.lists.Load()
	last := al.sorted[len(al.sorted)-1].slot
	for _, e := range al.sorted {
		if l := al.lists[e.slot]; e.slot != last && l.room() > l.len()+l.len()/8 {
			t.Errorf("hour %d: room for %d entries, holds %d", e.key, l.room(), l.len())
		}
	}
	meta := timeMeta(n)
	keyed := sd.ids.len()
	moved := 0
	for i := 0; i < n; i += 3 {
		m := meta(i)
		if _, ok := timeKey(m); !ok {
			continue
		}
		m.End = m.Time + 3*timeBucketNS
		x.SetMeta(uint64(i), m)
		moved++
	}
	if sd.dead > 64+sd.ids.len()/20 {
		t.Fatalf("%d tombstones in the hours' lists after %d of %d items left them", sd.dead, moved, keyed)
	}
	if got := sd.ids.len() + sd.shared.Len(); got != n || sd.ids.len() != keyed-moved {
		t.Fatalf("split holds %d items (%d keyed), want %d (%d keyed)", got, sd.ids.len(), n, keyed-moved)
	}
	for i := 0; i < n; i += 3 * 37 {
		m := meta(i)
		if _, ok := timeKey(m); !ok {
			continue
		}
		later := &Filter{From: m.Time + 2*timeBucketNS, To: m.Time + 2*timeBucketNS + 60e9}
		if hits := x.Search(vecs[i], 1, later); len(hits) != 1 || hits[0].ID != uint64(i) {
			t.Fatalf("item %d, observed again for 3 hours: not found 2 hours on (%v)", i, hits)
		}
	}
	// Out of time order (streams lagging one another), the hours' lists
	// grow by a quarter at a time: at most a fifth of their room empty
	// (doubling left about half).
	y := NewIVF(32, IVFOptions{Seed: 1, TrainAt: 1000})
	y.SplitByTime()
	for j := range n {
		i := j * 7919 % n // every item once, hours visited in no order
		if err := y.Add(uint64(i), vecs[i], meta(i)); err != nil {
			t.Fatal(err)
		}
	}
	held, room := 0, 0
	for _, l := range y.sides[byTime].Load().lists.Load().lists {
		held += l.len()
		room += l.room()
	}
	if room*4 > held*5 {
		t.Errorf("hours' lists filled out of order: room for %d entries, hold %d", room, held)
	}
}

// TestSplitByTimeSizesANewHourFromTheLast: an hour's list starts with
// room for what the hour before it holds, so that a steady fleet's hours
// are not copied on their way up; an hour that ends well short of its
// room gives the rest back when the next begins.
func TestSplitByTimeSizesANewHourFromTheLast(t *testing.T) {
	const dim = 32
	vecs := clustered(41, 1000, dim, 8)
	x := NewIVF(dim, IVFOptions{Seed: 1, TrainAt: 100})
	x.SplitByTime()
	sd := x.sides[byTime].Load()
	id := 0
	add := func(hour int64, n int) {
		t.Helper()
		for range n {
			at := timeBase + hour*timeBucketNS + int64(id%60)*60e9
			if err := x.Add(uint64(id), vecs[id], Meta{Kind: KindEdge, Namespace: 1, Time: at, End: at + 60e9}); err != nil {
				t.Fatal(err)
			}
			id++
		}
	}
	hour := func(h int64) *sideList {
		t.Helper()
		al := sd.lists.Load()
		slot, ok := al.slot[uint32(timeBase/timeBucketNS+h)]
		if !ok {
			t.Fatalf("hour %d has no list", h)
		}
		return al.lists[slot]
	}
	add(0, 300)
	add(1, 1)
	if l := hour(1); l.room() != 300 {
		t.Fatalf("a new hour after one of 300 items has room for %d", l.room())
	}
	add(1, 99) // the hour ends at a third of its room
	add(2, 1)
	if l := hour(1); l.len() != 100 || l.room() != 100 {
		t.Fatalf("an hour of %d items kept room for %d once the next began", l.len(), l.room())
	}
	if l := hour(2); l.room() != 100 {
		t.Fatalf("the hour after one of 100 items has room for %d", l.room())
	}
	if got := x.Len(); got != id {
		t.Fatalf("index holds %d items, want %d", got, id)
	}
}
