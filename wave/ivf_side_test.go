package wave

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// splitAgents are the agent keys of the split tests' fleet.
var splitAgents = func() (keys [20]uint32) {
	for i := range keys {
		keys[i] = AgentKey(fmt.Sprintf("robot-%02d", i))
	}
	return keys
}()

// splitMeta gives item i one of 20 agents, or (one item in ten) none,
// or (one in ten) a set of two; a confidence level and a time.
func splitMeta(i int) Meta {
	m := Meta{Kind: KindEdge, Namespace: 1, Type: uint8(i % 7), Time: int64(i), End: int64(i + 50),
		Confidence: uint8(1 + i*37%250), Agent: splitAgents[i%len(splitAgents)]}
	switch i % 10 {
	case 3:
		m.Agent = 0
	case 7:
		m.Agent = AgentSetKey(splitAgents[i%len(splitAgents)], splitAgents[(i+1)%len(splitAgents)])
	}
	return m
}

// splitFilters are the one-agent filters the split serves, broad and
// selective (a confidence floor, a time window: 0.5–2% of the items).
func splitFilters(n int) []*Filter {
	a, b := splitAgents[4], splitAgents[11]
	return []*Filter{
		{Agent: a},
		{Agent: b, MinConfidence: 200},
		{Agent: a, From: int64(n / 3), To: int64(n/3 + 400)},
		{Agent: b, Types: []uint8{2}, MinConfidence: 120},
	}
}

// splitIVF builds an IVF split by agent (before its first item) and a
// Flat over vecs with splitMeta.
func splitIVF(t testing.TB, vecs [][]float32) (*IVF, *Flat) {
	t.Helper()
	return buildIVFWith(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, splitMeta, (*IVF).SplitByAgent)
}

// TestSplitByAgentRecall: searches for one agent's items, served by the
// split (the same hits as searchAgent's), find what exact search finds,
// broad and selective filters alike, and break no filter.
func TestSplitByAgentRecall(t *testing.T) {
	const n = 12000
	all := clustered(21, n+100, 32, 40)
	vecs, qs := all[:n], all[n:]
	x, flat := splitIVF(t, vecs)
	if !x.SplitReady() {
		t.Fatal("split not ready with every item added after SplitByAgent")
	}
	sd := x.sides[byAgent].Load()
	if got := sd.ids.len() + sd.shared.Len(); got != n {
		t.Fatalf("split holds %d items, want %d", got, n)
	}
	if sh := sd.shared.Len(); sh < n/6 || sh > n/4 {
		t.Fatalf("catch-alls' index holds %d items, want the %d of no agent or several", sh, n/5)
	}
	for _, f := range splitFilters(n) {
		wantRecall(t, x, flat, qs, f)
		for _, q := range qs[:20] {
			hits := x.Search(q, 10, f)
			checkHits(t, hits, 10, f, func(id uint64) (Meta, bool) { return splitMeta(int(id)), id < n })
			var st SearchStats
			if via := x.searchAgent(sd, q, 10, f, &st); !slices.Equal(hits, via) {
				t.Fatalf("filter %+v: Search gave %v, the split %v", *f, hits, via)
			}
			// The agent's own list, then at least 8 of the catch-alls'.
			if st.Lists < 1+min(8, sd.shared.Lists()) || st.Lists > 1+sd.shared.Lists() || st.Scored == 0 {
				t.Fatalf("filter %+v: the split's search %+v; the catch-alls have %d lists", *f, st, sd.shared.Lists())
			}
		}
	}
}

// wantRecall logs the recall@10 of ix's searches for qs under f against
// exact search (truth), and fails t if it is under 0.95.
func wantRecall(t *testing.T, ix, truth Index, qs [][]float32, f *Filter) {
	t.Helper()
	r := recall(t, ix, truth, qs, 10, f)
	t.Logf("filter %+v: recall@10 %.4f", *f, r)
	if r < 0.95 {
		t.Errorf("filter %+v: recall@10 = %.4f, want >= 0.95", *f, r)
	}
}

// TestSplitByAgentFollowsChanges: an item whose agent changes, which is
// removed, added again or compacted, is found under the agents it has
// now and no other, through the split.
func TestSplitByAgentFollowsChanges(t *testing.T) {
	const n = 3000
	vecs := clustered(22, n, 32, 20)
	x, _ := splitIVF(t, vecs)
	const id = 40 // agent splitAgents[0]
	a, b := splitAgents[0], splitAgents[5]
	finds := func(agent uint32) bool {
		t.Helper()
		if !x.SplitReady() {
			t.Fatal("split not ready")
		}
		hits := x.Search(vecs[id], 1, &Filter{Agent: agent})
		return len(hits) == 1 && hits[0].ID == id
	}
	if !finds(a) || finds(b) {
		t.Fatalf("item of agent a: found under a %v, under b %v", finds(a), finds(b))
	}
	m := splitMeta(id)
	m.Agent = b
	x.SetMeta(id, m)
	if finds(a) || !finds(b) {
		t.Fatalf("moved to agent b: found under a %v, under b %v", finds(a), finds(b))
	}
	m.Agent = 0
	x.SetMeta(id, m)
	if !finds(a) || !finds(b) {
		t.Fatalf("of no agent: found under a %v, under b %v", finds(a), finds(b))
	}
	m.Agent = b
	m.Type = 99 // a field written once: the entry is re-appended
	x.SetMeta(id, m)
	if finds(a) || !finds(b) {
		t.Fatalf("back to agent b, new type: found under a %v, under b %v", finds(a), finds(b))
	}
	x.Remove(id)
	if finds(b) {
		t.Fatal("removed item found")
	}
	if err := x.Add(id, vecs[id], splitMeta(id)); err != nil {
		t.Fatal(err)
	}
	if !finds(a) || finds(b) {
		t.Fatalf("added again under a: found under a %v, under b %v", finds(a), finds(b))
	}
	x.Cleanup()
	if sd := x.sides[byAgent].Load(); sd.dead != 0 || sd.shared.Tombstones() != 0 {
		t.Fatalf("after Cleanup the split keeps %d + %d tombstones", sd.dead, sd.shared.Tombstones())
	}
	if !finds(a) || finds(b) {
		t.Fatalf("after Cleanup: found under a %v, under b %v", finds(a), finds(b))
	}
}

// TestSplitByAgentAfterSnapshot: an index loaded from a snapshot holds
// no vectors, so its split is not ready and searches use the lists;
// once the vectors are attached, the background pass fills the split
// (while inserts and a retraining move entries under it) and searches
// use it, finding what exact search finds.
func TestSplitByAgentAfterSnapshot(t *testing.T) {
	const n, more = 6000, 2500 // trained at 1,000: retrained at 8,000
	all := clustered(23, n+more+60, 32, 30)
	vecs, extra, qs := all[:n], all[n:n+more], all[n+more:]
	x, flat := splitIVF(t, vecs)
	y := reloaded(t, x)
	y.SplitByAgent()
	f := splitFilters(n)[1]
	if y.SplitReady() {
		t.Fatal("split ready before any vector was attached")
	}
	if r := recall(t, y, flat, qs, 10, f); r < 0.9 {
		t.Fatalf("recall@10 %.4f from the lists before the split is ready", r)
	}
	items := make([]Attachment, n)
	for i := range items {
		items[i] = Attachment{ID: uint64(i), Vec: vecs[i], Meta: splitMeta(i)}
	}
	found := make([]bool, n)
	y.AttachMetaAll(items[:n/2], 2, found[:n/2])
	for i := n / 2; i < n; i++ {
		y.Attach(uint64(i), vecs[i]) // one by one: the split takes them at once
	}
	for i, v := range extra {
		id := n + i
		if err := y.Add(uint64(id), v, splitMeta(id)); err != nil {
			t.Fatal(err)
		}
		if err := flat.Add(uint64(id), v, splitMeta(id)); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			y.Remove(uint64(i)) // tombstones, compacted while the pass may run
			flat.Remove(uint64(i))
			y.Cleanup()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !y.SplitReady() {
		if time.Now().After(deadline) {
			sd := y.sides[byAgent].Load()
			t.Fatalf("split holds %d + %d of %d items 30 s after the last attach", sd.ids.len(), sd.shared.Len(), y.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
	y.WaitRebuild()
	y.sides[byAgent].Load().shared.WaitRebuild()
	if y.Lists() == x.Lists() {
		t.Errorf("%d lists after %d inserts: not retrained", y.Lists(), n+more)
	}
	for _, f := range splitFilters(n) {
		if r := recall(t, y, flat, qs, 10, f); r < 0.95 {
			t.Errorf("filter %+v: recall@10 = %.4f through the filled split, want >= 0.95", *f, r)
		}
	}
}

// TestSplitByAgentConcurrent: searches through the split run beside a
// writer moving items between agents and removing and adding them (run
// with -race); every hit is an item.
func TestSplitByAgentConcurrent(t *testing.T) {
	const n = 3000
	vecs := clustered(24, n, 32, 20)
	x, _ := splitIVF(t, vecs)
	agent := splitAgents[3]
	searchWhileMoving(t, x, vecs, splitMeta, func(m Meta, i, round int) Meta {
		m.Agent = splitAgents[(i+round)%len(splitAgents)]
		return m
	}, func(int) *Filter { return &Filter{Agent: agent} })
}

// searchWhileMoving searches x (of len(vecs) items with Metas meta) for
// vecs[:300] under filter(i), beside a writer that changes the Metas of
// a fiftieth of the items each round (move), removes and adds one again
// and compacts every tenth round; every hit must be an item.
func searchWhileMoving(t *testing.T, x *IVF, vecs [][]float32, meta func(int) Meta, move func(m Meta, i, round int) Meta, filter func(i int) *Filter) {
	n := len(vecs)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for i := round % 50; i < n; i += 50 {
				x.SetMeta(uint64(i), move(meta(i), i, round))
			}
			x.Remove(uint64(round % n))
			_ = x.Add(uint64(round%n), vecs[round%n], meta(round%n))
			if round%10 == 0 {
				x.Cleanup()
			}
		}
	})
	for i := range 300 {
		for _, h := range x.Search(vecs[i], 10, filter(i)) {
			if h.ID >= uint64(n) {
				t.Errorf("hit %d is no item", h.ID)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestSplitByAgentOfAFilledIndex: splitting an index that holds its
// items already (the daemon's way) fills the split in the background,
// its agents' lists sized to what they hold, and serves searches then.
func TestSplitByAgentOfAFilledIndex(t *testing.T) {
	const n = 5000
	all := clustered(25, n+50, 32, 30)
	vecs, qs := all[:n], all[n:]
	x, flat := buildIVFMeta(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, splitMeta)
	x.SplitByAgent()
	waitReady(t, x.SplitReady, "the split of a filled index")
	sd := x.sides[byAgent].Load()
	for slot, l := range sd.lists.Load().lists {
		if l.room() != l.len() {
			t.Errorf("agent list %d: room for %d entries, holds %d", slot, l.room(), l.len())
		}
	}
	sd.shared.WaitRebuild()
	for _, f := range splitFilters(n) {
		if r := recall(t, x, flat, qs, 10, f); r < 0.95 {
			t.Errorf("filter %+v: recall@10 = %.4f, want >= 0.95", *f, r)
		}
	}
}

// TestSplitFillTrainsTheCatchAllsOnASample: a split filled from an index
// that holds its items already trains its catch-alls' index once, for
// all of them, on a sample from every list; added in the index's list
// order, they had trained it on the first lists' corner of the space.
// Searches through both splits keep their recall.
func TestSplitFillTrainsTheCatchAllsOnASample(t *testing.T) {
	const n = 24000
	all := clustered(27, n+100, 32, 60)
	vecs, qs := all[:n], all[n:]
	x, flat := buildIVFMeta(t, vecs, IVFOptions{Seed: 1, TrainAt: 1000}, splitMeta)
	x.SplitByAgent()
	x.SplitByTime()
	waitReady(t, x.SplitsReady, "the splits of a filled index")
	sd := x.sides[byAgent].Load()
	sd.shared.WaitRebuild()
	if got, want := sd.shared.trained, sd.shared.Len(); got != want {
		t.Errorf("the catch-alls' index trained at %d items, want once at the fill's %d", got, want)
	}
	for _, f := range splitFilters(n) {
		wantRecall(t, x, flat, qs, f)
	}
	for _, f := range []*Filter{{From: int64(n / 2), To: int64(n/2 + 300)}, {From: int64(n / 5), To: int64(n/5 + 600), MinConfidence: 100}} {
		wantRecall(t, x, flat, qs, f)
	}
}

// waitReady waits up to a minute for ready, failing t naming what.
func waitReady(t *testing.T, ready func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
