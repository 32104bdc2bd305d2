//go:build !purego

package wave

//go:noescape
func minMaxAVX2(v *float32, n int) (lo, hi float32)

//go:noescape
func residualAVX2(v, c, r *float32, n int) (lo, hi float32)

//go:noescape
func pack4AVX2(v *float32, c *byte, chunks int, lo, inv float32)

// minMax returns the least and greatest of v's values (v not empty).
func minMax(v []float32) (lo, hi float32) {
	if useAVX2 && len(v)%8 == 0 {
		return minMaxAVX2(&v[0], len(v))
	}
	return minMaxGeneric(v)
}

// residualMinMax sets r to v − c (all of v's length, not empty) and
// returns the least and greatest of r's values.
func residualMinMax(v, c, r []float32) (lo, hi float32) {
	n := len(v)
	c, r = c[:n], r[:n]
	if useAVX2 && n%8 == 0 {
		return residualAVX2(&v[0], &c[0], &r[0], n)
	}
	return residualGeneric(v, c, r)
}

// pack4Chunks writes the 4-bit codes of v (whole chunks of 64 values)
// to c (32 bytes a chunk), as pack4 does.
func pack4Chunks(v []float32, c []byte, lo, inv float32) {
	chunks := len(v) / 64
	if chunks == 0 {
		return
	}
	_ = c[chunks*32-1]
	if useAVX2 {
		pack4AVX2(&v[0], &c[0], chunks, lo, inv)
		return
	}
	pack4ChunksGeneric(v, c, lo, inv)
}

//go:noescape
func maxAbsBitsAVX2(v *float32, n int) uint32

//go:noescape
func quantizeCodesAVX2(v *float32, c *int8, n int, inv float32)

// maxAbsBits returns the largest of v's values' bits without their sign
// (v not empty).
func maxAbsBits(v []float32) uint32 {
	if useAVX2 && len(v)%8 == 0 {
		return maxAbsBitsAVX2(&v[0], len(v))
	}
	return maxAbsBitsGeneric(v)
}

// quantizeCodes writes the int8 codes of v, at inv codes a unit, to c
// (as long as v), as quantize does.
func quantizeCodes(v []float32, c []int8, inv float32) {
	c = c[:len(v)]
	whole := len(v) / 32 * 32
	if useAVX2 && whole > 0 {
		quantizeCodesAVX2(&v[0], &c[0], whole, inv)
		v, c = v[whole:], c[whole:]
	}
	quantizeCodesGeneric(v, c, inv)
}
