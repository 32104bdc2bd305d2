package wave

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestBlockVisitKeepsEveryAdmitted checks the block summaries'
// promise: under any filter, every entry its Meta fields admit is among
// those visit leaves to be read, whatever mix of timed and timeless,
// single-agent, agentless and multi-agent, sited and siteless entries a
// block holds, after in-place scope changes, a compaction and a snapshot
// round trip. It also checks that the summaries pass over what they
// can: a block of other agents' timed edges at another site with one
// timeless, agentless, siteless node is read at that node alone.
func TestBlockVisitKeepsEveryAdmitted(t *testing.T) {
	const n, dim = 3000, 8
	r := rand.New(rand.NewPCG(21, 22))
	vecs := clustered(23, n, dim, 6)
	agents := []uint32{AgentKey("robot-0"), AgentKey("robot-1"), AgentKey("robot-2"), AgentKey("robot-3")}
	sites := []uint32{0, SiteKey("lab-a"), SiteKey("lab-b"), SiteKey("dock")}
	randMeta := func(i int) Meta {
		m := Meta{Kind: KindEdge, Confidence: uint8(r.IntN(3)) * 100, Site: sites[r.IntN(len(sites))]}
		switch r.IntN(10) {
		case 0:
			m.Kind = KindNode // timeless, agentless
			return m
		case 1:
			m.Agent = MultiAgent
		case 2:
			m.Agent = AgentSetKey(agents[0], agents[2])
		case 3: // no agent
		default:
			m.Agent = agents[r.IntN(len(agents))]
		}
		switch r.IntN(8) {
		case 0: // no scope
		case 1:
			m.Time = int64(1000 + i) // open end
		default:
			m.Time, m.End = int64(1000+i), int64(1000+i+r.IntN(50))
		}
		return m
	}
	x := NewIVF(dim, IVFOptions{TrainAt: 500, Seed: 3})
	for i, v := range vecs {
		if err := x.Add(uint64(i), v, randMeta(i)); err != nil {
			t.Fatal(err)
		}
	}
	filters := []*Filter{
		{Agent: agents[1]}, {Agent: agents[2]}, {From: 2000, To: 2100}, {To: 1200},
		{From: 3500}, {From: 2000, To: 2050, Agent: agents[0]}, {From: 1, To: 2},
		{From: 2500, To: 2600, Kinds: []Kind{KindEdge}}, {Agent: agents[3], MinConfidence: 200},
		{Agent: AgentSetKey(agents[1], agents[3])},
		{Site: sites[1]}, {Site: sites[3], From: 2000, To: 2300}, {Site: sites[2], Agent: agents[1]},
		{Site: SiteKey("nowhere")},
	}
	check := func(stage string, x *IVF) {
		t.Helper()
		st := x.st.Load()
		visited, entries := 0, 0
		for _, f := range filters {
			mc := compileMeta(f)
			for li := range st.lists {
				d := st.lists[li].d.Load()
				for i := range d.len() {
					mask := uint32(blockAll)
					if mc.blockwise() {
						mask = mc.visit(&d.blk[i>>blockShift])
					}
					in := mask&(1<<(i&(blockSize-1))) != 0
					entries++
					if in {
						visited++
					}
					if !in && mc.admits(&d.metas[i]) {
						t.Fatalf("%s: filter %+v: list %d entry %d (meta %+v) is admitted but its block passes over it",
							stage, f, li, i, d.metas[i].meta())
					}
				}
			}
		}
		if visited > entries*3/4 {
			t.Errorf("%s: the summaries leave %d of %d entries to read: they rule out too little", stage, visited, entries)
		}
	}
	check("built", x)
	for range 300 {
		id := uint64(r.IntN(n))
		m := randMeta(int(id))
		m.Kind = KindEdge
		x.SetMeta(id, m)
	}
	check("after SetMeta", x)
	for id := range uint64(n / 3) {
		x.Remove(id * 3)
	}
	x.Cleanup()
	check("after Cleanup", x)
	check("reloaded", reloaded(t, x))

	// A block of other agents' timed edges at another site and one node.
	y := NewIVF(dim, IVFOptions{TrainAt: 1 << 20})
	for j, v := range vecs[:blockSize] {
		m := Meta{Kind: KindEdge, Agent: agents[0], Site: sites[1], Time: int64(100 + j), End: int64(101 + j)}
		if j == 5 {
			m = Meta{Kind: KindNode}
		}
		if err := y.Add(uint64(j), v, m); err != nil {
			t.Fatal(err)
		}
	}
	b := &y.st.Load().lists[0].d.Load().blk[0]
	for _, f := range []*Filter{{Agent: agents[1]}, {From: 500}, {From: 500, Agent: agents[1]}, {Site: sites[2]}} {
		mc := compileMeta(f)
		if got := mc.visit(b); got != 1<<5 {
			t.Errorf("filter %+v visits %s, want the node alone", f, fmt.Sprintf("%016b", got))
		}
	}
	edgesLate, own := compileMeta(&Filter{From: 500, Kinds: []Kind{KindEdge}}), compileMeta(&Filter{Agent: agents[0], Site: sites[1], From: 100})
	if got := edgesLate.visit(b); got != 0 {
		t.Errorf("an edges-only window past every edge visits %016b, want none", got)
	}
	if got := own.visit(b); got != blockAll {
		t.Errorf("the block's own agent and window visit %016b, want all", got)
	}
}
