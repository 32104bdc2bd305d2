//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockData takes the data directory dir for this process: an exclusive
// lock on dir/LOCK, held until release. A second daemon on a directory
// in use fails at once with an error saying so: before, its store's
// open failed on Badger's lock while the keyword index's waited on
// bleve's for ever, and its start hung.
func lockData(dir string) (release func(), err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another process (a running ctxgraph?)", dir)
		}
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
