package rlds

import (
	"context"
	"io"
	"os"
	"testing"
)

// BenchmarkDecodeDataset reads and decodes the bridge_dataset train
// shard (25 episodes of 10 steps, 3.4 MB) into Episodes. Compare its
// MB/s with BenchmarkSequentialRead, which only copies the same bytes.
func BenchmarkDecodeDataset(b *testing.B) {
	ds, err := OpenDatasetOptions(DatasetOptions{Dir: samplePath("bridge_dataset/1.0.0"), Splits: []string{"train"}})
	if err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(samplePath(bridgeTrain))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	ctx := context.Background()
	steps := 0
	for b.Loop() {
		if err := ds.Episodes(ctx, func(e *Episode) error {
			steps += len(e.Steps)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkSequentialRead copies the bridge_dataset train shard to
// io.Discard: the floor for BenchmarkDecodeDataset.
func BenchmarkSequentialRead(b *testing.B) {
	path := samplePath(bridgeTrain)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
