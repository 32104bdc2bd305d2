//go:build !purego

package wave

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2+FMA kernel (about 3x gonum's SSE kernel at 384-d).
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func prefetch(p *float32)

// dot is the kernel behind Dot; a and b must have equal, non-zero length.
func dot(a, b []float32) float32 {
	if useAVX2 {
		return dotAVX2(&a[0], &b[0], len(a))
	}
	return dotBLAS(a, b)
}
