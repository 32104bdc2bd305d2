package wave

import "slices"

// idTable maps an IVF's live ids to their positions. The planner's ids
// are the store's sequence numbers, dense from 1, so an id below a few
// times the live count sits in a slice, found with one indexed load,
// and any other id in a map. At a million entries, a map's inserts and
// look-ups were 0.7 s of CPU in a reopen (a cache miss each), where the
// slice's are a sequential pass.
type idTable struct {
	dense  []ivfLoc // by id; list == absent where none
	sparse map[uint64]ivfLoc
	n      int // live ids
	// expect is how many ids the table is about to hold (a snapshot's
	// count): the slice covers them from the start, instead of growing
	// over ids that went to the map meanwhile.
	expect int
}

// get is id's position.
func (t *idTable) get(id uint64) (ivfLoc, bool) {
	if id < uint64(len(t.dense)) {
		l := t.dense[id]
		return l, l.list != absent
	}
	l, ok := t.sparse[id]
	return l, ok
}

// has reports whether id is live.
func (t *idTable) has(id uint64) bool {
	_, ok := t.get(id)
	return ok
}

// len is the number of live ids.
func (t *idTable) len() int { return t.n }

// denseLimit is the id below which the slice is grown to hold an id: it
// keeps the slice within a few entries per live id (8 bytes each, where
// a map's entry takes about 48).
func (t *idTable) denseLimit() uint64 { return 4*uint64(max(t.n, t.expect)) + 4096 }

// put sets id's position and reports whether id is new.
func (t *idTable) put(id uint64, loc ivfLoc) (added bool) {
	if id >= uint64(len(t.dense)) && id < t.denseLimit() {
		t.grow(id)
	}
	if id < uint64(len(t.dense)) {
		added = t.dense[id].list == absent
		t.dense[id] = loc
	} else {
		if t.sparse == nil {
			t.sparse = map[uint64]ivfLoc{}
		}
		n := len(t.sparse)
		t.sparse[id] = loc // one hash: a new id grows the map
		added = len(t.sparse) > n
	}
	if added {
		t.n++
	}
	return added
}

// grow extends the slice past id (at least doubling it, within
// denseLimit) and moves the map's ids it now covers into it.
func (t *idTable) grow(id uint64) {
	size := min(max(id+1, 2*uint64(len(t.dense)), 1024), t.denseLimit())
	old := len(t.dense)
	t.dense = slices.Grow(t.dense, int(size)-old)[:size]
	for i := old; i < len(t.dense); i++ {
		t.dense[i].list = absent
	}
	for k, l := range t.sparse {
		if k < size {
			t.dense[k] = l
			delete(t.sparse, k)
		}
	}
}

// remove deletes id and reports whether it was live.
func (t *idTable) remove(id uint64) bool {
	if id < uint64(len(t.dense)) {
		if t.dense[id].list == absent {
			return false
		}
		t.dense[id].list = absent
	} else {
		if _, ok := t.sparse[id]; !ok {
			return false
		}
		delete(t.sparse, id)
	}
	t.n--
	return true
}

// bytes is the memory the table holds, approximately.
func (t *idTable) bytes() int {
	const mapEntry = 48
	return cap(t.dense)*8 + len(t.sparse)*mapEntry
}
