//go:build !amd64 || purego

package wave

import "unsafe"

func prefetch(*float32)                     {}
func prefetchCode(*int8)                    {}
func prefetchLine(unsafe.Pointer)           {}
func prefetchRange(unsafe.Pointer, uintptr) {}

// dot is the kernel behind Dot; a and b must have equal, non-zero length.
func dot(a, b []float32) float32 { return dotBLAS(a, b) }

// dot4 sets out to the dot products of v with the four vectors of
// len(v) floats at the start of cs, stride floats apart.
func dot4(v, cs []float32, stride int, out *[4]float32) { dot4Each(v, cs, stride, out) }

// dot2x4 sets out[j] and out[4+j] to the dot products of v0 and of v1
// with the j-th of the four vectors of len(v0) floats at the start of
// cs, stride floats apart.
func dot2x4(v0, v1, cs []float32, stride int, out *[8]float32) {
	dot2x4Each(v0, v1, cs, stride, out)
}

// dotI8 returns the dot product of q with the int8 codes c (equal,
// non-zero length).
func dotI8(q []float32, c []int8) float32 { return dotI8Generic(q, c) }

// dotQ16 returns the dot product of the quantised query q with the int8
// codes c (equal, non-zero length).
func dotQ16(q []int16, c []int8) int32 { return dotQ16Generic(q, c) }

// dotU4 returns the dot product of the int8 query q (laid out by
// quantizeQuery8) with the 4-bit code c.
func dotU4(q []int8, c []byte) int32 { return dotU4Generic(q, c) }
