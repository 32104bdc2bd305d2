//go:build !amd64 || purego

package wave

// minMax returns the least and greatest of v's values (v not empty).
func minMax(v []float32) (lo, hi float32) { return minMaxGeneric(v) }

// residualMinMax sets r to v − c (all of v's length, not empty) and
// returns the least and greatest of r's values.
func residualMinMax(v, c, r []float32) (lo, hi float32) {
	return residualGeneric(v, c[:len(v)], r[:len(v)])
}

// pack4Chunks writes the 4-bit codes of v (whole chunks of 64 values)
// to c (32 bytes a chunk), as pack4 does.
func pack4Chunks(v []float32, c []byte, lo, inv float32) { pack4ChunksGeneric(v, c, lo, inv) }

// maxAbsBits returns the largest of v's values' bits without their sign
// (v not empty).
func maxAbsBits(v []float32) uint32 { return maxAbsBitsGeneric(v) }

// quantizeCodes writes the int8 codes of v, at inv codes a unit, to c
// (as long as v), as quantize does.
func quantizeCodes(v []float32, c []int8, inv float32) { quantizeCodesGeneric(v, c[:len(v)], inv) }
