package rlds

import (
	"encoding/json"
	"testing"
)

// Signatures are stored with episodes, so their form must not change:
// the dtype followed by the shape as JSON.
func TestSignatureIsDTypeAndJSONShape(t *testing.T) {
	for _, tn := range []Tensor{
		{DType: Float32, Shape: []int{7}, Data: make([]float64, 7)},
		{DType: Float32, Data: []float64{1, 2, 3}},
		{DType: Float32, Data: []float64{1}},
		{DType: Int64, Shape: []int{2, 3, 4}},
		{DType: Float32, Shape: []int{}},
		{DType: Image, Shape: []int{64, 64, 3}},
		{DType: String, Text: []string{"a"}},
	} {
		shape := tn.Shape
		if len(shape) == 0 && len(tn.Data) > 1 {
			shape = []int{len(tn.Data)}
		}
		if tn.DType == Image || tn.DType == String {
			shape = nil
		}
		js, _ := json.Marshal(shape)
		if got, want := signature(tn), string(tn.DType)+string(js); got != want {
			t.Errorf("signature(%+v) = %q, want %q", tn, got, want)
		}
	}
}
