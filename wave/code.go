package wave

import "math"

// A Code is a vector quantised to int8 with one scale: component i
// stands for Scale·Code[i]. It is the form the IVF stores and scans; a
// caller keeps codes beside float32 vectors to bound dot products with
// a quarter of the memory read (CodeBound), and computes the exact dot
// product only where the bound does not settle a comparison.

// Quantize writes the code of v into code (at least len(v) long) and
// returns its scale: max|v[i]|/127, each component rounded to the
// nearest step. A zero vector has scale 0.
func Quantize(v []float32, code []int8) float32 { return quantize(v, code) }

// CodeDot is scale times the dot product of q with code: the dot
// product of q with the vector the code stands for (len(code) must be
// len(q)).
func CodeDot(q []float32, code []int8, scale float32) float32 {
	if len(q) == 0 {
		return 0
	}
	return scale * dotI8(q, code[:len(q)])
}

// CodeBound bounds how far CodeDot(q, code, scale) may be from Dot(q, v)
// for the vector v that Quantize coded, both as computed in float32:
// each component of v is within scale/2 of its code's, so
//
//	|q·v − q·(scale·code)| ≤ ‖q‖·‖v − scale·code‖ ≤ ‖q‖·(scale/2)·√dim,
//
// plus a margin for the rounding of two float32 sums of dim products,
// each at most ‖q‖·127·scale·√dim in magnitude (1e-4 of that covers
// dim·2⁻²⁴ for dim up to 1,600, and far beyond in practice). qNorm is
// ‖q‖.
func CodeBound(qNorm float32, scale float32, dim int) float32 {
	root := float32(math.Sqrt(float64(dim)))
	return qNorm * scale * root * (0.5 + 127e-4*max(1, float32(dim)/1600))
}
