package y

import "testing"

// TestYielderYieldsEveryYieldEverySteps: a Yielder gives way once
// every yieldEvery steps.
func TestYielderYieldsEveryYieldEverySteps(t *testing.T) {
	var yields int
	defer func(orig func()) { gosched = orig }(gosched)
	gosched = func() { yields++ }

	var y Yielder
	for range 3*yieldEvery - 1 {
		y.Step()
	}
	if yields != 2 {
		t.Fatalf("%d steps: %d yields, want 2", 3*yieldEvery-1, yields)
	}
	y.Step()
	if yields != 3 {
		t.Fatalf("%d steps: %d yields, want 3", 3*yieldEvery, yields)
	}
}
