package wave

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
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
	n     atomic.Int32 // published entries
	ids   []uint64
	metas []nodeMeta // time and end are read and written atomically
	// centre is the list's centroid (nil before training: zero). An
	// entry's code is of its vector's residual from it.
	centre []float32
	// The entries' 4-bit codes (quant4.go) of their residuals,
	// nibbleBytes(dim) bytes each, and their lo and step.
	lows  []float32
	steps []float32
	codes []byte
	// vecs references the caller's vectors (nil until attached after a
	// snapshot load); atomic.
	vecs []atomic.Pointer[float32]
	// blk summarises the entries' scopes by block and marks their
	// tombstones (see blockSum).
	blk []blockSum
}

// A search scans its lists one after another, and each list's first
// reads miss the caches: its listData, then its block summaries and the
// first entries of its arrays, those waiting on the first (the arrays'
// addresses are in the listData). A selective filter probes hundreds of
// short lists and rules out most of their blocks from the summaries, so
// those misses are much of what it waits for. While it scans a list,
// the search therefore hints the listData of the list 2·listsAhead
// further in its order (prefetchHeader) and the summaries and arrays of
// the one listsAhead further (prefetchEntries), whose header was hinted
// listsAhead scans ago; under a filter that rules out blocks, it reads
// the next list's summaries and hints the entries they let through
// (prefetchAdmitted). 0 hints nothing. It is a variable for
// BenchmarkIVFListsAhead, which compares distances in one process.
var listsAhead = 2

// entriesAhead is how far ahead of the entry it scores a list's scan
// hints an entry's code into the caches (0: none). A list's codes are
// read in order, but the hardware prefetcher does not follow a read
// into the next 4 KiB page, so without hints every 21 entries' codes
// (at 384 dimensions) begin with misses. It is a variable for
// BenchmarkIVFEntriesAhead.
var entriesAhead = 8

// listAheadBlocks bounds the block summaries prefetchEntries hints:
// those of a list's first 8·blockSize entries (the hardware prefetcher
// follows a sequential read from there).
const listAheadBlocks = 8

// prefetchHeader hints d's header (the listData itself) into the caches.
func (d *listData) prefetchHeader() {
	PrefetchRange(unsafe.Pointer(d), unsafe.Sizeof(*d))
}

// prefetchEntries hints the start of d's entries into the caches: the
// block summaries of its first listAheadBlocks blocks and, unless
// summariesOnly, the first line of its ids, metas, lows and steps and
// its first two codes (cb bytes each). A search whose filter rules out
// blocks by their summaries (a time window, an agent or a site) reads
// only some blocks' entries, often none of a list's, and hints the
// summaries only, with (firstBlock) its first block's codes and the
// first line of lows and steps when it may score them for its bound's
// reach.
func (d *listData) prefetchEntries(cb int, summariesOnly, firstBlock bool) {
	n := d.len()
	if n == 0 {
		return
	}
	nb := min((n+blockSize-1)>>blockShift, listAheadBlocks)
	PrefetchRange(unsafe.Pointer(&d.blk[0]), uintptr(nb)*unsafe.Sizeof(blockSum{}))
	if summariesOnly {
		if firstBlock {
			PrefetchRange(unsafe.Pointer(&d.codes[0]), uintptr(min(n, blockSize)*cb))
			prefetchLine(unsafe.Pointer(&d.lows[0]))
			prefetchLine(unsafe.Pointer(&d.steps[0]))
		}
		return
	}
	prefetchLine(unsafe.Pointer(&d.ids[0]))
	prefetchLine(unsafe.Pointer(&d.metas[0]))
	prefetchLine(unsafe.Pointer(&d.lows[0]))
	prefetchLine(unsafe.Pointer(&d.steps[0]))
	PrefetchRange(unsafe.Pointer(&d.codes[0]), uintptr(min(n, 2)*cb))
}

// prefetchAdmitted hints the metas of the entries of d that the block
// summaries let through mc (a filter that rules out blocks) and the code
// of each such block's first, the list's summaries being in cache
// (prefetchEntries): under a narrow time window a list's scan reads a
// block or two of metas and codes, misses it would otherwise wait for
// after the summaries. It appends each block's mc.visit mask to masks
// and returns them, for the scan of d to use instead of reading the
// summaries again.
func (d *listData) prefetchAdmitted(mc *metaCheck, cb int, masks []uint32) []uint32 {
	n := d.len()
	for b := 0; b < n; b += blockSize {
		visit := mc.visit(&d.blk[b>>blockShift])
		masks = append(masks, visit)
		mask := d.liveMask(b, n) & visit
		if mask == 0 {
			continue
		}
		first, last := b+bits.TrailingZeros32(mask), b+31-bits.LeadingZeros32(mask)
		PrefetchRange(unsafe.Pointer(&d.metas[first]), uintptr(last-first+1)*unsafe.Sizeof(nodeMeta{}))
		PrefetchRange(unsafe.Pointer(&d.codes[first*cb]), uintptr(cb))
	}
	return masks
}

// ivfEntry is one entry's content, as the writer copies it between lists.
type ivfEntry struct {
	id       uint64
	meta     nodeMeta
	lo, step float32
	code     []byte    // of vec's residual from centre
	centre   []float32 // the centroid of the list it was read from
	vec      *float32
}

func newListData(capacity, dim int) *listData {
	return &listData{
		ids:   make([]uint64, capacity),
		metas: make([]nodeMeta, capacity),
		lows:  make([]float32, capacity),
		steps: make([]float32, capacity),
		codes: make([]byte, capacity*nibbleBytes(dim)),
		vecs:  make([]atomic.Pointer[float32], capacity),
		blk:   newBlocks(capacity),
	}
}

// len is the number of published entries (live and dead).
func (d *listData) len() int { return int(d.n.Load()) }

// entry returns entry i's content (codes aliased).
func (d *listData) entry(i, dim int) ivfEntry {
	m := packMeta(d.metas[i].meta())
	cb := nibbleBytes(dim)
	return ivfEntry{id: d.ids[i], meta: m, lo: d.lows[i], step: d.steps[i], code: d.codes[i*cb : (i+1)*cb], centre: d.centre, vec: d.vecs[i].Load()}
}

// liveMask is the mask of the live entries, of the first n published,
// in the block that starts at entry b.
func (d *listData) liveMask(b, n int) uint32 {
	mask := blockAll &^ d.blk[b>>blockShift].dead.Load()
	if left := n - b; left < blockSize {
		mask &= 1<<left - 1
	}
	return mask
}

func (d *listData) isDead(i int) bool {
	return d.blk[i>>blockShift].dead.Load()>>(i&(blockSize-1))&1 != 0
}

// markDead makes entry i a tombstone (writer only).
func (d *listData) markDead(i int) { d.blk[i>>blockShift].dead.Or(1 << (i & (blockSize - 1))) }

// push appends e to list l (its code of the residual from l's centre),
// doubling its storage when full, and returns the entry's position.
// Only the writer calls it.
func (l *ivfList) push(e ivfEntry, dim int) int {
	d := l.d.Load()
	n := d.len()
	if n == len(d.ids) {
		d = l.grow(d, max(8, 2*n), dim, false)
	}
	d.set(n, e, nibbleBytes(dim))
	d.n.Store(int32(n + 1))
	return n
}

// set writes e (whose code is cb bytes) at position i, not yet
// published, and widens its block's summary.
func (d *listData) set(i int, e ivfEntry, cb int) {
	d.ids[i], d.metas[i], d.lows[i], d.steps[i] = e.id, e.meta, e.lo, e.step
	copy(d.codes[i*cb:(i+1)*cb], e.code)
	d.vecs[i].Store(e.vec)
	d.widenAt(i)
}

// bytes is the memory d holds for its capacity, without the float
// vectors it references.
func (d *listData) bytes(dim int) int {
	return cap(d.ids) * (8 + int(unsafe.Sizeof(nodeMeta{})) + 4 + 4 + 4 + 8 + nibbleBytes(dim))
}

// compact replaces l's entries by a copy without its tombstones, if it
// has any, calls moved with each entry's id and new position, and
// returns the number dropped. Only the writer calls it.
func (l *ivfList) compact(dim int, moved func(id uint64, pos int)) int {
	d := l.d.Load()
	dead := 0
	for i := range d.len() {
		if d.isDead(i) {
			dead++
		}
	}
	if dead == 0 {
		return 0
	}
	nd := l.grow(d, d.len()-dead, dim, true)
	for i := range nd.len() {
		moved(nd.ids[i], i)
	}
	return dead
}

// grow copies d's entries into a new listData of the given capacity
// (dropping tombstones when compact is set, which moves entries: the
// caller re-reads their positions), publishes it and returns it.
func (l *ivfList) grow(d *listData, capacity, dim int, compact bool) *listData {
	nd := copyListData(d, capacity, dim, compact)
	l.d.Store(nd)
	return nd
}

// copyListData returns a copy of d's entries in a new listData of the
// given capacity, without the tombstones when compact is set. Only the
// writer calls it.
func copyListData(d *listData, capacity, dim int, compact bool) *listData {
	if !compact {
		return cloneListData(d, capacity, dim)
	}
	nd := newListData(capacity, dim)
	nd.centre = d.centre
	cb := nibbleBytes(dim)
	j := 0
	for i := range d.len() {
		if compact && d.isDead(i) {
			continue
		}
		if d.isDead(i) {
			nd.markDead(j)
		}
		nd.set(j, d.entry(i, dim), cb)
		j++
	}
	nd.n.Store(int32(j))
	return nd
}

// cloneListData returns a copy of d, tombstones and block summaries
// included, in a new listData of the given capacity (at least d's
// length), array by array: the first push into each list a snapshot
// loaded exactly full copies it, and entry by entry (the block summaries
// widened again for each) those copies took 1.35 s of the 1M-edge start
// after a crash, whose fill adds back the vectors written since.
func cloneListData(d *listData, capacity, dim int) *listData {
	nd := newListData(capacity, dim)
	nd.centre = d.centre
	n := d.len()
	copy(nd.ids, d.ids[:n])
	copy(nd.metas, d.metas[:n]) // their mutable fields are written by the writer alone
	copy(nd.lows, d.lows[:n])
	copy(nd.steps, d.steps[:n])
	copy(nd.codes, d.codes[:n*nibbleBytes(dim)])
	for i := range n {
		nd.vecs[i].Store(d.vecs[i].Load())
	}
	for b := range (n + blockSize - 1) >> blockShift {
		nd.blk[b].copyFrom(&d.blk[b])
	}
	nd.n.Store(int32(n))
	return nd
}
