package wave

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAppendBalancedSplitsCrowdedLeaves: a leaf holding five times the
// mean share of the sample becomes five leaves of its members, each
// holding about the mean; a leaf within maxLeafShare times the mean
// stays as it is.
func TestAppendBalancedSplitsCrowdedLeaves(t *testing.T) {
	const dim = 16
	crowded := clustered(8, 500, dim, 3)
	other := clustered(9, 100, dim, 1)
	members := append(slices.Clone(crowded), other...)
	assign := make([]int32, len(members))
	for i := range other {
		assign[len(crowded)+i] = 1
	}
	cs := make([]float32, 2*dim)
	copy(cs, crowded[0])
	copy(cs[dim:], other[0])
	leaves := appendBalanced([]float32{}, cs, assign, members, dim, 100, rand.New(rand.NewPCG(1, 2)))
	if n := len(leaves) / dim; n != 6 {
		t.Fatalf("%d leaves, want the crowded one split in 5 and the other kept", n)
	}
	if !slices.Equal(leaves[5*dim:], cs[dim:]) {
		t.Fatal("the leaf within its share changed")
	}
	counts := make([]int, 5)
	for _, v := range crowded {
		counts[nearest(leaves[:5*dim], v, dim)]++
	}
	if most := slices.Max(counts); most > maxLeafShare*100 {
		t.Fatalf("the crowded leaf's members spread %v over its parts", counts)
	}
}
