package wave

import (
	"context"
	"fmt"
	"io"
	"math"
)

// maxCheckedPresize bounds the entries a key's list is sized for at
// once from its checked count (about 1 GB at 384 dimensions).
const maxCheckedPresize = 1 << 22

// A splits snapshot holds an IVF's splits (ivf_side.go) beside the
// index's own snapshot, so that a restart loads them instead of filling
// them again: at a million items the fill took 13-18 s and 20-28 s of
// CPU after the start, two k-means trainings and two codings of every
// vector, while same-agent and windowed searches used the slower
// inverted lists. Format version 1, integers little-endian, each section
// checked by its own CRC-32 (Castagnoli) as the IVF snapshot is:
//
//	header      "wvSPL_" | version u8 = 1 | flags u8 = 0
//	            dim u32 | splits u8 | by u8 × splits (0 agent, 1 time) | crc u32
//	for each split, in that order:
//	keys        "wvKEY_" | version u8 = 1 | flags u8 = 0 | lists u32 |
//	            (key u32 | count u32) × lists, keys increasing | crc u32 (of
//	            this much), then for each list its entries as an IVF
//	            snapshot's list holds them (ids, metas, lows, steps, 4-bit
//	            codes of the whole vectors) | crc u32 (of the section)
//	catch-alls  an IVF snapshot (ivf_snapshot.go)
//
// The splits are derived from the index, so a load trusts nothing in
// them that the index does not confirm ([SplitsLoad.Load]).
const (
	splitsMagic   = "wvSPL_"
	splitsVersion = 1
	keysMagic     = "wvKEY_"
	keysVersion   = 1
)

// WriteSplitsTo writes a snapshot of x's splits to w (see the format
// above) and returns the number of bytes written. Only a ready split
// (one that holds every live item) is written: one still loading or
// filling is left out, and the next start fills it. Searches and
// writers go on while it runs: it writes the splits as they stood at
// one moment (ivf_freeze.go), after any retraining of their catch-alls'
// indexes. Write it beside a snapshot
// of x ([IVF.WriteTo]) with no change between them, at a shutdown, or
// stamp both with a generation of the graph taken before either and
// catch them up from it after a crash: [SplitsLoad.Load] reads both as
// one state once what changed since is left out ([SplitsLoad.Exclude]).
//
// A split saved before it was ready (a daemon stopped soon after its
// start, while the split loaded or filled) was read back by the next
// start, and the first change to some of its items panicked in
// sideSetMeta: an entry at a position its list did not have.
func (x *IVF) WriteSplitsTo(w io.Writer) (int64, error) {
	// Each split's lists and catch-alls frozen at one moment (an item
	// moved between them is in one or the other), none of the
	// catch-alls' indexes retraining.
	var sides []sideFreeze
	for retraining := true; retraining; {
		x.sidesDo(func(sd *ivfSide) { sd.shared.WaitRebuild() })
		x.mu.Lock()
		sides, retraining = sides[:0], false
		x.sidesDo(func(sd *ivfSide) {
			if retraining || sd.loading || !sd.ready.Load() {
				return
			}
			sd.shared.mu.Lock()
			defer sd.shared.mu.Unlock()
			if retraining = sd.shared.rebuild != nil; !retraining {
				sides = append(sides, sd.freezeLocked())
			}
		})
		x.mu.Unlock()
	}
	e := newEncoder(w, splitsMagic, splitsVersion)
	e.u32(uint32(x.dim))
	e.u8(uint8(len(sides)))
	for _, sf := range sides {
		e.u8(uint8(sf.by))
	}
	n, err := e.finish()
	for _, sf := range sides {
		if err != nil {
			break
		}
		var m int64
		m, err = sf.writeKeys(w, x.dim)
		n += m
		if err == nil {
			m, err = sf.shared.writeTo(w, ivfVersion)
			n += m
		}
	}
	return n, err
}

// writeKeys writes the keys section of sf: its lists' entries live at
// the freeze, by key.
func (sf *sideFreeze) writeKeys(w io.Writer, dim int) (int64, error) {
	e := newEncoder(w, keysMagic, keysVersion)
	e.u32(uint32(len(sf.keys)))
	for k, key := range sf.keys {
		n := 0
		for s := range sf.segs[k] {
			n += sf.segs[k][s].liveCount()
		}
		e.u32(key)
		e.u32(uint32(n))
	}
	e.flushBuf()
	e.u32(e.crc)
	var refs []entryRef
	for k := range sf.keys {
		refs = refs[:0]
		for s := range sf.segs[k] {
			refs = sf.segs[k][s].appendLive(refs)
		}
		e.listColumns(refs, nibbleBytes(dim))
	}
	return e.finish()
}

// readSplit is one split as a splits snapshot holds it, not yet checked
// against the index.
type readSplit struct {
	by     splitBy
	keys   []uint32    // each list's key
	lists  []*listData // each key's entries, with no vectors
	ids    idTable     // the keys' lists' entries
	shared *IVF        // the catch-alls' index, with no vectors
}

// readSplitsHeader reads a splits snapshot's header for an index of dim
// dimensions: the kinds of split it holds, in order, each once.
func readSplitsHeader(r io.Reader, dim int) ([]splitBy, error) {
	d := &decoder{r: r}
	if _, err := d.header(splitsMagic, splitsVersion, "splits version"); err != nil {
		return nil, err
	}
	fdim := d.u32()
	var bys []byte
	if b := d.read(1); b != nil {
		bys = append([]byte(nil), d.read(int(b[0]))...)
	}
	if err := d.checksum("splits header "); err != nil {
		return nil, err
	}
	if int(fdim) != dim {
		return nil, fmt.Errorf("wave: splits snapshot of %d dimensions, index of %d", fdim, dim)
	}
	out := make([]splitBy, 0, len(bys))
	var seen [splitKinds]bool
	for _, by := range bys {
		if by >= uint8(splitKinds) || seen[by] {
			return nil, corrupt("split kind %d", by)
		}
		seen[by] = true
		out = append(out, splitBy(by))
	}
	return out, nil
}

// SplitsSaved reads only the header of a splits snapshot
// ([IVF.WriteSplitsTo]) of an index of dim dimensions, and reports
// whether it holds the split by agent and the split by time. A split
// not ready when the snapshot was written is not in it.
func SplitsSaved(r io.Reader, dim int) (byAgentSaved, byTimeSaved bool, err error) {
	bys, err := readSplitsHeader(r, dim)
	for _, by := range bys {
		byAgentSaved = byAgentSaved || by == byAgent
		byTimeSaved = byTimeSaved || by == byTime
	}
	return byAgentSaved, byTimeSaved, err
}

// readSplits reads a splits snapshot of dim-dimensional vectors from r,
// exactly its bytes. A damaged or truncated one gives an error wrapping
// [ErrCorrupt].
func readSplits(r io.Reader, dim int) ([]*readSplit, error) {
	bys, err := readSplitsHeader(r, dim)
	if err != nil {
		return nil, err
	}
	var out []*readSplit
	for _, by := range bys {
		rs, err := readKeys(r, dim)
		if err != nil {
			return nil, err
		}
		rs.by = by
		if rs.shared, err = ReadIVF(r); err != nil {
			return nil, err
		}
		if rs.shared.dim != dim {
			return nil, corrupt("catch-alls of %d dimensions", rs.shared.dim)
		}
		for _, ld := range rs.lists {
			for _, id := range ld.ids {
				if rs.shared.ids.has(id) {
					return nil, corrupt("id %d held twice", id)
				}
			}
		}
		out = append(out, rs)
	}
	return out, nil
}

// readKeys reads a split's keys section.
func readKeys(r io.Reader, dim int) (*readSplit, error) {
	d := &decoder{r: r}
	if _, err := d.header(keysMagic, keysVersion, "keys version"); err != nil {
		return nil, err
	}
	rs := &readSplit{}
	nl := d.u32()
	if d.err == nil && nl > 1<<24 {
		return nil, corrupt("%d key lists", nl)
	}
	// The keys and counts, checked by their checksum before any list is
	// sized by its count.
	var counts []int
	total := 0
	for range nl {
		key, c := d.u32(), d.u32()
		if d.err != nil {
			return nil, d.err
		}
		if len(rs.keys) > 0 && key <= rs.keys[len(rs.keys)-1] {
			return nil, corrupt("key %d after %d", key, rs.keys[len(rs.keys)-1])
		}
		if total += int(c); total > math.MaxInt32 {
			return nil, corrupt("%d entries", total)
		}
		rs.keys, counts = append(rs.keys, key), append(counts, int(c))
	}
	if err := d.checksum("keys "); err != nil {
		return nil, err
	}
	rs.ids.expect = min(total, 1<<22)
	for slot, c := range counts {
		ld, err := readIVFList(d, c, min(c, maxCheckedPresize), dim, metaSize, ivfVersion, nil, false)
		if err != nil {
			return nil, err
		}
		for i, id := range ld.ids {
			if !rs.ids.put(id, ivfLoc{uint32(slot), uint32(i)}) {
				return nil, corrupt("id %d held twice", id)
			}
		}
		rs.lists = append(rs.lists, ld)
	}
	if err := d.checksum("keys "); err != nil {
		return nil, err
	}
	return rs, nil
}

// SplitsLoad is a load of splits from a snapshot, begun by
// [IVF.ExpectSplits] and done by [SplitsLoad.Load].
type SplitsLoad struct{ x *IVF }

// ExpectSplits begins a load of x's splits from a snapshot written with
// the one x was read from ([IVF.WriteSplitsTo]): from now on x records
// which items change, so that the load leaves their saved copies out.
// Call it before x changes after its snapshot is read and the vectors
// attached, and call Load once (the record grows until then).
func (x *IVF) ExpectSplits() *SplitsLoad {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.changed = map[uint64]struct{}{}
	return &SplitsLoad{x: x}
}

// Exclude has the load leave out the saved entries of the items ids, as
// if they had changed since ExpectSplits: items that changed before it,
// since the snapshot was written (a daemon's start that caught an
// index up with its graph, removing those items, before its fill added
// them again). The splits' fill adds them anew. Call it before Load.
func (l *SplitsLoad) Exclude(ids []uint64) {
	x := l.x
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		x.noteChanged(id)
	}
}

// Load reads the splits snapshot r (nil: none) and makes x keep the
// splits asked for (by agent, by time: agent, window) from it, as SplitByAgent and
// SplitByTime would make them: searches go on using the inverted lists
// until each split holds every live item. An entry of the snapshot
// enters its split only if x holds the item unchanged since
// ExpectSplits, with its float vector, under the same split key (the
// Meta is x's); the items the snapshot lacks or that fail this are
// added by the split's background fill, which then codes only those and
// trains nothing the snapshot held. A split the snapshot does not hold,
// or one that cannot be read, is made by that fill alone. Load returns
// the error reading r gave, if any, after falling back so, and what it
// read and kept. Cancelling ctx stops Load between lists, returning
// ctx's error: the splits it has begun then stay unready (a daemon
// stopping).
func (l *SplitsLoad) Load(ctx context.Context, r io.Reader, agent, window bool) (SplitsLoaded, error) {
	x := l.x
	var rs []*readSplit
	var err error
	var got SplitsLoaded
	if r != nil {
		rs, err = readSplits(r, x.dim)
	}
	want := [splitKinds]bool{byAgent: agent, byTime: window}
	x.mu.Lock()
	changed := x.changed
	x.changed = nil
	var loading []*ivfSide
	for _, s := range rs {
		if want[s.by] && x.sides[s.by].Load() == nil {
			sd := s.install()
			x.sides[s.by].Store(sd)
			loading = append(loading, sd)
			got.Entries += s.ids.len() + s.shared.ids.len()
		}
	}
	x.mu.Unlock()
	for _, sd := range loading {
		got.Splits++
		if !x.confirmKeys(ctx, sd, changed, &got) || !x.confirmShared(ctx, sd, changed, &got) {
			return got, ctx.Err()
		}
		x.endLoading(sd)
	}
	for by := range splitKinds {
		if want[by] {
			x.split(by) // nothing if loaded
		}
	}
	return got, err
}

// SplitsLoaded is what [SplitsLoad.Load] read: the splits it took from
// the snapshot, their saved entries (counted as read, whatever changes
// beside the load) and those the index confirmed (a
// snapshot saved with the index's at a clean shutdown and loaded before
// any change has every one confirmed).
type SplitsLoaded struct{ Splits, Entries, Kept int }

// install returns the split s holds, loading: it takes the IVF's
// changes from now, and serves no search until confirmed.
func (s *readSplit) install() *ivfSide {
	sd := &ivfSide{by: s.by, shared: s.shared, ids: s.ids, loading: true}
	al := &sideLists{slot: make(map[uint32]uint32, len(s.keys)), lists: make([]*sideList, len(s.keys)), sorted: make([]keySlot, len(s.keys))}
	for slot, key := range s.keys {
		l := newSideList(0)
		l.segs.Store(&sideSegs{d: []*listData{s.lists[slot]}, start: []int{0}})
		al.slot[key] = uint32(slot)
		al.lists[slot] = l
		al.sorted[slot] = keySlot{key, uint32(slot)} // keys are read in order
	}
	sd.lists.Store(al)
	return sd
}

// confirmed returns the Meta and float vector of x's item id, ok when x
// holds it with a vector and it has not changed since ExpectSplits; the
// caller holds mu.
func (x *IVF) confirmed(id uint64, changed map[uint64]struct{}) (m Meta, vec *float32, ok bool) {
	if _, ch := changed[id]; ch {
		return m, nil, false
	}
	loc, ok := x.ids.get(id)
	if !ok {
		return m, nil, false
	}
	d := x.st.Load().lists[loc.list].d.Load()
	vec = d.vecs[loc.pos].Load()
	return d.metas[loc.pos].meta(), vec, vec != nil
}

// confirmKeys checks the loaded entries of sd's keys' lists against x,
// one list under x's mu at a time (confirmKeyList). It returns false if
// ctx ended first.
func (x *IVF) confirmKeys(ctx context.Context, sd *ivfSide, changed map[uint64]struct{}, got *SplitsLoaded) bool {
	loaded := sd.lists.Load().sorted // the loaded lists; later ones are new
	for _, ks := range loaded {
		if ctx.Err() != nil {
			return false
		}
		x.mu.Lock()
		x.confirmKeyList(sd, ks, changed, got)
		x.mu.Unlock()
	}
	return true
}

// confirmKeyList checks the loaded entries of sd's list ks: one x
// confirms under the list's key takes x's Meta and vector; any other is
// dropped. The caller holds x's mu.
func (x *IVF) confirmKeyList(sd *ivfSide, ks keySlot, changed map[uint64]struct{}, got *SplitsLoaded) {
	// Reloaded: a compaction since may have moved the entries.
	for _, d := range sd.lists.Load().lists[ks.slot].segs.Load().d {
		for i := range d.len() {
			if d.isDead(i) || d.vecs[i].Load() != nil {
				continue // dropped, or confirmed or added since
			}
			id, nm := d.ids[i], &d.metas[i]
			m, vec, ok := x.confirmed(id, changed)
			if key, keyed := sd.key(m); ok && keyed && key == ks.key && !nm.fixedDiffer(m) {
				nm.setMutable(m)
				d.vecs[i].Store(vec)
				d.widenAt(i)
				got.Kept++
				continue
			}
			d.markDead(i)
			sd.ids.remove(id)
			sd.dead++
		}
	}
}

// confirmShared checks the loaded entries of sd's catch-alls' index
// against x as confirmKeys does those of its lists, one list under x's
// and the index's mu at a time (confirmSharedList), until a pass over
// the index's lists finds its state unchanged (a retraining swaps it).
// It returns false if ctx ended first.
func (x *IVF) confirmShared(ctx context.Context, sd *ivfSide, changed map[uint64]struct{}, got *SplitsLoaded) bool {
	sh := sd.shared
	for {
		st, left := sh.st.Load(), false
		for li := range st.lists {
			if ctx.Err() != nil {
				return false
			}
			x.mu.Lock()
			sh.mu.Lock()
			if left = sh.st.Load() != st; !left {
				x.confirmSharedList(sd, st.lists[li].d.Load(), changed, got)
			}
			sh.mu.Unlock()
			x.mu.Unlock()
			if left {
				break
			}
		}
		if !left {
			return true
		}
	}
}

// confirmSharedList checks the loaded entries of d, a list of sd's
// catch-alls' index, as confirmKeyList does a key's. The caller holds
// x's mu and the index's.
func (x *IVF) confirmSharedList(sd *ivfSide, d *listData, changed map[uint64]struct{}, got *SplitsLoaded) {
	sh := sd.shared
	for i := range d.len() {
		if d.isDead(i) || d.vecs[i].Load() != nil {
			continue
		}
		id, nm := d.ids[i], &d.metas[i]
		m, vec, ok := x.confirmed(id, changed)
		if _, keyed := sd.key(m); ok && !keyed && !nm.fixedDiffer(m) {
			nm.setMutable(m)
			d.vecs[i].Store(vec)
			d.widenAt(i)
			got.Kept++
		} else {
			sh.removeLocked(id)
		}
		sh.touch(id) // a retraining running copies it afresh
	}
}

// endLoading ends sd's loading once its lists are checked: it compacts
// what the checks dropped and has the fill add what the snapshot lacked,
// after which sd serves. (No list can take an unchecked entry once it is
// checked: a catch-all given another namespace, kind or type is appended
// anew to the same list as a copy of its entry, checked or not with it.)
func (x *IVF) endLoading(sd *ivfSide) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if CleanupDue(sd.dead, sd.ids.len()) {
		x.compactSideLists(sd)
	}
	if sh := sd.shared; CleanupDue(sh.Tombstones(), sh.Len()) {
		sh.Cleanup()
	}
	sd.loading = false
	x.sideChanged(sd)
	x.fillSideLocked(sd)
}
