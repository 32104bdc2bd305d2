package wave

import (
	"slices"
	"sync/atomic"
)

// sideList is a key's list in a split (ivf_side.go). An inverted list
// keeps its entries in one listData that a larger copy replaces when it
// is full; a key's list instead keeps them in segments that never move
// once written. A key's list takes its items over its whole life (an
// agent's for as long as the agent runs, an hour's out of order while
// robots' streams lag one another), so grown by copies a quarter larger
// each time it filled, each entry was copied about four times on its
// way up: on the medium bench that was the largest single allocation of
// an ingest (568 of 5,960 MB) and a second of the indexer's CPU.
//
// Every segment but the last is full, so an entry's position in the
// list is its segment's start plus its place in the segment, and stays
// so until a compaction. A segment is sized a quarter of the list so
// far (segmentAfter), so at most a fifth of a list's room is empty.
// Searches read the segments as lists of their own (appendTo); only the
// writer, under the IVF's mu, changes a list.
type sideList struct {
	segs atomic.Pointer[sideSegs]
	// want is the room the list is to have when its next segment is
	// made (newSideList, reserve), 0 for none.
	want int
}

// sideSegs is a sideList's segments, replaced whole (copy on write)
// when one is added or replaced.
type sideSegs struct {
	d []*listData
	// start is the list position of each segment's first entry.
	start []int
}

// minSegment and maxSegment bound a segment's room, in entries: a key
// with few items (an hour of a small fleet) holds little room empty,
// and the room a list holds empty is at most maxSegment's (about a
// megabyte at 384 dimensions).
const (
	minSegment = 4
	maxSegment = 4096
)

// segmentAfter is the room of the segment that follows segments of
// room total in all: a quarter of it, within [minSegment, maxSegment],
// in whole blocks once a block or more.
func segmentAfter(total int) int {
	n := min(max(total/4, minSegment), maxSegment)
	if n >= blockSize {
		n = (n + blockSize - 1) &^ (blockSize - 1)
	}
	return n
}

// newSideList returns an empty list whose first segment will have room
// for want entries (minSegment when want is 0).
func newSideList(want int) *sideList {
	l := &sideList{want: want}
	l.segs.Store(&sideSegs{})
	return l
}

// len is the number of entries the list has published (live and dead).
func (l *sideList) len() int { return l.segs.Load().len() }

// room is the number of entries the list's segments have room for.
func (l *sideList) room() int { return l.segs.Load().room() }

// len is the number of entries s's segments have published.
func (s *sideSegs) len() int {
	k := len(s.d) - 1
	if k < 0 {
		return 0
	}
	return s.start[k] + s.d[k].len()
}

// room is the number of entries s's segments have room for.
func (s *sideSegs) room() int {
	k := len(s.d) - 1
	if k < 0 {
		return 0
	}
	return s.start[k] + len(s.d[k].ids)
}

// push appends e (whose code is of dim dimensions) and returns its
// position.
func (l *sideList) push(e ivfEntry, dim int) int {
	s := l.segs.Load()
	k := len(s.d) - 1
	if k < 0 || s.d[k].len() == len(s.d[k].ids) {
		s = l.addSegment(s, dim)
		k = len(s.d) - 1
	}
	d := s.d[k]
	n := d.len()
	d.set(n, e, nibbleBytes(dim))
	d.n.Store(int32(n + 1))
	return s.start[k] + n
}

// addSegment publishes s with an empty segment added and returns it.
func (l *sideList) addSegment(s *sideSegs, dim int) *sideSegs {
	total := s.room()
	room := segmentAfter(total)
	if l.want > total {
		room = l.want - total
	}
	l.want = 0
	ns := &sideSegs{d: append(s.d[:len(s.d):len(s.d)], newListData(room, dim)), start: append(s.start[:len(s.start):len(s.start)], total)}
	l.segs.Store(ns)
	return ns
}

// reserve gives the list room for want entries in all by the time its
// next segment is made.
func (l *sideList) reserve(want int) {
	if want > l.room() {
		l.want = want
	}
}

// at returns the segment holding position pos and pos's place in it.
func (l *sideList) at(pos int) (*listData, int) {
	s := l.segs.Load()
	k, found := slices.BinarySearch(s.start, pos)
	if !found {
		k--
	}
	return s.d[k], pos - s.start[k]
}

// appendTo appends the list's segments holding entries to pre, for a
// search to scan.
func (l *sideList) appendTo(pre []*listData) []*listData {
	for _, d := range l.segs.Load().d {
		if d.len() > 0 {
			pre = append(pre, d)
		}
	}
	return pre
}

// trim gives back the room to grow into of the list's last segment
// when more than an eighth of the list is empty (a copy of that segment
// only).
func (l *sideList) trim(dim int) {
	s := l.segs.Load()
	k, n := len(s.d)-1, s.len()
	if k < 0 || s.room() <= n+n/8 {
		return
	}
	ns := &sideSegs{d: slices.Clone(s.d), start: s.start}
	if d := s.d[k]; d.len() > 0 {
		ns.d[k] = copyListData(d, d.len(), dim, false)
	} else { // no segment without room: positions would be ambiguous
		ns.d, ns.start = ns.d[:k], ns.start[:k]
	}
	l.segs.Store(ns)
}

// compact replaces the list's segments by one without the tombstones,
// if they hold any, calls moved with each entry's id and new position,
// and returns the number dropped.
func (l *sideList) compact(dim int, moved func(id uint64, pos int)) int {
	s := l.segs.Load()
	dead, live := 0, 0
	for _, d := range s.d {
		for i := range d.len() {
			if d.isDead(i) {
				dead++
			} else {
				live++
			}
		}
	}
	if dead == 0 {
		return 0
	}
	if live == 0 {
		l.segs.Store(&sideSegs{})
		return dead
	}
	nd := newListData(live, dim)
	cb, j := nibbleBytes(dim), 0
	for _, d := range s.d {
		for i := range d.len() {
			if !d.isDead(i) {
				nd.set(j, d.entry(i, dim), cb)
				j++
			}
		}
	}
	nd.n.Store(int32(j))
	l.segs.Store(&sideSegs{d: []*listData{nd}, start: []int{0}})
	for i := range j {
		moved(nd.ids[i], i)
	}
	return dead
}

// bytes is the memory the list's segments hold, without the float
// vectors they reference.
func (l *sideList) bytes(dim int) int {
	n := 0
	for _, d := range l.segs.Load().d {
		n += d.bytes(dim)
	}
	return n
}
