package badger

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
// the map.

// bufWrite appends b, to be written at offset off, to what is pending,
// writing out what is pending first if b does not follow it.
func (lf *logFile) bufWrite(b []byte, off int64) {
	lf.pendMu.Lock()
	defer lf.pendMu.Unlock()
	if len(lf.pend) > 0 && lf.pendAt+int64(len(lf.pend)) != off {
		// Not contiguous: never happens (the writes append), kept safe.
		if err := lf.flushPendLocked(); err != nil {
			lf.pendErr = err
		}
	}
	if len(lf.pend) == 0 {
		lf.pendAt = off
	}
	lf.pend = append(lf.pend, b...)
	if len(lf.pend) >= pendWriteAt {
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

// flushPendLocked is flushPend with pendMu held.
func (lf *logFile) flushPendLocked() error {
	err := lf.pendErr
	lf.pendErr = nil
	if len(lf.pend) > 0 {
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

// Sync writes what is pending, then syncs the file.
func (lf *logFile) Sync() error {
	if err := lf.flushPend(); err != nil {
		return err
	}
	return lf.MmapFile.Sync()
}
