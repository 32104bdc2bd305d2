package y

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteBack starts writing f's dirty pages in [off, off+n) to the
// device (n 0: to the end of the file) and returns without waiting
// (sync_file_range, SYNC_FILE_RANGE_WRITE; the kernel visits only the
// pages marked dirty). It makes nothing durable; a sync after it does,
// waiting only for what is still in flight (ctxgraph, see CTXGRAPH.md).
func StartWriteBack(f *os.File, off, n int64) error {
	return syncFileRange(f, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// WriteBack writes f's dirty pages in [off, off+n) to the device and
// waits for them, without the sync's flush of the device's cache
// (sync_file_range, waiting before and after).
func WriteBack(f *os.File, off, n int64) error {
	return syncFileRange(f, off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

func syncFileRange(f *os.File, off, n int64, flags int) error {
	if err := unix.SyncFileRange(int(f.Fd()), off, n, flags); err != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
	}
	return nil
}
