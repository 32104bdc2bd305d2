package rlds

import (
	"slices"
	"testing"
)

func TestHasFromEndIsContains(t *testing.T) {
	ids := []string{"0199a3b2-0001", "0199a3b2-0002", "", "0199a3b2-0012", "x"}
	for _, id := range append(slices.Clone(ids), "0199a3b2-0003", "0199a3b2-00012", "y", "2") {
		if got, want := hasFromEnd(ids, id), slices.Contains(ids, id); got != want {
			t.Errorf("hasFromEnd(%q) = %v, want %v", id, got, want)
		}
	}
	if hasFromEnd(nil, "a") || hasFromEnd(nil, "") {
		t.Error("hasFromEnd of an empty list")
	}
}
