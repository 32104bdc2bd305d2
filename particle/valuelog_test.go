package particle_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestValueLogFilesStayUnderTheirSize: with ValueLogFileSize set,
// Badger starts a new value-log file once one passes it, so the newest
// file, which every Open reads whole, holds at most that plus the write
// that crossed it; and a store spread over many files reopens whole.
func TestValueLogFilesStayUnderTheirSize(t *testing.T) {
	const (
		fileSize  = 1 << 20
		stepBytes = 4 << 10
		perBatch  = 16 // 64 KiB a batch
		batches   = 64 // 4 MiB in all
	)
	dir := t.TempDir()
	o := particle.DefaultOptions(dir)
	o.SyncWrites = false
	o.ValueLogFileSize = fileSize
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	step := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, stepBytes) }
	for n := range batches {
		if _, err := s.Update(context.Background(), func(b *particle.Batch) error {
			for i := n * perBatch; i < (n+1)*perBatch; i++ {
				if err := b.PutNewStep(particle.DefaultNamespace, "ep", i, step(i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var largest int64
	full := 0
	for _, p := range logs {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, st.Size())
		if st.Size() >= fileSize {
			full++
		}
	}
	// 4 MiB of steps: three files filled, the fourth being filled.
	if full < 3 {
		t.Errorf("%d value-log files of %d bytes or more for 4 MiB, want at least 3", full, fileSize)
	}
	if limit := int64(fileSize + 2*perBatch*stepBytes); largest > limit {
		t.Errorf("largest value-log file %d bytes, want at most %d (the size plus a batch or two)", largest, limit)
	}

	s, err = particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := 0
	if err := s.Steps(particle.DefaultNamespace, "ep", func(idx int, raw []byte) error {
		if !bytes.Equal(raw, step(idx)) {
			t.Errorf("step %d reads back %d bytes of %d", idx, len(raw), raw[0])
		}
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != batches*perBatch {
		t.Errorf("reopened store holds %d steps, want %d", seen, batches*perBatch)
	}
}

// TestValueLogFileSizeIsValidated: sizes Badger refuses are refused at
// Open with the option's name; 0 keeps Badger's default.
func TestValueLogFileSizeIsValidated(t *testing.T) {
	checkOptionRefused(t, "ValueLogFileSize", func(o *particle.Options, v int64) { o.ValueLogFileSize = v }, -1, 1<<20-1, 2<<30)
	o := particle.DefaultOptions(t.TempDir())
	o.ValueLogFileSize = 0
	s, err := particle.Open(o)
	if err != nil {
		t.Fatalf("ValueLogFileSize 0: %v", err)
	}
	s.Close()
}
