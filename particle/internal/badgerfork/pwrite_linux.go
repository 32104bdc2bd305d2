package badger

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteBack starts writing f's dirty pages to the device and
// returns without waiting (sync_file_range, SYNC_FILE_RANGE_WRITE, over
// the whole file: the kernel visits only the pages marked dirty). It
// makes nothing durable; a sync after it does, waiting only for what is
// still in flight.
func startWriteBack(f *os.File) error {
	if err := unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
	}
	return nil
}
