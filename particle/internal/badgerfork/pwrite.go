package badger

import (
	"fmt"

	"github.com/dgraph-io/badger/v4/y"
)

// ctxgraph's change to Badger v4.9.6 (see CTXGRAPH.md): the value log
// and the memtables' logs are written with pwrite, not by copying into
// their memory maps.
//
// On the VM ctxgraph's targets are measured on, the first touch of each
// page of a map faults (7-12 µs), and every page a sync writes back must
// be write-protected in the map, a TLB flush of the other vCPU apiece:
// together 11-14% of the busy CPU of ingest, on the serial commit path
// (BENCHMARKS.md, sixty-third round). Written with pwrite, nothing of
// the process maps the pages being written, so neither happens. Reads
// still go through the maps, which see what pwrite wrote (one page
// cache).
//
// Each write call buffers its entries and writes them in pwrites of
// about 1 MiB, the last at its end (a system call per entry was slower:
// their entries are dear under the same hypervisor), and before the
// file is synced, grown, truncated or remapped. So when a write returns,
// its bytes are in the page cache, as they were when it copied them into
// the map. A memtable's log also zeroes the header after its last entry
// with each write (zeroAfter), where Badger zeroed it through the map.
//
// With SyncWrites, Badger synced the value log before it inserted a
// commit's entries into the memtable, whose log then took them. Now the
// value log's write-back starts when its entries are written
// (startWriteBack), the memtable's log holds the entries (holdPend)
// while the memtable takes them, and the value log is synced
// (valueLog.syncWritten) before the held entries go to their file, as
// before: an entry on file never points at a value not yet durable. The
// device writes the values while the writer inserts; the sync then
// waits only for what is left, and a sync error now fails the commit
// (Badger logged it).

// bufWrite appends b, to be written at offset off, to what is pending,
// writing out what is pending first if b does not follow it.
func (lf *logFile) bufWrite(b []byte, off int64) {
	lf.pendMu.Lock()
	defer lf.pendMu.Unlock()
	if len(lf.pend) > 0 && lf.pendAt+int64(len(lf.pend)) != off {
		// Not contiguous: never happens (the writes append), kept safe.
		if lf.held {
			// What is held cannot go out first: fail the write (at
			// its flush) rather than write b where it does not go.
			if lf.pendErr == nil {
				lf.pendErr = fmt.Errorf("%s: a write at %d does not follow the held %d bytes at %d",
					lf.path, off, len(lf.pend), lf.pendAt)
			}
			return
		}
		if err := lf.flushPendLocked(); err != nil {
			lf.pendErr = err
		}
	}
	if len(lf.pend) == 0 {
		lf.pendAt = off
	}
	lf.pend = append(lf.pend, b...)
	if len(lf.pend) >= pendWriteAt && !lf.held {
		// A large batch goes out in pieces: the buffer stays small
		// and is reused, not grown into fresh memory.
		if err := lf.flushPendLocked(); err != nil {
			lf.pendErr = err
		}
	}
}

// pendWriteAt is the pending size at which a write call's buffer is
// written out before the call's end.
const pendWriteAt = 1 << 20

// flushPend writes what is pending to the file, and reports the first
// error since the last call.
func (lf *logFile) flushPend() error {
	lf.pendMu.Lock()
	defer lf.pendMu.Unlock()
	return lf.flushPendLocked()
}

// flushPendLocked is flushPend with pendMu held. While the file is
// held (holdPend) it writes nothing.
func (lf *logFile) flushPendLocked() error {
	err := lf.pendErr
	lf.pendErr = nil
	if len(lf.pend) > 0 && !lf.held {
		n := len(lf.pend)
		if lf.zeroAfter {
			// The header after the last entry reads as zeros, so that a
			// replay stops there whatever the file held before (what
			// Badger's zeroNextEntry did through the map): the next
			// write overwrites them.
			var zeros [maxHeaderSize]byte
			room := max(0, min(maxHeaderSize, len(lf.Data)-int(lf.pendAt)-n))
			lf.pend = append(lf.pend, zeros[:room]...)
		}
		if _, werr := lf.Fd.WriteAt(lf.pend, lf.pendAt); werr != nil && err == nil {
			err = werr
		}
		lf.pend = lf.pend[:0]
	}
	if cap(lf.pend) > maxPendKeep {
		lf.pend = nil // one entry larger than pendWriteAt grew it
	}
	return err
}

// maxPendKeep bounds the buffer a log file keeps between writes.
const maxPendKeep = 4 << 20

// finishPend writes what is pending and lets the buffer go: the file
// takes no more writes (a full value log; the daemon keeps every value
// log open, and a buffer kept per finished file would add up).
func (lf *logFile) finishPend() error {
	lf.pendMu.Lock()
	defer lf.pendMu.Unlock()
	err := lf.flushPendLocked()
	lf.pend = nil
	return err
}

// holdPend keeps (true) what the file's writes buffer from the file,
// until it is let go (false): a memtable's log holds its entries while
// the value log they point into is synced, so that no entry reaches the
// file before the value it points to is durable (the order Badger's
// sync of the value log before the memtable's writes kept). What is
// held is written by the next flush after it is let go.
func (lf *logFile) holdPend(hold bool) {
	lf.pendMu.Lock()
	lf.held = hold
	lf.pendMu.Unlock()
}

// startWriteBack starts the write-back of the file's dirty pages
// without waiting for it (Linux; elsewhere it does nothing), so that
// the device writes them while the writer inserts the same entries
// into its memtable; the Sync after only waits for what is left and
// flushes the device's cache.
func (lf *logFile) startWriteBack() error {
	if err := lf.flushPend(); err != nil {
		return err
	}
	return y.StartWriteBack(lf.Fd, 0, 0)
}

// Sync writes what is pending, then syncs the file.
func (lf *logFile) Sync() error {
	if err := lf.flushPend(); err != nil {
		return err
	}
	return lf.MmapFile.Sync()
}
