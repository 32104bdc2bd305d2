package daemon

import (
	"strings"
	"testing"
)

func TestStorageValueThresholdIsValidated(t *testing.T) {
	for _, v := range []int{-1, 1<<20 + 1} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.ValueThreshold = v
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "storage.value_threshold") {
			t.Errorf("value_threshold %d validated: %v", v, err)
		}
	}
	for _, v := range []int{0, 1 << 10, 1 << 20} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.ValueThreshold = v
		if err := cfg.Validate(); err != nil {
			t.Errorf("value_threshold %d refused: %v", v, err)
		}
	}
}
