package wave

import (
	"encoding/binary"
	"io"
	"math"
	"sync/atomic"
)

// An IVF snapshot, format version 3. ReadIVF also reads versions 1 and
// 2, which hold int8 codes with a scale instead of 4-bit codes (decoded
// and coded again as they load); version 1's metas lack the agent and
// place keys: they load as 0, admitting every filter, until
// [IVF.SetMeta] or [IVF.AttachMeta] sets them. Integers are little-endian; the
// CRC-32 (Castagnoli) covers everything after the 8-byte header. It
// holds no float vectors: the caller re-attaches them ([IVF.Attach]).
// Tombstones are not written.
//
//	header    "wvIVF_" | version u8 = 3 | flags u8 = 0
//	options   dim u32 | nprobe u32 | trainAt u32 | retrainFactor u32 |
//	          listSize u32 | seed u64 | trained u64 | n u64 (entries)
//	quantiser k1 u32 (0: none, one list) | nlist u32 | first (k1+1) × u32 |
//	          top k1 × dim × f32 | leaves nlist × dim × f32
//	lists     for each list: count u32, then
//	          ids count × u64 | metas count × (time i64 | end i64 |
//	          namespace u32 | kind u8 | type u8 | 0 u16 | agent u32 |
//	          site << 8 | confidence u32) (version 1: 24 bytes, no keys) |
//	          lows count × f32 | steps count × f32 |
//	          codes count × nibbleBytes(dim) bytes (quant4.go; of the
//	          residuals from the list's leaf centroid)
//	          (versions 1, 2: scales count × f32 | codes count × dim × i8)
//	crc       u32
//
// ReadIVF checks every count, centroid and id, so a damaged snapshot
// gives an error wrapping [ErrCorrupt], never a panic or an index that
// could crash a search. ivf_fuzz_test.go fuzzes it.
const (
	ivfMagic   = "wvIVF_"
	ivfVersion = 3
)

// A packed meta in a snapshot: metaSizeV1 bytes without the keys (IVF
// version 1, HNSW version 2), metaSize with them.
const (
	metaSizeV1 = 24
	metaSize   = 32
)

// meta writes m (see metaSize), its mutable fields read atomically (a
// snapshot written beside the writer: ivf_freeze.go).
func (e *encoder) meta(m *nodeMeta) {
	e.u64(uint64(atomic.LoadInt64(&m.time)))
	e.u64(uint64(atomic.LoadInt64(&m.end)))
	e.u32(m.ns)
	e.u8(uint8(m.kind))
	e.u8(m.typ)
	e.u8(0)
	e.u8(0)
	e.u32(atomic.LoadUint32(&m.agent))
	e.u32(atomic.LoadUint32(&m.place))
}

// decodeMeta reads a packed meta of metaSizeV1 or metaSize bytes.
func decodeMeta(b []byte) nodeMeta {
	m := nodeMeta{
		time: int64(binary.LittleEndian.Uint64(b)),
		end:  int64(binary.LittleEndian.Uint64(b[8:])),
		ns:   binary.LittleEndian.Uint32(b[16:]),
		kind: Kind(b[20]),
		typ:  b[21],
	}
	if len(b) >= metaSize {
		m.agent = binary.LittleEndian.Uint32(b[24:])
		m.place = binary.LittleEndian.Uint32(b[28:])
	}
	return m
}

// WriteTo writes a snapshot of the index to w (see the format above) and
// returns the number of bytes written. It waits for a running
// retraining, then writes the index as it stood at one moment
// (ivf_freeze.go): searches and writers go on meanwhile, writers
// waiting only while it notes the lists.
func (x *IVF) WriteTo(w io.Writer) (int64, error) { return x.writeVersion(w, ivfVersion) }

// writeVersion writes a snapshot in the format of the given version, 2
// (int8 codes, for the tests of reading it) or 3.
func (x *IVF) writeVersion(w io.Writer, version byte) (int64, error) {
	for {
		x.WaitRebuild()
		x.mu.Lock()
		if x.rebuild == nil {
			break
		}
		x.mu.Unlock()
	}
	f := x.freezeLocked()
	x.mu.Unlock()
	return f.writeTo(w, version)
}

// writeTo writes the snapshot of f's state.
func (f *ivfFreeze) writeTo(w io.Writer, version byte) (int64, error) {
	e := newEncoder(w, ivfMagic, version)
	total := 0
	for li := range f.lists {
		total += f.lists[li].liveCount()
	}
	e.u32(uint32(f.dim))
	e.u32(uint32(f.nprobe))
	e.u32(uint32(f.opt.TrainAt))
	e.u32(uint32(f.opt.RetrainFactor))
	e.u32(uint32(f.opt.ListSize))
	e.u64(f.opt.Seed)
	e.u64(uint64(f.trained))
	e.u64(uint64(total))
	if q := f.q; q == nil {
		e.u32(0)
		e.u32(1)
	} else {
		e.u32(uint32(len(q.top) / f.dim))
		e.u32(uint32(q.nlist()))
		for _, first := range q.first {
			e.u32(uint32(first))
		}
		e.f32s(q.top)
		e.f32s(q.leaves)
	}
	var refs []entryRef
	for li := range f.lists {
		// Live entries by id: list order depends on how inserts and a
		// retraining interleaved, the snapshot does not.
		refs = f.lists[li].appendLive(refs[:0])
		byID(refs)
		e.u32(uint32(len(refs)))
		if version < 3 {
			for _, r := range refs {
				e.u64(r.d.ids[r.i])
			}
			for _, r := range refs {
				e.meta(&r.d.metas[r.i])
			}
			e.int8Codes(refs, f.dim)
			continue
		}
		e.listColumns(refs, nibbleBytes(f.dim))
	}
	return e.finish()
}

// entryRef is entry i of list data d, for a snapshot to write.
type entryRef struct {
	d *listData
	i int
}

// listColumns writes the entries refs as a list of a version 3
// snapshot holds them after its count: their ids, metas, lows, steps,
// then codes (cb bytes each). readIVFList reads them.
func (e *encoder) listColumns(refs []entryRef, cb int) {
	for _, r := range refs {
		e.u64(r.d.ids[r.i])
	}
	for _, r := range refs {
		e.meta(&r.d.metas[r.i])
	}
	for _, r := range refs {
		e.u32(math.Float32bits(r.d.lows[r.i]))
	}
	for _, r := range refs {
		e.u32(math.Float32bits(r.d.steps[r.i]))
	}
	for _, r := range refs {
		e.room(cb)
		e.buf = append(e.buf, r.d.codes[r.i*cb:(r.i+1)*cb]...)
	}
}

// int8Codes writes the scales and int8 codes of versions 1 and 2 for the
// entries refs, coded from their vectors.
func (e *encoder) int8Codes(refs []entryRef, dim int) {
	codes := make([]int8, len(refs)*dim)
	buf := make([]float32, dim)
	for k, r := range refs {
		e.u32(math.Float32bits(quantize(entryVec(r.d.entry(r.i, dim), buf), codes[k*dim:(k+1)*dim])))
	}
	for _, c := range codes {
		e.u8(uint8(c))
	}
}

// f32s writes the floats of v.
func (e *encoder) f32s(v []float32) {
	for _, f := range v {
		e.u32(math.Float32bits(f))
	}
}

// f32s reads n floats, failing on a non-finite one.
func (d *decoder) f32s(n int) []float32 {
	var out []float32
	d.each(n, 4, func(b []byte, _ int) {
		for j := 0; j < len(b); j += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
		}
	})
	if d.err == nil && !finite(out) {
		d.err = corrupt("non-finite centroid")
	}
	return out
}

// ReadIVF reads a snapshot written by [IVF.WriteTo], reading exactly its
// bytes from r. A damaged or truncated snapshot gives an error wrapping
// [ErrCorrupt]. The index scores with its 4-bit codes alone until the
// float vectors are attached again ([IVF.Attach]).
func ReadIVF(r io.Reader) (*IVF, error) {
	d := &decoder{r: r}
	v, err := d.header(ivfMagic, ivfVersion, "IVF version")
	if err != nil {
		return nil, err
	}
	msize := metaSize
	if v == 1 {
		msize = metaSizeV1
	}
	dim, nprobe, trainAt, factor, listSize := d.u32(), d.u32(), d.u32(), d.u32(), d.u32()
	seed, trained, total := d.u64(), d.u64(), d.u64()
	k1, nlist := d.u32(), d.u32()
	if d.err != nil {
		return nil, d.err
	}
	const maxOpt = 1 << 30
	switch {
	case dim < 1 || dim > maxDim:
		return nil, corrupt("dimension %d", dim)
	case nprobe < 1 || trainAt < 1 || factor < 2 || listSize < 1 ||
		nprobe > maxOpt || trainAt > maxOpt || factor > maxOpt || listSize > maxOpt:
		return nil, corrupt("options %d/%d/%d/%d", nprobe, trainAt, factor, listSize)
	case total > math.MaxInt32 || trained > math.MaxInt32:
		return nil, corrupt("%d entries, trained at %d", total, trained)
	case nlist < 1 || nlist > 2*ivfMaxLists || k1 > nlist || (k1 == 0) != (nlist == 1):
		return nil, corrupt("%d top centroids, %d lists", k1, nlist)
	}
	x := NewIVF(int(dim), IVFOptions{NProbe: int(nprobe), TrainAt: int(trainAt), RetrainFactor: int(factor), ListSize: int(listSize), Seed: seed})
	x.trained = int(trained)
	// Bounded, since a damaged header may claim any count (its
	// checksum is read last).
	x.ids.expect = min(int(total), 1<<22)
	dimN := int(dim)
	var q *coarse
	if k1 > 0 {
		q = &coarse{dim: dimN, first: make([]int32, k1+1)}
		for j := range q.first {
			q.first[j] = int32(d.u32())
			if d.err == nil && (q.first[j] < 0 || q.first[j] > int32(nlist) || (j > 0 && q.first[j] <= q.first[j-1])) {
				return nil, corrupt("top centroid %d: leaves from %d", j, q.first[j])
			}
		}
		if d.err == nil && (q.first[0] != 0 || q.first[k1] != int32(nlist)) {
			return nil, corrupt("leaves %d..%d of %d", q.first[0], q.first[k1], nlist)
		}
		q.top = d.f32s(int(k1) * dimN)
		q.leaves = d.f32s(int(nlist) * dimN)
		if d.err != nil {
			return nil, d.err
		}
	}
	st := newIVFState(q, dimN, nil)
	left := int(total)
	for li := range st.lists {
		c := int(d.u32())
		if d.err != nil {
			return nil, d.err
		}
		if c > left {
			return nil, corrupt("list %d: %d entries, %d left", li, c, left)
		}
		left -= c
		var centre []float32
		if q != nil {
			centre = q.leaf(li)
		}
		ld, err := readIVFList(d, c, min(c, maxListPresize), dimN, msize, v, centre, true)
		if err != nil {
			return nil, err
		}
		for i := range c {
			if !x.ids.put(ld.ids[i], ivfLoc{uint32(li), uint32(i)}) {
				return nil, corrupt("id %d held twice", ld.ids[i])
			}
		}
		st.lists[li].d.Store(ld)
	}
	if left != 0 {
		return nil, corrupt("%d entries missing", left)
	}
	if err := d.checksum(""); err != nil {
		return nil, err
	}
	x.st.Store(st)
	return x, nil
}

// maxListPresize bounds the entries a list is sized for before they are
// read (a list holds up to a few thousand).
const maxListPresize = 1 << 14

// readIVFList reads the c entries of one list (of centroid centre) from
// a snapshot of the given version, sized for pre of them first. Sized
// for the count the snapshot gives, up to a bound a damaged count
// cannot make large (maxListPresize, unless the count was checked):
// growing as it reads cost a third of a 1M-vector snapshot's load, in
// copies and clearing.
//
// With room set the list is given room beyond its entries (listRoom):
// loaded exactly full, every inverted list was copied whole at its
// first push, and a start after a crash, whose fill adds back the
// vectors written since, copied nearly all of them before serving
// (1.35 s at 1M vectors), doubling their memory.
func readIVFList(d *decoder, c, pre, dim, msize int, version byte, centre []float32, room bool) (*listData, error) {
	cb := nibbleBytes(dim)
	if room {
		pre = listRoom(pre)
	}
	ld := &listData{ids: make([]uint64, 0, pre), metas: make([]nodeMeta, 0, pre),
		lows: make([]float32, 0, pre), steps: make([]float32, 0, pre), codes: make([]byte, 0, pre*cb), centre: centre}
	d.each(c, 8, func(b []byte, _ int) {
		for j := 0; j < len(b); j += 8 {
			ld.ids = append(ld.ids, binary.LittleEndian.Uint64(b[j:]))
		}
	})
	d.each(c, msize, func(b []byte, _ int) {
		for j := 0; j < len(b); j += msize {
			ld.metas = append(ld.metas, decodeMeta(b[j:j+msize]))
		}
	})
	f32s := func(dst []float32) []float32 {
		d.each(c, 4, func(b []byte, _ int) {
			for j := 0; j < len(b); j += 4 {
				dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
			}
		})
		return dst
	}
	if version < 3 {
		readInt8Codes(d, ld, c, dim, f32s(nil))
	} else {
		ld.lows = f32s(ld.lows)
		ld.steps = f32s(ld.steps)
		d.each(c, cb, func(b []byte, _ int) {
			ld.codes = append(ld.codes, b...)
		})
	}
	if d.err != nil {
		return nil, d.err
	}
	if !finite(ld.lows) || !finite(ld.steps) {
		return nil, corrupt("non-finite code offset or step")
	}
	n := c
	if room {
		// The room every array has (the same, unless a count past the
		// presize grew some as they were read).
		n = min(cap(ld.ids), cap(ld.metas), cap(ld.lows), cap(ld.steps), cap(ld.codes)/cb)
		ld.ids, ld.metas, ld.lows, ld.steps, ld.codes = ld.ids[:n], ld.metas[:n], ld.lows[:n], ld.steps[:n], ld.codes[:n*cb]
	}
	ld.vecs = make([]atomic.Pointer[float32], n)
	ld.blk = newBlocks(n)
	for i := range c {
		ld.widenAt(i)
	}
	ld.n.Store(int32(c))
	return ld, nil
}

// listRoom is the room a list read with n entries is given: a
// sixteenth more, and 8 at least (a start's catch-up adds back a few
// percent of a store's vectors, and ingest's first inserts go to lists
// spread over the index).
func listRoom(n int) int { return n + n/16 + 8 }

// readInt8Codes reads the int8 codes of versions 1 and 2 (scales given)
// into ld as 4-bit codes of the residuals from ld.centre.
func readInt8Codes(d *decoder, ld *listData, c, dim int, scales []float32) {
	if d.err != nil {
		return
	}
	if !finite(scales) {
		d.err = corrupt("non-finite scale")
		return
	}
	v := make([]float32, dim)
	var sc coder
	d.each(c, dim, func(b []byte, _ int) {
		for j := 0; j < len(b); j += dim {
			scale := scales[len(ld.lows)]
			for i, x := range b[j : j+dim] {
				v[i] = scale * float32(int8(x))
			}
			Normalize(v)
			code, lo, step := sc.residual(v, ld.centre)
			ld.codes = append(ld.codes, code...)
			ld.lows = append(ld.lows, lo)
			ld.steps = append(ld.steps, step)
		}
	})
}
