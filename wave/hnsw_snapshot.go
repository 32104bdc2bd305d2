package wave

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"unsafe"
)

// An HNSW snapshot, format version 3 (ReadHNSW also reads version 2,
// whose metas lack the agent and place keys, which load as 0 and admit
// every filter until [HNSW.SetMeta] sets them, and version 1, whose metas
// also lack end: a v1 item's time was a point, so it loads as the scope
// [time, time] and keeps matching the windows it matched). Integers are little-endian; the
// CRC-32 (Castagnoli) covers the payload, everything after the 8-byte
// header. Slots keep their numbers, so the graph loads without a rebuild.
//
//	header   "wvHNSW" | version u8 = 2 | flags u8 = 0
//	options  dim u32 | M u32 | efConstruction u32 | efSearch u32 | seed u64
//	graph    nslots u32 | top u64 (0 = empty, else 1<<63 | level<<32 | slot)
//	states   nslots × u8 (0 free, 1 live, 2 deleted)
//	levels   nslots × u8
//	ids      nslots × u64
//	metas    nslots × (time i64 | end i64 | namespace u32 | kind u8 | type u8 | 0 u16 |
//	         agent u32 | site << 8 | confidence u32)
//	         (version 2: no agent and place; version 1: no end either)
//	vectors  nslots × dim × f32 (zeros for free slots)
//	counts   for each non-free slot, for layers 0..level: count u32
//	links    the neighbour slots (u32) of those lists, concatenated
//	crc      u32
//
// ReadHNSW checks every count, slot number and level, so a damaged
// snapshot gives an error wrapping [ErrCorrupt], never a panic or a
// graph that could crash a search. hnsw_fuzz_test.go fuzzes it.
const (
	snapMagic   = "wvHNSW"
	snapVersion = 3
	snapChunk   = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// littleEndian: vectors can be copied to and from the snapshot as is.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// WriteTo writes a snapshot of the index to w (see the format above) and
// returns the number of bytes written. Searches go on while it runs;
// Add, Remove and Cleanup wait for it.
func (h *HNSW) WriteTo(w io.Writer) (int64, error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	e := newEncoder(w, snapMagic, snapVersion)

	n := int(h.nslots.Load())
	e.u32(uint32(h.dim))
	e.u32(uint32(h.m))
	e.u32(uint32(h.efC))
	e.u32(uint32(h.efS.Load()))
	e.u64(h.seed)
	e.u32(uint32(n))
	e.u64(h.top.Load())

	// Cleanup, which holds wmu shared, cannot be halfway: there are no
	// condemned slots.
	for s := range n {
		p, i := h.page(uint32(s))
		e.u8(uint8(p.state[i].Load()))
	}
	for s := range n {
		p, i := h.page(uint32(s))
		e.u8(p.levels[i])
	}
	for s := range n {
		p, i := h.page(uint32(s))
		e.u64(p.ids[i])
	}
	for s := range n {
		p, i := h.page(uint32(s))
		e.meta(&p.metas[i])
	}
	for s := range n {
		v := h.vec(uint32(s))
		if littleEndian {
			e.room(4 * len(v))
			e.buf = append(e.buf, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
			continue
		}
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	}
	for pass := range 2 {
		for s := range n {
			p, i := h.page(uint32(s))
			if p.state[i].Load() == stateFree {
				continue
			}
			for l := 0; l <= int(p.levels[i]); l++ {
				ls := h.list(p, i, l)
				c := int(ls[0])
				if pass == 0 {
					e.u32(uint32(c))
					continue
				}
				for _, x := range ls[1 : c+1] {
					e.u32(x)
				}
			}
		}
	}
	return e.finish()
}

// encoder batches little-endian values into buf and writes them through
// the CRC.
type encoder struct {
	w   *bufio.Writer
	n   int64
	crc uint32
	err error
	buf []byte
}

// finish writes the CRC of what was written after the header and
// flushes; it returns the bytes written and the first error.
func (e *encoder) finish() (int64, error) {
	e.flushBuf()
	e.buf = binary.LittleEndian.AppendUint32(e.buf[:0], e.crc)
	e.write(e.buf)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("wave: write snapshot: %w", e.err)
	}
	return e.n, nil
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	m, err := e.w.Write(b)
	e.n += int64(m)
	e.err = err
}

func (e *encoder) flushBuf() {
	e.crc = crc32.Update(e.crc, castagnoli, e.buf)
	e.write(e.buf)
	e.buf = e.buf[:0]
}

func (e *encoder) room(n int) {
	if len(e.buf)+n > cap(e.buf) {
		e.flushBuf()
	}
}

func (e *encoder) u8(v uint8)   { e.room(1); e.buf = append(e.buf, v) }
func (e *encoder) u32(v uint32) { e.room(4); e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }
func (e *encoder) u64(v uint64) { e.room(8); e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }

// decoder reads exact byte counts (never past the snapshot) and keeps
// the CRC of what it read.
type decoder struct {
	r   io.Reader
	crc uint32
	buf []byte
	err error
}

// read returns the next n bytes (valid until the next call), or nil after
// an error.
func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return nil
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			d.err = fmt.Errorf("%w: truncated: %w", ErrCorrupt, io.ErrUnexpectedEOF)
		} else {
			d.err = fmt.Errorf("wave: read snapshot: %w", err)
		}
		return nil
	}
	d.crc = crc32.Update(d.crc, castagnoli, b)
	return b
}

func (d *decoder) u32() uint32 {
	if b := d.read(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.read(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// each reads n records of size bytes in chunks, calling fn with each
// chunk and the index of its first record, so memory grows only with
// what was actually read.
func (d *decoder) each(n, size int, fn func(b []byte, first int)) {
	per := max(1, snapChunk/size)
	for first := 0; first < n && d.err == nil; first += per {
		c := min(per, n-first)
		if b := d.read(c * size); b != nil {
			fn(b, first)
		}
	}
}

// checksum reads the CRC a snapshot's writer put after what d has read
// (since the header) and returns d's error, or one wrapping ErrCorrupt
// (named with what) if it differs.
func (d *decoder) checksum(what string) error {
	want := d.crc
	got := d.u32()
	if d.err != nil {
		return d.err
	}
	if got != want {
		return corrupt("%schecksum %08x, want %08x", what, got, want)
	}
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// newEncoder starts a snapshot to w with its header: magic, then the
// format version and a flags byte of 0.
func newEncoder(w io.Writer, magic string, version byte) *encoder {
	e := &encoder{w: bufio.NewWriterSize(w, 1<<20), buf: make([]byte, 0, snapChunk)}
	e.w.WriteString(magic)
	e.w.Write([]byte{version, 0})
	e.n = int64(len(magic) + 2)
	return e
}

// header reads a snapshot's header (newEncoder) and returns its version,
// refusing another magic, a version outside 1..latest or a flag set
// (named in the error as what: "version", "IVF version"). The checksum
// starts after it.
func (d *decoder) header(magic string, latest byte, what string) (byte, error) {
	hdr := d.read(len(magic) + 2)
	if d.err != nil {
		return 0, d.err
	}
	if string(hdr[:len(magic)]) != magic {
		return 0, corrupt("bad magic %q", hdr[:len(magic)])
	}
	v, fl := hdr[len(magic)], hdr[len(magic)+1]
	if v < 1 || v > latest || fl != 0 {
		return 0, corrupt("unsupported %s %d flags %d", what, v, fl)
	}
	d.crc = 0
	return v, nil
}

// ReadHNSW reads a snapshot written by [HNSW.WriteTo]. It reads exactly
// the snapshot's bytes from r. A damaged or truncated snapshot gives an
// error wrapping [ErrCorrupt].
func ReadHNSW(r io.Reader) (*HNSW, error) {
	d := &decoder{r: r}
	version, err := d.header(snapMagic, snapVersion, "version")
	if err != nil {
		return nil, err
	}
	dim, m, efC, efS := d.u32(), d.u32(), d.u32(), d.u32()
	seed := d.u64()
	n64, top := d.u32(), d.u64()
	if d.err != nil {
		return nil, d.err
	}
	const maxEf = 1 << 20
	switch {
	case dim < 1 || dim > maxDim:
		return nil, corrupt("dimension %d", dim)
	case m < 2 || m > maxM:
		return nil, corrupt("M %d", m)
	case efC < 1 || efC > maxEf || efS < 1 || efS > maxEf:
		return nil, corrupt("ef %d/%d", efC, efS)
	case n64 > math.MaxInt32:
		return nil, corrupt("%d slots", n64)
	}
	n := int(n64)
	h := NewHNSW(int(dim), HNSWOptions{M: int(m), EfConstruction: int(efC), EfSearch: int(efS), Seed: seed})

	var states, levels []byte
	d.each(n, 1, func(b []byte, _ int) { states = append(states, b...) })
	d.each(n, 1, func(b []byte, _ int) { levels = append(levels, b...) })
	if d.err != nil {
		return nil, d.err
	}
	for s := range n {
		if states[s] > uint8(stateDeleted) {
			return nil, corrupt("slot %d: state %d", s, states[s])
		}
		if levels[s] > maxLevel || (states[s] == uint8(stateFree) && levels[s] != 0) {
			return nil, corrupt("slot %d: level %d", s, levels[s])
		}
	}
	var ids []uint64
	d.each(n, 8, func(b []byte, _ int) {
		for j := 0; j < len(b); j += 8 {
			ids = append(ids, binary.LittleEndian.Uint64(b[j:]))
		}
	})
	var metas []nodeMeta
	size := metaSize
	switch version {
	case 1:
		size = 16
	case 2:
		size = metaSizeV1
	}
	d.each(n, size, func(b []byte, _ int) {
		for j := 0; j < len(b); j += size {
			if version == 1 {
				m := nodeMeta{time: int64(binary.LittleEndian.Uint64(b[j:]))}
				m.end = m.time
				r := b[j+8:]
				m.ns, m.kind, m.typ = binary.LittleEndian.Uint32(r), Kind(r[4]), r[5]
				metas = append(metas, m)
				continue
			}
			metas = append(metas, decodeMeta(b[j:j+size]))
		}
	})
	if d.err != nil {
		return nil, d.err
	}

	// Vectors, allocating each page when its first vector arrives.
	var pages []*hnswPage
	per, dimN := 1<<h.shift, int(dim)
	d.each(n, 4*dimN, func(b []byte, first int) {
		for r := range len(b) / (4 * dimN) {
			s := first + r
			if s%per == 0 {
				pages = append(pages, h.newPage())
			}
			p, i := pages[len(pages)-1], s%per
			v := p.vecs[i*dimN : (i+1)*dimN]
			src := b[r*4*dimN : (r+1)*4*dimN]
			if littleEndian {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*dimN), src)
			} else {
				for j := range v {
					v[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
				}
			}
			p.scales[i] = quantize(v, p.codes[i*dimN:(i+1)*dimN])
			p.ids[i] = ids[s]
			p.metas[i] = metas[s]
			p.levels[i] = levels[s]
			p.state[i].Store(uint32(states[s]))
		}
	})
	if d.err != nil {
		return nil, d.err
	}
	h.dir.Store(&pages)
	h.nslots.Store(uint32(n))
	for s := range n {
		if !finite(h.vec(uint32(s))) {
			return nil, corrupt("slot %d: non-finite vector", s)
		}
	}

	// Link counts, then the links themselves.
	lists := 0
	for s := range n {
		if states[s] != uint8(stateFree) {
			lists += int(levels[s]) + 1
		}
	}
	var counts []uint32
	d.each(lists, 4, func(b []byte, _ int) {
		for j := 0; j < len(b); j += 4 {
			counts = append(counts, binary.LittleEndian.Uint32(b[j:]))
		}
	})
	if d.err != nil {
		return nil, d.err
	}
	// Set the counts, and make a cursor over the lists to fill.
	type slotList struct {
		ls   []uint32
		s, l int
	}
	targets := make([]slotList, 0, len(counts))
	links, ci := 0, 0
	for s := range n {
		if states[s] == uint8(stateFree) {
			continue
		}
		p, i := h.page(uint32(s))
		if levels[s] > 0 {
			p.upper[i] = make([]uint32, int(levels[s])*h.strideU)
		}
		for l := 0; l <= int(levels[s]); l++ {
			ls := h.list(p, i, l)
			c := counts[ci]
			ci++
			if int(c) > len(ls)-1 {
				return nil, corrupt("slot %d layer %d: %d links", s, l, c)
			}
			ls[0] = c
			links += int(c)
			if c > 0 {
				targets = append(targets, slotList{ls, s, l})
			}
		}
	}
	var bad error
	ti, tj := 0, 1
	d.each(links, 4, func(b []byte, _ int) {
		for j := 0; j < len(b) && bad == nil; j += 4 {
			t := targets[ti]
			x := binary.LittleEndian.Uint32(b[j:])
			if x >= uint32(n) || states[x] == uint8(stateFree) || int(levels[x]) < t.l {
				bad = corrupt("slot %d layer %d: bad link %d", t.s, t.l, x)
				return
			}
			t.ls[tj] = x
			if tj++; tj > int(t.ls[0]) {
				ti, tj = ti+1, 1
			}
		}
	})
	if d.err != nil {
		return nil, d.err
	}
	if bad != nil {
		return nil, bad
	}
	if err := d.checksum(""); err != nil {
		return nil, err
	}

	if top != 0 {
		ts, tl := topSlot(top), topLevel(top)
		if top>>40 != 1<<23 || ts >= uint32(n) || states[ts] == uint8(stateFree) || int(levels[ts]) != tl {
			return nil, corrupt("entry point %x", top)
		}
	}
	for s := range n {
		switch states[s] {
		case uint8(stateFree):
			h.free = append(h.free, uint32(s))
			continue
		case uint8(stateLive):
			if _, dup := h.ids[ids[s]]; dup {
				return nil, corrupt("id %d held twice", ids[s])
			}
			h.ids[ids[s]] = uint32(s)
		case uint8(stateDeleted):
			h.deleted++
		}
		if top == 0 {
			return nil, corrupt("nodes without an entry point")
		}
		h.addPostings(uint32(s), metas[s].meta())
	}
	// Keep the free list popping low slots first, as a fresh index would.
	for i, j := 0, len(h.free)-1; i < j; i, j = i+1, j-1 {
		h.free[i], h.free[j] = h.free[j], h.free[i]
	}
	h.top.Store(top)
	h.rng = rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d^uint64(n)))
	return h, nil
}
