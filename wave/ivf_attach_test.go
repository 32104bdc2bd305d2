package wave

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"
)

// AttachMetaAll leaves a loaded index as AttachMeta item by item does:
// the same presence, answers and snapshot, with Metas changed in place
// (a wider scope) and in written-once fields (re-appended), vectors not
// of unit length, one of the wrong length, and an id the index lacks.
func TestIVFAttachMetaAllAsOneByOne(t *testing.T) {
	vecs := clustered(34, 6000, 32, 12)
	x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 1500, Seed: 5})
	for i := 0; i < len(vecs); i += 11 {
		x.Remove(uint64(i))
	}
	one, all := reloaded(t, x), reloaded(t, x)
	var items []Attachment
	for i, v := range vecs {
		m := fixMeta(i)
		switch i % 5 {
		case 1:
			m.Time, m.End = int64(i)*3, 0
		case 2:
			m.Type++
		}
		if i%13 == 0 {
			v = slices.Clone(v)
			for j := range v {
				v[j] *= 3
			}
		}
		if i == 17 {
			v = v[:len(v)-1]
		}
		items = append(items, Attachment{ID: uint64(i), Vec: v, Meta: m})
	}
	items = append(items, Attachment{ID: 1 << 40, Vec: vecs[0], Meta: fixMeta(0)})
	found := make([]bool, len(items))
	all.AttachMetaAll(items, 3, found)
	present := 0
	for i, it := range items {
		if want := one.AttachMeta(it.ID, it.Vec, it.Meta); found[i] != want {
			t.Fatalf("item %d (id %d): found %v, AttachMeta says %v", i, it.ID, found[i], want)
		}
		if found[i] {
			present++
		}
	}
	if present != x.Len()-1 || one.Tombstones() == 0 || all.Tombstones() != one.Tombstones() {
		t.Fatalf("%d present of %d; tombstones %d, one by one %d", present, x.Len(), all.Tombstones(), one.Tombstones())
	}
	for _, f := range []*Filter{nil, {Types: []uint8{3}}, {From: 3000, To: 9000}} {
		for _, q := range vecs[:60] {
			if a, b := one.Search(q, 10, f), all.Search(q, 10, f); !slices.Equal(a, b) {
				t.Fatalf("filter %+v: AttachMetaAll's index answers %v, one by one %v", f, b, a)
			}
		}
	}
	if !bytes.Equal(snapshotOf(t, one), snapshotOf(t, all)) {
		t.Fatal("the snapshots differ")
	}
}

// TestIVFAttachMetaAllKeepsUnitVectors: an item marked Unit keeps the
// caller's vector, unchecked; one not marked and not of unit length is
// replaced by a normalised copy, as Add does.
func TestIVFAttachMetaAllKeepsUnitVectors(t *testing.T) {
	vecs := clustered(35, 2000, 16, 4)
	x, _ := buildIVF(t, vecs, IVFOptions{TrainAt: 500, Seed: 3})
	y := reloaded(t, x)
	scaled := func(v []float32) []float32 {
		c := slices.Clone(v)
		for j := range c {
			c[j] *= 2
		}
		return c
	}
	items := []Attachment{
		{ID: 1, Vec: slices.Clone(vecs[1]), Meta: fixMeta(1), Unit: true},
		{ID: 2, Vec: scaled(vecs[2]), Meta: fixMeta(2), Unit: true}, // the caller's word is taken
		{ID: 3, Vec: scaled(vecs[3]), Meta: fixMeta(3)},
	}
	found := make([]bool, len(items))
	y.AttachMetaAll(items, 2, found)
	st := y.st.Load()
	for i, it := range items {
		if !found[i] {
			t.Fatalf("item %d not found", i)
		}
		loc, _ := y.ids.get(it.ID)
		got := st.lists[loc.list].d.Load().vecs[loc.pos].Load()
		kept := got == &it.Vec[0]
		if kept != it.Unit {
			t.Errorf("item %d (Unit %v): the caller's vector kept %v", i, it.Unit, kept)
		}
		if !it.Unit && !IsUnit(unsafe.Slice(got, len(it.Vec))) {
			t.Errorf("item %d: the vector kept is not of unit length", i)
		}
	}
	if IsUnit(nil) || IsUnit([]float32{}) {
		t.Error("an empty vector counts as unit length")
	}
}
