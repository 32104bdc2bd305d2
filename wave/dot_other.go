//go:build !amd64 || purego

package wave

func prefetch(*float32) {}

// dot is the kernel behind Dot; a and b must have equal, non-zero length.
func dot(a, b []float32) float32 { return dotBLAS(a, b) }
