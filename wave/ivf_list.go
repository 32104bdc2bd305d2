package wave

import (
	"sync/atomic"
)

// ivfList is one inverted list. Its entries live in a listData that only
// the writer changes: it appends past the published length and then
// publishes the new length, so a search reading entries [0, n) never
// sees a half-written one. A full listData is replaced by a larger copy
// (searches holding the old one finish on it); compaction replaces it by
// a copy without the tombstones.
type ivfList struct {
	d atomic.Pointer[listData]
}

// listData holds a list's entries contiguously, by position.
type listData struct {
	n      atomic.Int32 // published entries
	ids    []uint64
	metas  []nodeMeta // time and end are read and written atomically
	dead   []uint32   // 1 = tombstone; atomic
	scales []float32
	codes  []int8 // dim per entry
	// vecs references the caller's vectors (nil until attached after a
	// snapshot load); atomic.
	vecs []atomic.Pointer[float32]
	// blk summarises the entries' scopes by block (see blockSum).
	blk []blockSum
}

// ivfEntry is one entry's content, as the writer copies it between lists.
type ivfEntry struct {
	id    uint64
	meta  nodeMeta
	scale float32
	code  []int8
	vec   *float32
}

func newListData(capacity, dim int) *listData {
	return &listData{
		ids:    make([]uint64, capacity),
		metas:  make([]nodeMeta, capacity),
		dead:   make([]uint32, capacity),
		scales: make([]float32, capacity),
		codes:  make([]int8, capacity*dim),
		vecs:   make([]atomic.Pointer[float32], capacity),
		blk:    newBlocks(capacity),
	}
}

// len is the number of published entries (live and dead).
func (d *listData) len() int { return int(d.n.Load()) }

// entry returns entry i's content (codes aliased).
func (d *listData) entry(i, dim int) ivfEntry {
	m := packMeta(d.metas[i].meta())
	return ivfEntry{id: d.ids[i], meta: m, scale: d.scales[i], code: d.codes[i*dim : (i+1)*dim], vec: d.vecs[i].Load()}
}

func (d *listData) isDead(i int) bool { return atomic.LoadUint32(&d.dead[i]) != 0 }

// push appends e to list l, growing its storage when full, and returns
// the entry's position. Only the writer calls it.
func (l *ivfList) push(e ivfEntry, dim int) int {
	d := l.d.Load()
	n := d.len()
	if n == len(d.ids) {
		d = l.grow(d, max(8, 2*n), dim, false)
	}
	d.ids[n] = e.id
	d.metas[n] = e.meta
	d.scales[n] = e.scale
	copy(d.codes[n*dim:(n+1)*dim], e.code)
	d.vecs[n].Store(e.vec)
	d.widenAt(n)
	d.n.Store(int32(n + 1))
	return n
}

// grow copies d's entries into a new listData of the given capacity
// (dropping tombstones when compact is set, which moves entries: the
// caller re-reads their positions), publishes it and returns it.
func (l *ivfList) grow(d *listData, capacity, dim int, compact bool) *listData {
	nd := newListData(capacity, dim)
	j := 0
	for i := range d.len() {
		if compact && d.isDead(i) {
			continue
		}
		e := d.entry(i, dim)
		nd.ids[j], nd.metas[j], nd.scales[j] = e.id, e.meta, e.scale
		copy(nd.codes[j*dim:(j+1)*dim], e.code)
		nd.vecs[j].Store(e.vec)
		if d.isDead(i) {
			nd.dead[j] = 1
		}
		nd.widenAt(j)
		j++
	}
	nd.n.Store(int32(j))
	l.d.Store(nd)
	return nd
}
