package wave

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// TestFilterTimeOverlap checks the window semantics against
// particle.TimeRange.Overlaps: a scope is dropped only when it starts
// after To or ends before From; zero bounds are open on both sides.
func TestFilterTimeOverlap(t *testing.T) {
	cases := []struct {
		from, to, start, end int64
		want                 bool
	}{
		{0, 0, 5, 9, true},
		{10, 20, 5, 9, false},   // ends before the window
		{10, 20, 21, 30, false}, // starts after it
		{10, 20, 5, 10, true},   // touches From
		{10, 20, 20, 30, true},  // touches To
		{10, 20, 5, 30, true},   // spans it
		{10, 20, 12, 15, true},  // inside
		{10, 20, 0, 5, false},   // open start, ended before
		{10, 20, 25, 0, false},  // open end, starts after
		{10, 20, 0, 0, true},    // no scope: always
		{10, 20, 5, 0, true},    // still open
		{0, 20, 1, 2, true},     // open From
		{10, 0, 1, 2, false},    // open To
		{10, 0, 1, 0, true},
	}
	for _, c := range cases {
		f := &Filter{From: c.from, To: c.to}
		if got := f.Admits(1, Meta{Time: c.start, End: c.end}); got != c.want {
			t.Errorf("window [%d,%d] scope [%d,%d]: admitted %v, want %v", c.from, c.to, c.start, c.end, got, c.want)
		}
	}
}

// TestSetMeta moves items in and out of a time window and across types
// without touching their vectors, in Flat and HNSW alike.
func TestSetMeta(t *testing.T) {
	vecs := clustered(3, 300, 16, 4)
	for _, ix := range []interface {
		Index
		MetaSetter
	}{NewFlat(16), NewHNSW(16, HNSWOptions{Seed: 1})} {
		for i, v := range vecs {
			if err := ix.Add(uint64(i), v, Meta{Kind: KindEdge, Type: 1, Time: 100, End: 200}); err != nil {
				t.Fatal(err)
			}
		}
		late := &Filter{From: 500}
		if hits := ix.Search(vecs[7], 5, late); len(hits) != 0 {
			t.Fatalf("%T: %d hits before any scope reaches 500", ix, len(hits))
		}
		if !ix.SetMeta(7, Meta{Kind: KindEdge, Type: 1, Time: 100, End: 600}) {
			t.Fatalf("%T: SetMeta(7) reports absent", ix)
		}
		if hits := ix.Search(vecs[7], 5, late); len(hits) != 1 || hits[0].ID != 7 {
			t.Fatalf("%T: after widening 7: %v", ix, hits)
		}
		if !ix.SetMeta(7, Meta{Kind: KindEdge, Type: 9, Time: 100, End: 600}) {
			t.Fatalf("%T: SetMeta(7) to type 9 reports absent", ix)
		}
		if hits := ix.Search(vecs[7], 5, &Filter{Types: []uint8{9}}); len(hits) != 1 || hits[0].ID != 7 || hits[0].Score < 0.999 {
			t.Fatalf("%T: type 9 after SetMeta: %v", ix, hits)
		}
		if ix.Len() != len(vecs) {
			t.Fatalf("%T: Len %d after SetMeta, want %d", ix, ix.Len(), len(vecs))
		}
		if ix.SetMeta(9999, Meta{}) {
			t.Fatalf("%T: SetMeta of an absent id reports present", ix)
		}
	}
}

// TestReadHNSWVersion1 loads a version-1 snapshot (metas without end):
// each item's time becomes the point scope [time, time].
func TestReadHNSWVersion1(t *testing.T) {
	vecs := clustered(5, 50, 8, 2)
	h := NewHNSW(8, HNSWOptions{M: 4, EfConstruction: 16, Seed: 1})
	for i, v := range vecs {
		if err := h.Add(uint64(i), v, Meta{Kind: KindEdge, Type: uint8(i), Time: int64(i*10 + 10), End: int64(i*10 + 10)}); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := h.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	old := toVersion1(t, b.Bytes())
	g, err := ReadHNSW(bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	f := &Filter{From: 105, To: 135} // items 10, 11, 12
	got := g.Search(vecs[11], 10, f)
	if len(got) != 3 {
		t.Fatalf("window over a v1 snapshot: %v, want items 10-12", got)
	}
	for _, hit := range got {
		if hit.ID < 10 || hit.ID > 12 {
			t.Fatalf("window over a v1 snapshot returned %d", hit.ID)
		}
	}
}

// toVersion1 rewrites a current HNSW snapshot as version 1.
func toVersion1(t *testing.T, cur []byte) []byte {
	return rewriteHNSWMetas(t, cur, 1, func(m []byte) []byte { return append(m[:8:8], m[16:metaSizeV1]...) })
}

// toVersion2 rewrites a current HNSW snapshot as version 2 (metas
// without the agent and place keys).
func toVersion2(t *testing.T, cur []byte) []byte {
	return rewriteHNSWMetas(t, cur, 2, func(m []byte) []byte { return m[:metaSizeV1] })
}

// rewriteHNSWMetas rewrites a current HNSW snapshot as an older version
// whose metas are old(current meta).
func rewriteHNSWMetas(t *testing.T, cur []byte, version byte, old func([]byte) []byte) []byte {
	t.Helper()
	const hdr, fixed = 8, 24 + 4 + 8
	n := int(binary.LittleEndian.Uint32(cur[hdr+24:]))
	metas := hdr + fixed + n + n + 8*n
	out := append([]byte(nil), cur[:metas]...)
	out[len(snapMagic)] = version
	for s := range n {
		m := cur[metas+metaSize*s : metas+metaSize*(s+1)]
		out = append(out, old(slices.Clone(m))...)
	}
	out = append(out, cur[metas+metaSize*n:len(cur)-4]...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out[hdr:], castagnoli))
}

// TestMetaCheckMatchesFilter compares the IVF's compiled Meta check with
// Filter.admitsMeta over a grid of filters and metas.
func TestMetaCheckMatchesFilter(t *testing.T) {
	filters := []*Filter{
		{}, {Namespace: 2}, {Kinds: []Kind{KindEdge}}, {Kinds: []Kind{KindNode, KindEpisode, 200}},
		{Types: []uint8{0, 63, 64, 255}}, {From: 10, To: 20}, {From: 10}, {To: 20},
		{Namespace: 1, Kinds: []Kind{KindEdge}, Types: []uint8{7}, From: 5, To: 15},
		{Agent: 7}, {Agent: MultiAgent}, {Site: 3}, {MinConfidence: 128}, {MinConfidence: 255},
		{Agent: 7, Site: 3, MinConfidence: 1, From: 10},
	}
	var metas []Meta
	for _, ns := range []uint32{0, 1, 2} {
		for _, k := range []Kind{0, KindNode, KindEdge, KindEpisode, 200} {
			for _, ty := range []uint8{0, 7, 63, 64, 255} {
				for _, tr := range [][2]int64{{0, 0}, {5, 9}, {5, 10}, {12, 14}, {20, 30}, {21, 0}, {0, 9}, {0, 10}} {
					metas = append(metas, Meta{Namespace: ns, Kind: k, Type: ty, Time: tr[0], End: tr[1]})
				}
			}
		}
	}
	for _, agent := range []uint32{0, 7, 8, MultiAgent, AgentSetKey(7, 9), AgentSetKey(8, 40)} {
		for _, site := range []uint32{0, 3, 4, siteMask} {
			for _, conf := range []uint8{0, 1, 127, 128, 255} {
				metas = append(metas, Meta{Kind: KindEdge, Agent: agent, Site: site, Confidence: conf, Time: 12, End: 14})
			}
		}
	}
	for _, f := range filters {
		c := compileMeta(f)
		for _, m := range metas {
			nm := packMeta(m)
			if got, want := c.admits(&nm), f.admitsMeta(m); got != want {
				t.Fatalf("filter %+v, meta %+v: compiled check %v, Filter %v", f, m, got, want)
			}
		}
	}
}
