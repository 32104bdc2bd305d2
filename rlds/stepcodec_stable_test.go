package rlds_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// TestFleetStepEncodingStable pins the stored bytes of 400 fleet steps
// (annotations, events with vectors, features): a faster encoder must
// write what the format did.
func TestFleetStepEncodingStable(t *testing.T) {
	h := sha256.New()
	for _, m := range mediumFleet(420) {
		if m.Step == nil {
			continue
		}
		raw, err := rlds.EncodeStep(m.Step)
		if err != nil {
			t.Fatal(err)
		}
		again, err := rlds.AppendStep([]byte{7}, m.Step)
		if err != nil {
			t.Fatal(err)
		}
		if string(again[1:]) != string(raw) {
			t.Fatalf("step %d: AppendStep and EncodeStep differ", m.Step.Index)
		}
		h.Write(raw)
	}
	if got, want := hex.EncodeToString(h.Sum(nil)[:8]), "8b63b7ba2acb1816"; got != want {
		t.Errorf("the fleet steps encode to %s, want %s", got, want)
	}
}
