package wave

import "math"

// 4-bit codes: the IVF lists' first, memory-bound scoring pass.
//
// A vector v is coded per vector and asymmetrically: lo = min v, step =
// (max v − min v)/15, and u[i] = round((v[i] − lo)/step) in 0..15, so
// that v[i] ≈ lo + step·u[i]. For a unit vector of 384 dimensions the
// estimate of a dot product with a unit query is off by about 0.007
// (one standard deviation), against 0.0004 for int8 codes; the best
// candidates are rescored with the float32 vectors anyway, and the code
// is half the bytes, which a search streams from memory.
//
// Layout: 32 bytes per 64 dimensions (a started chunk is padded with
// zero codes); byte j of chunk c holds u[64c+j] in its low nibble and
// u[64c+32+j] in its high one, so that the kernel splits a 32-byte load
// into two runs of 32 consecutive dimensions with a shift and a mask.

// nibbleBytes is the size of the 4-bit code of a dim-dimensional vector.
func nibbleBytes(dim int) int { return (dim + 63) / 64 * 32 }

// quantize4 writes the 4-bit code of v to c (nibbleBytes(len(v)) bytes)
// and returns lo and step: v[i] ≈ lo + step·u[i].
func quantize4(v []float32, c []byte) (lo, step float32) {
	if len(v) == 0 {
		return 0, 0
	}
	lo, hi := minMax(v)
	return pack4(v, c, lo, hi)
}

// minMaxGeneric is minMax in Go.
func minMaxGeneric(v []float32) (lo, hi float32) {
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		if x < lo {
			lo = x
		}
		if x > hi {
			hi = x
		}
	}
	return lo, hi
}

// residualGeneric is residualMinMax in Go (c and r as long as v).
func residualGeneric(v, c, r []float32) (lo, hi float32) {
	lo = v[0] - c[0]
	hi = lo
	for i, x := range v {
		d := x - c[i]
		r[i] = d
		if d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}
	return lo, hi
}

// pack4 writes the 4-bit code of v, whose least and greatest values are
// lo and hi, to c (nibbleBytes(len(v)) bytes, overwritten whole) and
// returns lo and step. A whole chunk of 64 dimensions is written a byte
// at a time, both of its nibbles at once (pack4Chunks: with AVX2, 32
// bytes at once).
func pack4(v []float32, c []byte, lo, hi float32) (float32, float32) {
	c = c[:nibbleBytes(len(v))]
	if hi <= lo {
		clear(c)
		return lo, 0
	}
	step := (hi - lo) / 15
	inv := 1 / step
	whole := len(v) / 64 * 64
	pack4Chunks(v[:whole], c, lo, inv)
	c, v = c[whole/2:], v[whole:]
	if len(v) > 0 { // a started chunk, padded with zero codes
		out := c[:32:32]
		n := min(32, len(v))
		for j, x := range v[:n] {
			out[j] = code4(x, lo, inv)
		}
		clear(out[n:])
		for j, x := range v[n:] {
			out[j] |= code4(x, lo, inv) << 4
		}
	}
	return lo, step
}

// code4 is the 4-bit code of x ≥ lo. The conversion's truncation rounds.
func code4(x, lo, inv float32) byte { return byte(min(15, int32((x-lo)*inv+0.5))) }

// pack4ChunksGeneric is pack4Chunks in Go.
func pack4ChunksGeneric(v []float32, c []byte, lo, inv float32) {
	for len(v) >= 64 {
		out, low, high := c[:32:32], v[:32:32], v[32:64:64]
		for j := range out {
			out[j] = code4(low[j], lo, inv) | code4(high[j], lo, inv)<<4
		}
		c, v = c[32:], v[64:]
	}
}

// nibble returns u[i] of the 4-bit code c.
func nibble(c []byte, i int) byte {
	ch, j := i>>6, i&63
	if j < 32 {
		return c[ch*32+j] & 15
	}
	return c[ch*32+j-32] >> 4
}

// decode4 writes the vector the 4-bit code c stands for to dst.
func decode4(c []byte, lo, step float32, dst []float32) {
	for i := range dst {
		dst[i] = lo + step*float32(nibble(c, i))
	}
}

// quantizeQuery8 writes the int8 quantisation of q, laid out for dotU4
// (2·nibbleBytes(len(q)) values, zero past len(q)), to dst and returns
// the scale (q[i] ≈ scale·dst[i]) and the sum of q. The integer dot
// product with a code cannot overflow: each term is at most 15·127.
func quantizeQuery8(q []float32, dst []int8) (scale, sum float32) {
	dst = dst[:2*nibbleBytes(len(q))]
	clear(dst)
	var mb uint32
	for _, x := range q {
		mb = max(mb, math.Float32bits(x)&0x7fffffff)
		sum += x
	}
	m := math.Float32frombits(mb)
	if m == 0 {
		return 0, sum
	}
	inv := 127 / m
	for i, x := range q {
		r := x * inv
		half := math.Float32frombits(math.Float32bits(r)&0x80000000 | 0x3f000000)
		dst[i] = int8(int32(r + half))
	}
	return m / 127, sum
}

// dotU4Generic is the portable kernel behind dotU4: the dot product of
// the int8 query q (laid out by quantizeQuery8) with the 4-bit code c,
// len(q) == 2·len(c), a multiple of 64. Integer arithmetic, so it gives
// what the SIMD kernel gives, bit for bit.
func dotU4Generic(q []int8, c []byte) int32 {
	var s int32
	for ch := 0; ch < len(c); ch += 32 {
		qc := q[2*ch : 2*ch+64 : 2*ch+64]
		cc := c[ch : ch+32 : ch+32]
		for j, b := range cc {
			s += int32(b&15)*int32(qc[j]) + int32(b>>4)*int32(qc[32+j])
		}
	}
	return s
}
