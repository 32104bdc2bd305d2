package particle

import (
	"fmt"
	"os"
	"syscall"
)

// mapSnapshot maps size bytes of f into memory for the life of the
// process (the embeddings and strings loaded from the view snapshot
// point into it):
// private, and populated up front from the page cache, which costs a
// fraction of copying into fresh heap pages (the first touch of each is
// the expensive part of a reopen on a VM). It is mapped read-only to
// populate it without copying, then made writable: a write to it, which
// the store never makes (embeddings are replaced, not changed in place;
// strings never change),
// would copy the page and leave the file alone. unmap releases it.
func mapSnapshot(f *os.File, size int) (mem []byte, unmap func(), err error) {
	mem, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map: %w", err)
	}
	unmap = func() { syscall.Munmap(mem) }
	if err := syscall.Mprotect(mem, syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
		unmap()
		return nil, nil, fmt.Errorf("map: %w", err)
	}
	return mem, unmap, nil
}

// diskFree is the space free to unprivileged users in dir's file system.
func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
