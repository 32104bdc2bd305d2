package particle

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
	"unsafe"
)

// The primitives of the binary value format (codecv2.go): little-endian
// fixed-width floats, varints for integers and lengths, length-prefixed
// strings, and a "count plus one" prefix for slices, maps and pointers so
// that nil and empty stay apart.

// wr appends a binary value. The first error (of a time that will not
// encode) sticks in err. Encoders keep their wr on the stack: appending
// to a heap one costs a write barrier per field while the GC runs.
type wr struct {
	b   []byte
	err error
}

// The primitives append to w.b itself (w.b = append(w.b, ...)), which
// rewrites only its length unless it grows: assigning w.b a slice a
// helper returned (binary.AppendUvarint) stores its pointer each time,
// a write barrier while the GC runs. They write what encoding/binary's
// AppendUvarint, AppendVarint and LittleEndian.AppendUint64 write.

func (w *wr) u8(v byte) { w.b = append(w.b, v) }

func (w *wr) uvar(v uint64) {
	for v >= 0x80 {
		w.b = append(w.b, byte(v)|0x80)
		v >>= 7
	}
	w.b = append(w.b, byte(v))
}

// ivar writes v zig-zag encoded.
func (w *wr) ivar(v int64) {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	w.uvar(u)
}

func (w *wr) f64(v float64) {
	u := math.Float64bits(v)
	w.b = append(w.b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
}

func (w *wr) str(s string)   { w.uvar(uint64(len(s))); w.b = append(w.b, s...) }
func (w *wr) present(p bool) { w.boolean(p) }

func (w *wr) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// count writes the length of a slice or map, 0 for nil.
func (w *wr) count(isNil bool, n int) {
	if isNil {
		w.uvar(0)
		return
	}
	w.uvar(uint64(n) + 1)
}

func (w *wr) strs(ss []string) {
	w.count(ss == nil, len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

// strMap writes m with its keys sorted, so equal maps encode alike.
func (w *wr) strMap(m map[string]string) {
	w.count(m == nil, len(m))
	if len(m) == 0 {
		return
	}
	var buf [8]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

func (w *wr) floats(v []float32) {
	w.count(v == nil, len(v))
	w.b = appendFloats(w.b, v)
}

// appendFloats appends v's floats to b, little-endian.
func appendFloats(b []byte, v []float32) []byte {
	if littleEndian && len(v) > 0 {
		return append(b, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// readFloats fills out with the little-endian floats at the start of b,
// which holds at least 4*len(out) bytes.
func readFloats(out []float32, b []byte) {
	if littleEndian && len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*len(out)), b)
		return
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// littleEndian is true where float32s are laid out in memory as the
// format stores them, so that embeddings are copied, not converted.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Time tags: the zero time, a UTC instant (seconds and nanoseconds), or
// any other location as time.Time's own binary form.
const (
	timeZero byte = 0
	timeUTC  byte = 1
	timeZone byte = 2
)

func (w *wr) time(t time.Time) {
	switch {
	case t.IsZero() && t.Location() == time.UTC:
		w.u8(timeZero)
	case t.Location() == time.UTC:
		w.u8(timeUTC)
		w.ivar(t.Unix())
		w.uvar(uint64(t.Nanosecond()))
	default:
		raw, err := t.MarshalBinary()
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("encode time: %w", err)
			}
			return
		}
		w.u8(timeZone)
		w.uvar(uint64(len(raw)))
		w.b = append(w.b, raw...)
	}
}

// rd reads a binary value. The first error sticks and every later read
// returns a zero value; done reports it, wrapped in ErrCorrupt.
//
// Strings are cut from one copy of the value's bytes (s, which begins at
// b[base]), so a value's strings cost one allocation between them.
type rd struct {
	b    []byte
	s    string
	base int
	off  int
	err  error
}

func (r *rd) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d of %d", ErrCorrupt, what, r.off, len(r.b))
	}
}

// done reports the first error, or trailing bytes after the value.
func (r *rd) done() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}

// strings makes the string copy of everything from the current offset;
// inPlace, the strings alias b instead, which must then never change
// and outlive them (the view snapshot's mapping).
func (r *rd) strings(inPlace bool) {
	r.base = r.off
	if inPlace && r.off < len(r.b) {
		r.s = unsafe.String(&r.b[r.off], len(r.b)-r.off)
		return
	}
	r.s = string(r.b[r.off:])
}

func (r *rd) u8() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("truncated")
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *rd) uvar() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.off += n
	return v
}

// uvarint is binary.Uvarint, faster where b holds 8 bytes or more and
// the varint fits in them (every length and time a value holds): one
// load, the end found by its bit, the 7-bit groups gathered by shifts.
// A reopen decodes a dozen varints per edge.
func uvarint(b []byte) (uint64, int) {
	if len(b) < 8 {
		return binary.Uvarint(b)
	}
	x := binary.LittleEndian.Uint64(b)
	if x&0x80 == 0 {
		return x & 0x7f, 1
	}
	ends := ^x & 0x8080808080808080 // the last byte's high bit is clear
	if ends == 0 {
		return binary.Uvarint(b)
	}
	n := bits.TrailingZeros64(ends)/8 + 1
	x &= ends ^ (ends - 1) // the varint's bytes only
	v := x&0x7f | x>>1&(0x7f<<7) | x>>2&(0x7f<<14) | x>>3&(0x7f<<21) |
		x>>4&(0x7f<<28) | x>>5&(0x7f<<35) | x>>6&(0x7f<<42) | x>>7&(0x7f<<49)
	return v, n
}

// ivar reads a zig-zag varint (binary.AppendVarint).
func (r *rd) ivar() int64 {
	u := r.uvar()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *rd) integer() int {
	v := r.ivar()
	if int64(int(v)) != v {
		r.fail("integer out of range")
		return 0
	}
	return int(v)
}

func (r *rd) f64() float64 {
	if r.err != nil || len(r.b)-r.off < 8 {
		r.fail("truncated float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

func (r *rd) boolean() bool {
	switch r.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad bool")
	return false
}

func (r *rd) present() bool { return r.boolean() }

// span returns the next n bytes' offset, checked against the value.
func (r *rd) span(n uint64) (int, bool) {
	if r.err != nil {
		return 0, false
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("length past the end")
		return 0, false
	}
	at := r.off
	r.off += int(n)
	return at, true
}

func (r *rd) str() string {
	n := r.uvar()
	at, ok := r.span(n)
	if !ok || n == 0 {
		return ""
	}
	if at < r.base || r.s == "" {
		return string(r.b[at : at+int(n)])
	}
	return r.s[at-r.base : at-r.base+int(n)]
}

// count reads a slice or map length; nil reports a nil one. Each element
// takes at least min bytes, which bounds what a damaged length allocates.
func (r *rd) count(min int) (n int, isNil bool) {
	v := r.uvar()
	if r.err != nil || v == 0 {
		return 0, true
	}
	v--
	if v > uint64(len(r.b)-r.off)/uint64(min) {
		r.fail("count past the end")
		return 0, true
	}
	return int(v), false
}

func (r *rd) strs() []string {
	n, isNil := r.count(1)
	if isNil {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out
}

func (r *rd) strMap() map[string]string {
	n, isNil := r.count(2)
	if isNil {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

func (r *rd) floats() []float32 {
	n, isNil := r.count(4)
	if isNil {
		return nil
	}
	out := make([]float32, n)
	at, _ := r.span(uint64(4 * n))
	if r.err != nil {
		return nil
	}
	readFloats(out, r.b[at:])
	return out
}

func (r *rd) time() time.Time {
	switch r.u8() {
	case timeZero:
		return time.Time{}
	case timeUTC:
		sec := r.ivar()
		nsec := r.uvar()
		if nsec >= 1e9 {
			r.fail("nanoseconds out of range")
			return time.Time{}
		}
		if r.err != nil {
			return time.Time{}
		}
		t := time.Unix(sec, int64(nsec)).UTC()
		if t.IsZero() {
			r.fail("zero time tagged UTC") // the zero time has its own tag
			return time.Time{}
		}
		return t
	case timeZone:
		n := r.uvar()
		at, ok := r.span(n)
		if !ok {
			return time.Time{}
		}
		var t time.Time
		if err := t.UnmarshalBinary(r.b[at : at+int(n)]); err != nil {
			r.fail("time: " + err.Error())
			return time.Time{}
		}
		return t
	}
	r.fail("bad time tag")
	return time.Time{}
}
