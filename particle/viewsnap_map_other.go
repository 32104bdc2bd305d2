//go:build !linux

package particle

import (
	"io"
	"os"
)

// mappedOffHeap is false here: mapSnapshot reads the snapshot into the
// heap, so a loaded edge's strings need the collector to keep them.
const mappedOffHeap = false

// mapSnapshot reads size bytes of f into the heap (elsewhere than
// Linux, where it maps them).
func mapSnapshot(f *os.File, size int) (mem []byte, unmap func(), err error) {
	mem = make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), mem); err != nil {
		return nil, nil, err
	}
	return mem, func() {}, nil
}

// willNeed does nothing here: the snapshot is in the heap.
func willNeed([]byte) {}

// fileRandom does nothing here.
func fileRandom(*os.File) {}

// diskFree is unknown here: the snapshot is kept whatever the disk holds.
func diskFree(string) (uint64, bool) { return 0, false }

// anonMemory is nil here: memory comes from the heap.
func anonMemory(int) ([]byte, func()) { return nil, nil }
