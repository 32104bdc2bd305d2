//go:build !purego

package wave

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2+FMA kernels (about 3x gonum's SSE kernel at 384-d).
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func dot4AVX2(v, c *float32, stride, n int, out *[4]float32)

//go:noescape
func dot2x4AVX2(v0, v1, c *float32, stride, n int, out *[8]float32)

//go:noescape
func dotI8AVX2(q *float32, c *int8, n int) float32

//go:noescape
func dotQ16AVX2(q *int16, c *int8, n int) int32

//go:noescape
func dotU4AVX2(q *int8, c *byte, chunks int) int32

//go:noescape
func prefetch(p *float32)

//go:noescape
func prefetchCode(p *int8)

// prefetchLine hints the cache line at p.
//
//go:noescape
func prefetchLine(p unsafe.Pointer)

// prefetchRange hints every cache line that the n > 0 bytes at p span,
// hinting no address outside them.
//
//go:noescape
func prefetchRange(p unsafe.Pointer, n uintptr)

// dot is the kernel behind Dot; a and b must have equal, non-zero length.
func dot(a, b []float32) float32 {
	if useAVX2 {
		return dotAVX2(&a[0], &b[0], len(a))
	}
	return dotBLAS(a, b)
}

// dot4 sets out to the dot products of v with the four vectors of
// len(v) floats at the start of cs, stride floats apart (len(cs) >=
// 3·stride + len(v); stride 0 gives one vector's product four times).
// With AVX2 and a length that is a multiple of 16, one pass reads v
// once for the four, 1.3 to 1.5 times as fast as four calls of dot
// (BenchmarkNearest); the sums are added in another order than dot's,
// so a product may differ from dot's in its last bits.
func dot4(v, cs []float32, stride int, out *[4]float32) {
	n := len(v)
	_ = cs[3*stride+n-1]
	if useAVX2 && n%16 == 0 {
		dot4AVX2(&v[0], &cs[0], stride, n, out)
		return
	}
	dot4Each(v, cs, stride, out)
}

// dot2x4 sets out[j] and out[4+j] to the dot products of v0 and of v1
// (of equal length n) with the j-th of the four vectors of n floats at
// the start of cs, stride floats apart (0: one vector). With AVX2 and n
// a multiple of 8, each centroid's values are read once for both
// vectors. A product is the same whichever vector it is paired with,
// but may differ in its last bits from dot's and dot4's.
func dot2x4(v0, v1, cs []float32, stride int, out *[8]float32) {
	n := len(v0)
	v1 = v1[:n]
	_ = cs[3*stride+n-1]
	if useAVX2 && n%8 == 0 {
		dot2x4AVX2(&v0[0], &v1[0], &cs[0], stride, n, out)
		return
	}
	dot2x4Each(v0, v1, cs, stride, out)
}

// dotI8 returns the dot product of q with the int8 codes c (equal,
// non-zero length).
func dotI8(q []float32, c []int8) float32 {
	if useAVX2 {
		return dotI8AVX2(&q[0], &c[0], len(q))
	}
	return dotI8Generic(q, c)
}

// dotQ16 returns the dot product of the quantised query q with the int8
// codes c (equal, non-zero length; see quantizeQuery for the bound on
// the length).
func dotQ16(q []int16, c []int8) int32 {
	if useAVX2 {
		return dotQ16AVX2(&q[0], &c[0], len(q))
	}
	return dotQ16Generic(q, c)
}

// dotU4 returns the dot product of the int8 query q (laid out by
// quantizeQuery8) with the 4-bit code c: len(q) == 2·len(c), a non-zero
// multiple of 64.
func dotU4(q []int8, c []byte) int32 {
	if useAVX2 {
		return dotU4AVX2(&q[0], &c[0], len(c)/32)
	}
	return dotU4Generic(q, c)
}
