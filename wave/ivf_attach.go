package wave

import (
	"math"
	"sync"
)

// Attachment is one item of [IVF.AttachMetaAll]: an id, its float vector
// and its Meta.
type Attachment struct {
	ID   uint64
	Vec  []float32
	Meta Meta
	// Unit says Vec has unit length ([IsUnit]) already: it is kept
	// without checking. Otherwise a vector that is not is replaced by a
	// normalised copy, as Add does.
	Unit bool
}

// absent marks an item AttachMetaAll did not find.
const absent = math.MaxUint32

// AttachMetaAll is [IVF.AttachMeta] for every item, on up to workers
// goroutines, and sets found[i] to whether items[i] was present (found
// must be as long as items). A reopen fills the index loaded from its
// snapshot this way, a million items at a time: under one lock, the ids
// looked up side by side, and then each worker attaching the items of
// whole lists, so that no two write one list's entries or block
// summaries. An item whose written-once Meta fields changed is
// re-appended afterwards, on the caller's goroutine, as AttachMeta does.
// The items' ids must be distinct, as a fill's are.
func (x *IVF) AttachMetaAll(items []Attachment, workers int, found []bool) {
	if len(found) != len(items) {
		panic("wave: AttachMetaAll: found and items differ in length")
	}
	workers = max(1, min(workers, len(items)/1024+1))
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.st.Load()

	locs := make([]ivfLoc, len(items))
	split(len(items), workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			loc, ok := x.ids.get(items[i].ID)
			if !ok || len(items[i].Vec) != x.dim {
				loc.list = absent
			}
			locs[i] = loc
		}
	})

	// The items by list (a counting sort), the lists cut into runs of
	// about equal numbers of items, one run per worker.
	at := make([]int, len(st.lists)+1)
	for i, l := range locs {
		found[i] = l.list != absent
		if found[i] {
			at[l.list+1]++
		}
	}
	for l := range st.lists {
		at[l+1] += at[l]
	}
	total := at[len(st.lists)]
	order := make([]int32, total)
	next := append([]int(nil), at[:len(st.lists)]...)
	for i, l := range locs {
		if l.list != absent {
			order[next[l.list]] = int32(i)
			next[l.list]++
		}
	}
	again := make([][]int32, workers)
	var wg sync.WaitGroup
	list := 0
	for w := range workers {
		first := list
		for list < len(st.lists) && (w == workers-1 || at[list] < total*(w+1)/workers) {
			list++
		}
		run := order[at[first]:at[list]]
		wg.Go(func() {
			for _, i := range run {
				it, loc := &items[i], locs[i]
				d := st.lists[loc.list].d.Load()
				vec := it.Vec
				if !it.Unit {
					vec = unit(vec)
				}
				d.vecs[loc.pos].Store(&vec[0])
				nm := &d.metas[loc.pos]
				if nm.fixedDiffer(it.Meta) {
					again[w] = append(again[w], i)
					continue
				}
				nm.setMutable(it.Meta)
				d.widenAt(int(loc.pos))
			}
		})
	}
	wg.Wait()
	for _, is := range again {
		for _, i := range is {
			x.setMetaAt(items[i].ID, locs[i], items[i].Meta)
		}
	}
	x.sidesDo(x.fillSideLocked)
	if x.rebuild != nil {
		for i, it := range items {
			if found[i] {
				x.touch(it.ID)
			}
		}
	}
}

// split calls fn on workers ranges covering [0, n), side by side.
func split(n, workers int, fn func(lo, hi int)) {
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}
