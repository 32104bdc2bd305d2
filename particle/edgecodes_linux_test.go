package particle

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// mapped reports whether addr lies in a mapping of this process (the
// kernel joins neighbouring anonymous mappings into one).
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

// TestCodeChunksLieOutsideTheHeap: a chunk's codes are memory the kernel
// maps, not the collector's, they read back what is written, and the
// mapping goes once the chunk is unreachable.
func TestCodeChunksLieOutsideTheHeap(t *testing.T) {
	const dim, chunks = 384, 32 // 48 MiB of codes
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	held := make([]*codeChunk, chunks)
	for i := range held {
		held[i] = newCodeChunk(dim)
		codes := held[i].codes
		if len(codes) != codeChunkSeqs*dim {
			t.Fatalf("chunk %d: %d codes, want %d", i, len(codes), codeChunkSeqs*dim)
		}
		for j := 0; j < len(codes); j += 4093 {
			if codes[j] != 0 {
				t.Fatalf("chunk %d: code byte %d is %d before any write", i, j, codes[j])
			}
			codes[j] = int8(j % 127)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > chunks*codeChunkSeqs*dim/8 {
		t.Fatalf("the heap grew %d bytes for %d bytes of codes: the codes are on it", grew, chunks*codeChunkSeqs*dim)
	}
	mappings := make([]*codeMapping, chunks)
	for i, ch := range held {
		for j := 0; j < len(ch.codes); j += 4093 {
			if ch.codes[j] != int8(j%127) {
				t.Fatalf("chunk %d: code byte %d reads %d, wrote %d", i, j, ch.codes[j], j%127)
			}
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(ch.codes)))
		if ch.mapping == nil || ch.mapping.bytes != len(ch.codes) || !mapped(t, addr) {
			t.Fatalf("chunk %d: codes at %#x not in a mapping of their own (%+v)", i, addr, ch.mapping)
		}
		mappings[i] = ch.mapping
	}
	if MappedCodeBytes() < int64(chunks*codeChunkSeqs*dim) {
		t.Fatalf("MappedCodeBytes %d, under the %d held here", MappedCodeBytes(), chunks*codeChunkSeqs*dim)
	}
	held = nil
	deadline := time.Now().Add(10 * time.Second)
	for i, m := range mappings {
		for !m.released.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d's codes still mapped 10 s after the chunk became unreachable", i)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
}
