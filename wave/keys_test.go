package wave

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"
)

// TestConfidenceLevelSound checks the rounding of confidence levels: a
// confidence that meets a minimum always keeps a level that meets the
// minimum's level, and one clearly below it (by more than two levels'
// width) never does.
func TestConfidenceLevelSound(t *testing.T) {
	var vals []float64
	for i := 0; i <= 1000; i++ {
		vals = append(vals, float64(i)/1000)
	}
	vals = append(vals, 0.65, 0.5, 1e-9, 1-1e-9, 0.1+0.2, -1, 2, math.NaN(), math.Inf(1))
	for _, c := range vals {
		for _, m := range vals {
			lc, lm := ConfidenceLevel(c), MinConfidenceLevel(m)
			if lc == 0 {
				t.Fatalf("ConfidenceLevel(%v) = 0, which means none", c)
			}
			if c >= m && lm != 0 && lc < lm {
				t.Fatalf("confidence %v meets minimum %v but level %d < %d", c, m, lc, lm)
			}
			if c >= 0 && m <= 1 && c+2.0/confLevels < m && lc >= lm {
				t.Fatalf("confidence %v is below minimum %v but level %d >= %d", c, m, lc, lm)
			}
		}
	}
	if MinConfidenceLevel(0) != 0 || MinConfidenceLevel(-1) != 0 || MinConfidenceLevel(math.NaN()) != 0 {
		t.Fatal("a minimum of 0 (or below, or NaN) must admit everything")
	}
}

// TestKeysReserved checks that names never take the reserved keys and
// site keys fit their 24 bits, and that a set of agents admits each of
// its agents and rejects most others.
func TestKeysReserved(t *testing.T) {
	if AgentKey("") != 0 || SiteKey("") != 0 {
		t.Fatal("the empty name must key to 0")
	}
	seen := map[uint32]string{}
	for i := range 20000 {
		s := fmt.Sprintf("robot-%d", i)
		a, st := AgentKey(s), SiteKey(s)
		if a == 0 || a&agentSetFlag != 0 {
			t.Fatalf("AgentKey(%q) = %#x, reserved", s, a)
		}
		if st == 0 || st > siteMask {
			t.Fatalf("SiteKey(%q) = %#x, outside 1..2^24-1", s, st)
		}
		if o, dup := seen[a]; dup && o != s {
			t.Logf("agent keys collide: %q and %q (allowed; Allow tells them apart)", o, s)
		}
		seen[a] = s
	}
	var members, all []uint32
	for i := range 8 {
		members = append(members, AgentKey(fmt.Sprintf("robot-%d", i)))
	}
	set := AgentSetKey(members...)
	for _, k := range members {
		if !AgentFilterAdmits(k, set) {
			t.Fatalf("the set of 8 rejects its member %#x", k)
		}
	}
	rejected := 0
	for i := 8; i < 1008; i++ {
		k := AgentKey(fmt.Sprintf("robot-%d", i))
		all = append(all, k)
		if !AgentFilterAdmits(k, set) {
			rejected++
		}
	}
	if rejected < 600 {
		t.Fatalf("a set of 8 agents rejects only %d of 1000 others", rejected)
	}
	if !AgentFilterAdmits(all[0], MultiAgent) || AgentFilterAdmits(all[0], members[0]) == (all[0] != members[0]) {
		t.Fatal("MultiAgent must admit every agent; another single key none")
	}
}

// keyedItem is a test item's exact attributes, as Allow would check them.
type keyedItem struct {
	agents []string
	site   string
	conf   float64 // < 0: none
}

func (it keyedItem) meta() Meta {
	m := Meta{Kind: KindEdge, Site: SiteKey(it.site)}
	switch len(it.agents) {
	case 0:
	case 1:
		m.Agent = AgentKey(it.agents[0])
	default:
		var keys []uint32
		for _, a := range it.agents {
			keys = append(keys, AgentKey(a))
		}
		m.Agent = AgentSetKey(keys...)
	}
	if it.conf >= 0 {
		m.Confidence = ConfidenceLevel(it.conf)
	}
	return m
}

// keyQuery is one constraint set: the exact rule and its key filter.
type keyQuery struct {
	agent, site string
	minConf     float64
}

func (q keyQuery) exact(it keyedItem) bool {
	if q.agent != "" && len(it.agents) > 0 && !slices.Contains(it.agents, q.agent) {
		return false
	}
	if q.site != "" && it.site != "" && it.site != q.site {
		return false
	}
	return it.conf < 0 || it.conf >= q.minConf
}

func (q keyQuery) filter(allow func(uint64) bool) *Filter {
	return &Filter{Agent: AgentKey(q.agent), Site: SiteKey(q.site), MinConfidence: MinConfidenceLevel(q.minConf), Allow: allow}
}

// keyedFixture gives items agents (none, one of eight, or two), sites
// (none or one of five) and confidences (none or in [0, 1]).
func keyedFixture(n int) []keyedItem {
	items := make([]keyedItem, n)
	for i := range items {
		it := &items[i]
		switch i % 10 {
		case 0:
		case 1:
			it.agents = []string{fmt.Sprintf("robot-%d", i%8), fmt.Sprintf("robot-%d", (i+3)%8)}
		default:
			it.agents = []string{fmt.Sprintf("robot-%d", i%8)}
		}
		if i%7 != 0 {
			it.site = fmt.Sprintf("site %d", i%5)
		}
		it.conf = -1
		if i%11 != 0 {
			it.conf = float64(i%101) / 100
		}
	}
	return items
}

var keyQueries = []keyQuery{
	{agent: "robot-3"}, {site: "site 2"}, {minConf: 0.65}, {minConf: 0.5, agent: "robot-5"},
	{agent: "robot-1", site: "site 4", minConf: 0.3}, {agent: "nobody"},
}

// TestKeyFilters searches Flat, HNSW and IVF under agent, site and
// confidence keys. With Allow applying the exact rule, every hit passes
// it and recall against brute force under that rule is ≥ 0.95 (Flat:
// identical); without Allow, the keys alone admit a superset of the
// exact rule's items and no item the keys rule out.
func TestKeyFilters(t *testing.T) {
	const n, dim = 4000, 16
	vecs := clustered(71, n, dim, 10)
	items := keyedFixture(n)
	all := map[uint64][]float32{}
	for i, v := range vecs {
		all[uint64(i)] = v
	}
	indexes := []Index{NewFlat(dim), NewHNSW(dim, HNSWOptions{Seed: 3}), NewIVF(dim, IVFOptions{TrainAt: 1000, Seed: 3})}
	for _, ix := range indexes {
		for i, v := range vecs {
			if err := ix.Add(uint64(i), v, items[i].meta()); err != nil {
				t.Fatal(err)
			}
		}
		if x, ok := ix.(*IVF); ok {
			x.WaitRebuild()
		}
	}
	queries := clustered(72, 40, dim, 10)
	for _, kq := range keyQueries {
		exact := func(id uint64) bool { return kq.exact(items[id]) }
		for _, ix := range indexes {
			found, want := 0, 0
			for _, q := range queries {
				truth := bruteTop(all, q, 10, exact)
				hits := ix.Search(q, 10, kq.filter(exact))
				for _, h := range hits {
					if !exact(h.ID) {
						t.Fatalf("%T %+v: hit %d breaks the exact rule (%+v)", ix, kq, h.ID, items[h.ID])
					}
				}
				if _, flat := ix.(*Flat); flat && !slices.Equal(ids(hits), ids(truth)) {
					t.Fatalf("Flat %+v: %v, want %v", kq, ids(hits), ids(truth))
				}
				found += overlap(hits, truth)
				want += len(truth)
				f := kq.filter(nil)
				for _, h := range ix.Search(q, 50, f) {
					if !f.admitsMeta(items[h.ID].meta()) {
						t.Fatalf("%T %+v: keys alone admitted %d (%+v)", ix, kq, h.ID, items[h.ID])
					}
				}
			}
			if r := float64(found) / float64(max(want, 1)); r < 0.95 {
				t.Fatalf("%T %+v: recall %.3f under the keys", ix, kq, r)
			}
		}
		// The keys never rule out an item the exact rule admits.
		f := kq.filter(nil)
		for i, it := range items {
			if kq.exact(it) && !f.admitsMeta(it.meta()) {
				t.Fatalf("%+v: keys rule out item %d (%+v), which the exact rule admits", kq, i, it)
			}
		}
	}
}

func ids(hs []Hit) []uint64 {
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func overlap(got, want []Hit) int {
	n := 0
	for _, h := range got {
		if slices.ContainsFunc(want, func(w Hit) bool { return w.ID == h.ID }) {
			n++
		}
	}
	return n
}

// TestSetMetaKeys changes an item's agent, site and confidence in place
// (Flat, HNSW, IVF): filters follow at once.
func TestSetMetaKeys(t *testing.T) {
	const dim = 16
	vecs := clustered(81, 2000, dim, 6)
	for _, ix := range []interface {
		Index
		MetaSetter
	}{NewFlat(dim), NewHNSW(dim, HNSWOptions{Seed: 1}), NewIVF(dim, IVFOptions{TrainAt: 500, Seed: 1})} {
		low := Meta{Kind: KindEdge, Agent: AgentKey("a"), Site: SiteKey("x"), Confidence: ConfidenceLevel(0.3)}
		for i, v := range vecs {
			if err := ix.Add(uint64(i), v, low); err != nil {
				t.Fatal(err)
			}
		}
		if x, ok := ix.(*IVF); ok {
			x.WaitRebuild()
		}
		f := &Filter{Agent: AgentKey("b"), Site: SiteKey("y"), MinConfidence: MinConfidenceLevel(0.5)}
		if hits := ix.Search(vecs[5], 5, f); len(hits) != 0 {
			t.Fatalf("%T: %d hits before any item matches", ix, len(hits))
		}
		for _, change := range []func(*Meta){
			func(m *Meta) { m.Agent = AgentKey("b") },
			func(m *Meta) { m.Site = SiteKey("y") },
			func(m *Meta) { m.Confidence = ConfidenceLevel(0.9) },
		} {
			m := low
			change(&m)
			ix.SetMeta(5, m)
			if hits := ix.Search(vecs[5], 5, f); len(hits) != 0 {
				t.Fatalf("%T: a partial change admitted %v", ix, hits)
			}
		}
		ix.SetMeta(5, Meta{Kind: KindEdge, Agent: AgentKey("b"), Site: SiteKey("y"), Confidence: ConfidenceLevel(0.9)})
		if hits := ix.Search(vecs[5], 5, f); len(hits) != 1 || hits[0].ID != 5 {
			t.Fatalf("%T: after SetMeta: %v, want item 5", ix, hits)
		}
		ix.SetMeta(5, Meta{Kind: KindEdge, Agent: MultiAgent})
		if hits := ix.Search(vecs[5], 5, f); len(hits) != 1 || hits[0].ID != 5 {
			t.Fatalf("%T: several agents and no site or confidence: %v, want item 5", ix, hits)
		}
	}
}

// TestSnapshotKeys round-trips the keys through IVF and HNSW snapshots,
// and reads the previous formats (IVF version 1, HNSW version 2), whose
// items load without keys and so pass every key filter.
func TestSnapshotKeys(t *testing.T) {
	const n, dim = 3000, 16
	vecs := clustered(91, n, dim, 8)
	items := keyedFixture(n)
	kq := keyQuery{agent: "robot-3", minConf: 0.5}
	f := kq.filter(nil)
	q := vecs[3]

	x, _ := buildIVFMeta(t, vecs, IVFOptions{TrainAt: 1000, Seed: 2}, func(i int) Meta { return items[i].meta() })
	h := NewHNSW(dim, HNSWOptions{Seed: 2})
	for i, v := range vecs {
		if err := h.Add(uint64(i), v, items[i].meta()); err != nil {
			t.Fatal(err)
		}
	}
	var xb, hb bytes.Buffer
	if _, err := x.WriteTo(&xb); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteTo(&hb); err != nil {
		t.Fatal(err)
	}
	x2, err := ReadIVF(bytes.NewReader(xb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		x2.Attach(uint64(i), v)
	}
	h2, err := ReadHNSW(bytes.NewReader(hb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		before, now Index
	}{{"IVF", x, x2}, {"HNSW", h, h2}} {
		want, got := c.before.Search(q, 10, f), c.now.Search(q, 10, f)
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("%s after a snapshot: %v, want %v", c.name, ids(got), ids(want))
		}
		for _, hit := range got {
			if !f.admitsMeta(items[hit.ID].meta()) {
				t.Fatalf("%s after a snapshot: %d breaks the keys", c.name, hit.ID)
			}
		}
	}

	var x2b bytes.Buffer
	if _, err := x.writeVersion(&x2b, 2); err != nil {
		t.Fatal(err)
	}
	old, err := ReadIVF(bytes.NewReader(toIVFVersion1(t, x2b.Bytes(), dim)))
	if err != nil {
		t.Fatal(err)
	}
	oldH, err := ReadHNSW(bytes.NewReader(toVersion2(t, hb.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	for name, ix := range map[string]Index{"IVF v1": old, "HNSW v2": oldH} {
		hits := ix.Search(q, 10, f)
		plain := ix.Search(q, 10, nil)
		if !slices.Equal(ids(hits), ids(plain)) {
			t.Fatalf("%s: keyless items must pass key filters: %v, unfiltered %v", name, ids(hits), ids(plain))
		}
	}
}

// toIVFVersion1 rewrites a version-2 IVF snapshot as version 1 (24-byte
// metas without the keys).
func toIVFVersion1(t *testing.T, cur []byte, dim int) []byte {
	t.Helper()
	const hdr = 8
	p := hdr + 5*4 + 3*8
	k1 := int(binary.LittleEndian.Uint32(cur[p:]))
	nlist := int(binary.LittleEndian.Uint32(cur[p+4:]))
	p += 8
	if k1 > 0 {
		p += (k1+1)*4 + k1*dim*4 + nlist*dim*4
	}
	out := append([]byte(nil), cur[:p]...)
	out[len(ivfMagic)] = 1
	for range nlist {
		c := int(binary.LittleEndian.Uint32(cur[p:]))
		out = append(out, cur[p:p+4+8*c]...)
		p += 4 + 8*c
		for i := range c {
			out = append(out, cur[p+metaSize*i:p+metaSize*i+metaSizeV1]...)
		}
		p += metaSize * c
		out = append(out, cur[p:p+4*c+dim*c]...)
		p += 4*c + dim*c
	}
	if p != len(cur)-4 {
		t.Fatalf("IVF snapshot layout: %d bytes parsed of %d", p, len(cur)-4)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out[hdr:], castagnoli))
}

// TestBlockAgentSummary checks that a block's entries are passed over
// for an agent only when they cannot be that agent's: entries of other
// agents only are skipped, an entry without an agent or of several
// agents is visited (alone), and SetMeta to the agent keeps the block.
func TestBlockAgentSummary(t *testing.T) {
	const dim = 8
	vecs := clustered(5, 64, dim, 2)
	a, b := AgentKey("robot-a"), AgentKey("robot-b")
	if agentBit(a) == agentBit(b) {
		t.Fatal("the two test agents share a Bloom bit: pick other names")
	}
	x := NewIVF(dim, IVFOptions{TrainAt: 1 << 20})
	for i, v := range vecs[:16] {
		if err := x.Add(uint64(i), v, Meta{Kind: KindEdge, Agent: a}); err != nil {
			t.Fatal(err)
		}
	}
	d := x.st.Load().lists[0].d.Load()
	forB, forA := compileMeta(&Filter{Agent: b}), compileMeta(&Filter{Agent: a})
	if forB.visit(&d.blk[0]) != 0 || forA.visit(&d.blk[0]) != blockAll {
		t.Fatal("a block of robot-a's entries: must be skipped for robot-b only")
	}
	if hits := x.Search(vecs[0], 5, &Filter{Agent: b}); len(hits) != 0 {
		t.Fatalf("robot-b found %v", hits)
	}
	x.SetMeta(3, Meta{Kind: KindEdge, Agent: b})
	if forB.visit(&d.blk[0]) != blockAll {
		t.Fatal("after SetMeta to robot-b the block is still skipped")
	}
	if hits := x.Search(vecs[3], 5, &Filter{Agent: b}); len(hits) != 1 || hits[0].ID != 3 {
		t.Fatalf("robot-b after SetMeta: %v", hits)
	}
	for i, m := range []Meta{{Kind: KindEdge}, {Kind: KindEdge, Agent: MultiAgent}} {
		y := NewIVF(dim, IVFOptions{TrainAt: 1 << 20})
		for j, v := range vecs[16:32] {
			mm := Meta{Kind: KindEdge, Agent: a}
			if j == 7 {
				mm = m
			}
			if err := y.Add(uint64(j), v, mm); err != nil {
				t.Fatal(err)
			}
		}
		if got := forB.visit(&y.st.Load().lists[0].d.Load().blk[0]); got != 1<<7 {
			t.Fatalf("case %d: a block holding one entry every agent filter admits: visits %016b, want that entry alone", i, got)
		}
		if hits := y.Search(vecs[16+7], 1, &Filter{Agent: b}); len(hits) != 1 || hits[0].ID != 7 {
			t.Fatalf("case %d: robot-b's search: %v, want entry 7", i, hits)
		}
	}
}
