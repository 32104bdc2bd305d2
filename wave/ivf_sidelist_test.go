package wave

import (
	"testing"
)

// sideEntry is a test entry whose id and step tell it apart.
func sideEntry(id uint64, dim int) ivfEntry {
	return ivfEntry{id: id, step: float32(id), code: make([]byte, nibbleBytes(dim))}
}

// TestSideListGrowsWithoutCopies: a key's list grows by adding
// segments, never by copying what it holds: every segment but the last
// is full, a segment once written stays where it is, each position
// reads back its entry, and at most a quarter of the list's room beyond
// what it holds (and a first segment) is empty.
func TestSideListGrowsWithoutCopies(t *testing.T) {
	const dim, n = 8, 30_000
	l := newSideList(0)
	var first []*listData
	for i := range n {
		if pos := l.push(sideEntry(uint64(i), dim), dim); pos != i {
			t.Fatalf("entry %d pushed at position %d", i, pos)
		}
		s := l.segs.Load()
		for k, d := range first {
			if s.d[k] != d {
				t.Fatalf("after %d entries, segment %d was replaced", i+1, k)
			}
		}
		first = append(first[:0], s.d...)
		if room, held := l.room(), l.len(); room > held+held/4+maxSegment && room > held+minSegment {
			t.Fatalf("%d entries held in room for %d", held, room)
		}
	}
	s := l.segs.Load()
	for k, d := range s.d[:len(s.d)-1] {
		if d.len() != len(d.ids) {
			t.Fatalf("segment %d of %d holds %d of its %d", k, len(s.d), d.len(), len(d.ids))
		}
		if len(d.ids) > maxSegment {
			t.Fatalf("segment %d has room for %d, more than %d", k, len(d.ids), maxSegment)
		}
	}
	if len(s.d) > 40 {
		t.Fatalf("%d entries in %d segments", n, len(s.d))
	}
	for i := 0; i < n; i += 7 {
		d, at := l.at(i)
		if d.ids[at] != uint64(i) || d.steps[at] != float32(i) {
			t.Fatalf("position %d reads entry %d", i, d.ids[at])
		}
	}
	segs := l.appendTo(nil)
	total := 0
	for _, d := range segs {
		total += d.len()
	}
	if total != n || len(segs) != len(s.d) {
		t.Fatalf("appendTo gave %d segments holding %d entries, want %d holding %d", len(segs), total, len(s.d), n)
	}
}

// TestSideListReserveTrimCompact: room reserved is exactly what the next
// segment makes up; a trim gives back the last segment's empty room
// (dropping a segment left empty) and keeps tombstones; a compaction
// drops them, reports every entry's new position, and the list grows on
// from there.
func TestSideListReserveTrimCompact(t *testing.T) {
	const dim = 8
	l := newSideList(100)
	for i := range 10 {
		l.push(sideEntry(uint64(i), dim), dim)
	}
	if l.room() != 100 {
		t.Fatalf("a list made for 100 has room for %d", l.room())
	}
	for i := 10; i < 100; i++ {
		l.push(sideEntry(uint64(i), dim), dim)
	}
	l.reserve(1000)
	for i := 100; i < 1000; i++ {
		l.push(sideEntry(uint64(i), dim), dim)
	}
	if l.room() != 1000 || len(l.segs.Load().d) != 2 {
		t.Fatalf("1000 entries after a reserve of 1000: room %d in %d segments", l.room(), len(l.segs.Load().d))
	}
	l.push(sideEntry(1000, dim), dim)
	d, at := l.at(1000)
	d.markDead(at)
	l.trim(dim)
	if l.room() != 1001 || l.len() != 1001 {
		t.Fatalf("trimmed: room %d, holds %d, want 1001", l.room(), l.len())
	}
	if d, at := l.at(1000); !d.isDead(at) {
		t.Fatal("a trim lost a tombstone")
	}
	for i := 0; i < 1000; i += 3 {
		d, at := l.at(i)
		d.markDead(at)
	}
	moved := map[uint64]int{}
	dead := l.compact(dim, func(id uint64, pos int) { moved[id] = pos })
	if dead != 335 || len(moved) != 666 || l.len() != 666 || l.room() != 666 {
		t.Fatalf("compacted: %d dropped, %d moved, %d held in room for %d; want 335, 666, 666, 666", dead, len(moved), l.len(), l.room())
	}
	for id, pos := range moved {
		if d, at := l.at(pos); d.ids[at] != id || d.isDead(at) {
			t.Fatalf("entry %d reported at %d, which holds %d", id, pos, d.ids[at])
		}
	}
	if pos := l.push(sideEntry(5000, dim), dim); pos != 666 {
		t.Fatalf("after the compaction, the next entry went to %d, want 666", pos)
	}
	if got := l.compact(dim, func(uint64, int) {}); got != 0 {
		t.Fatalf("a list with no tombstones compacted %d", got)
	}
	e := newSideList(0)
	e.push(sideEntry(1, dim), dim)
	d, at = e.at(0)
	d.markDead(at)
	if got := e.compact(dim, func(uint64, int) { t.Fatal("an entry moved out of an all-dead list") }); got != 1 || e.len() != 0 || e.room() != 0 {
		t.Fatalf("an all-dead list compacted %d, holds %d in %d", got, e.len(), e.room())
	}
	if pos := e.push(sideEntry(2, dim), dim); pos != 0 {
		t.Fatalf("the emptied list took its next entry at %d", pos)
	}
}
