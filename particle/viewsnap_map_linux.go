package particle

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappedOffHeap is true here: mapSnapshot's memory is outside Go's heap
// (edgeStage.pack relies on it).
const mappedOffHeap = true

// mapSnapshot maps size bytes of f into memory for the life of the
// process (the embeddings and strings loaded from the view snapshot
// point into it): private, so that a write to it (the store makes one
// only to mend a chunk of embeddings whose checksum fails,
// snapEdgeEmbeddings.mend) copies the page and leaves the file alone.
//
// It reads nothing ahead: the load asks for what it reads (willNeed),
// and the rest is read where it is used. A mapping's page fault reads
// ahead around it by the device's setting (8 MB on this VM's disk), so
// that decoding a chunk's records read its embeddings too, and
// populating the whole mapping up front read 1.6 GB of embeddings a 1M-
// edge store's start does not need.
func mapSnapshot(f *os.File, size int) (mem []byte, unmap func(), err error) {
	mem, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map: %w", err)
	}
	unmap = func() { syscall.Munmap(mem) }
	// (Advice is a hint: a kernel that refuses it reads as it would.)
	_ = unix.Madvise(mem, unix.MADV_RANDOM)
	return mem, unmap, nil
}

// willNeed asks the kernel to read b, part of a mapping, into the page
// cache ahead of its use (in large reads, not a page per fault).
func willNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	// madvise needs a page-aligned start.
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	aligned := start &^ (page - 1)
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, aligned, start-aligned+uintptr(len(b)), unix.MADV_WILLNEED)
}

// fileRandom tells the kernel that f is read at random: its reads read
// ahead nothing.
func fileRandom(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }

// diskFree is the space free to unprivileged users in dir's file system.
func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}

// anonMemory is n bytes of zeroed memory outside Go's heap, or nil if
// the kernel refuses them. The kernel gives a page its memory when it is
// first written, and free holds them until the mapping is released.
func anonMemory(n int) (mem []byte, free func()) {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil
	}
	return mem, func() { _ = syscall.Munmap(mem) }
}
