package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// A backup file is
//
//	"ctxgraph-backup 1\n"
//	manifest JSON "\n"                          (BackupManifest)
//	frames: length u32 BE (> 0) | bytes         (particle.Store.Backup output)
//	u32 0                                       (end of frames)
//	trailer JSON "\n"                           ({"bytes": N, "sha256": hex})
//
// The trailer's digest covers every byte before it, so a truncated or
// damaged file is refused before anything is restored. The framing lets
// the daemon stream a backup (POST /v1/backup) without knowing its size.
const (
	backupMagic   = "ctxgraph-backup 1\n"
	backupFormat  = "ctxgraph-backup"
	maxFrame      = 4 << 20
	maxHeaderLine = 1 << 20
)

// BackupManifest describes a backup: when it was taken, what it holds,
// and where each stream's consumer stood.
type BackupManifest struct {
	Format    string                    `json:"format"`
	Version   int                       `json:"version"`
	CreatedAt time.Time                 `json:"created_at"`
	Prefix    string                    `json:"prefix"`
	Positions map[string]StreamPosition `json:"positions"`
	Counts    particle.Counts           `json:"counts"`
}

// StreamPosition is where a stream's consumer stood when the backup
// began: every message up to Applied was committed before the snapshot
// was read, so it is in the backup. Later ones may be too; re-consuming
// them is harmless, as the store records every applied message id.
type StreamPosition struct {
	Stream  string    `json:"stream"`
	Durable string    `json:"durable"`
	Created time.Time `json:"stream_created"`
	Applied uint64    `json:"applied"`
	LastSeq uint64    `json:"last_seq"`
}

type backupTrailer struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Backup writes a backup of the running daemon to w: the consumer
// positions, then a consistent snapshot of the store.
func (d *Daemon) Backup(ctx context.Context, w io.Writer) (*BackupManifest, error) {
	m := &BackupManifest{Format: backupFormat, Version: 1, CreatedAt: time.Now().UTC(), Prefix: d.cfg.Prefix(),
		Positions: map[string]StreamPosition{}}
	// Positions first: an ack follows its commit, so everything up to
	// the ack floor read now is in the snapshot read after.
	for _, c := range d.consumers {
		cons, err := d.js.Consumer(ctx, c.stream, c.durable)
		if err != nil {
			return nil, fmt.Errorf("backup: consumer %s: %w", c.durable, err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("backup: consumer %s: %w", c.durable, err)
		}
		st, err := d.js.Stream(ctx, c.stream)
		if err != nil {
			return nil, fmt.Errorf("backup: stream %s: %w", c.stream, err)
		}
		info := st.CachedInfo()
		m.Positions[c.stream] = StreamPosition{Stream: c.stream, Durable: c.durable, Created: info.Created,
			Applied: ci.AckFloor.Stream, LastSeq: info.State.LastSeq}
	}
	m.Counts = d.store.Counts()
	bw, err := newBackupWriter(w, m)
	if err != nil {
		return nil, err
	}
	if _, err := d.store.Backup(bw); err != nil {
		return nil, err
	}
	if err := bw.Close(); err != nil {
		return nil, err
	}
	d.log.Info("backup written", "bytes", bw.n, "steps", m.Counts.Steps, "positions", m.Positions)
	return m, nil
}

// backupWriter frames what is written to it and keeps the digest.
type backupWriter struct {
	w   *bufio.Writer
	h   hash.Hash
	n   int64
	buf []byte
}

func newBackupWriter(w io.Writer, m *BackupManifest) (*backupWriter, error) {
	bw := &backupWriter{w: bufio.NewWriterSize(w, 256<<10), h: sha256.New(), buf: make([]byte, 0, 256<<10)}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := bw.raw(append(append([]byte(backupMagic), js...), '\n')); err != nil {
		return nil, err
	}
	return bw, nil
}

func (bw *backupWriter) raw(b []byte) error {
	bw.h.Write(b)
	bw.n += int64(len(b))
	_, err := bw.w.Write(b)
	return err
}

func (bw *backupWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(bw.buf)-len(bw.buf))
		bw.buf = append(bw.buf, p[:k]...)
		p = p[k:]
		if len(bw.buf) == cap(bw.buf) {
			if err := bw.frame(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (bw *backupWriter) frame() error {
	if len(bw.buf) == 0 {
		return nil
	}
	if err := bw.raw(binary.BigEndian.AppendUint32(nil, uint32(len(bw.buf)))); err != nil {
		return err
	}
	err := bw.raw(bw.buf)
	bw.buf = bw.buf[:0]
	return err
}

// Close writes the last frame, the end marker and the trailer.
func (bw *backupWriter) Close() error {
	if err := bw.frame(); err != nil {
		return err
	}
	if err := bw.raw([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	tr, _ := json.Marshal(backupTrailer{Bytes: bw.n, SHA256: hex.EncodeToString(bw.h.Sum(nil))})
	if _, err := bw.w.Write(append(tr, '\n')); err != nil {
		return err
	}
	return bw.w.Flush()
}

// errBadBackup marks a file that is not a whole, intact backup.
var errBadBackup = errors.New("not a valid ctxgraph backup")

// backupReader reads a backup: the manifest, then the snapshot bytes
// (Read), then checks the trailer at EOF.
type backupReader struct {
	r        *bufio.Reader
	h        hash.Hash
	n        int64
	left     int // bytes left in the current frame
	done     bool
	Manifest BackupManifest
}

func newBackupReader(r io.Reader) (*backupReader, error) {
	br := &backupReader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br.r, magic); err != nil || string(magic) != backupMagic {
		return nil, fmt.Errorf("%w: no backup header", errBadBackup)
	}
	br.sum(magic)
	line, err := readLine(br.r)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", errBadBackup, err)
	}
	br.sum(line)
	if err := json.Unmarshal(bytes.TrimSuffix(line, []byte("\n")), &br.Manifest); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", errBadBackup, err)
	}
	if br.Manifest.Format != backupFormat || br.Manifest.Version != 1 {
		return nil, fmt.Errorf("%w: format %q version %d", errBadBackup, br.Manifest.Format, br.Manifest.Version)
	}
	return br, nil
}

func (br *backupReader) sum(b []byte) {
	br.h.Write(b)
	br.n += int64(len(b))
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHeaderLine {
			return nil, errors.New("line too long")
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// Read returns the snapshot bytes; at their end it checks the trailer
// and returns io.EOF only if the whole file is intact.
func (br *backupReader) Read(p []byte) (int, error) {
	if br.done {
		return 0, io.EOF
	}
	if br.left == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(br.r, hdr[:]); err != nil {
			return 0, fmt.Errorf("%w: truncated (frame header): %v", errBadBackup, err)
		}
		br.sum(hdr[:])
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			br.done = true
			return 0, br.checkTrailer()
		}
		if n > maxFrame {
			return 0, fmt.Errorf("%w: frame of %d bytes", errBadBackup, n)
		}
		br.left = int(n)
	}
	n, err := br.r.Read(p[:min(len(p), br.left)])
	br.sum(p[:n])
	br.left -= n
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return n, fmt.Errorf("%w: truncated: %v", errBadBackup, err)
	}
	return n, nil
}

func (br *backupReader) checkTrailer() error {
	line, err := readLine(br.r)
	if err != nil {
		return fmt.Errorf("%w: no trailer: %v", errBadBackup, err)
	}
	var tr backupTrailer
	if err := json.Unmarshal(bytes.TrimSuffix(line, []byte("\n")), &tr); err != nil {
		return fmt.Errorf("%w: trailer: %v", errBadBackup, err)
	}
	if got := hex.EncodeToString(br.h.Sum(nil)); tr.Bytes != br.n || tr.SHA256 != got {
		return fmt.Errorf("%w: checksum mismatch (%d bytes, sha256 %s; trailer says %d, %s)", errBadBackup, br.n, got, tr.Bytes, tr.SHA256)
	}
	if _, err := br.r.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the trailer", errBadBackup)
	}
	return io.EOF
}

// VerifyBackup reads a whole backup file and checks its digest.
func VerifyBackup(path string) (*BackupManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br, err := newBackupReader(f)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, err
	}
	return &br.Manifest, nil
}

// Restore creates the store of data directory dir from a backup file.
// The file is verified whole first. dir/graph must not exist unless
// force is set, in which case everything in dir but the JetStream log is
// moved aside into dir/pre-restore-<time>/ (derived indexes are rebuilt
// from the restored store). The backup's stream positions are left in
// dir/restore.json: the daemon's next start re-consumes, from the log
// in dir/jetstream, whatever arrived after the backup.
func Restore(path, dir string, force bool, log *slog.Logger) (*BackupManifest, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := VerifyBackup(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	graph := filepath.Join(dir, "graph")
	if _, err := os.Stat(graph); err == nil {
		if !force {
			return nil, fmt.Errorf("%s already holds a store; stop the daemon and pass --force to move it aside", graph)
		}
		aside := filepath.Join(dir, "pre-restore-"+time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Mkdir(aside, 0o755); err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Name() == "jetstream" || e.Name() == filepath.Base(aside) || strings.HasPrefix(e.Name(), "pre-restore-") {
				continue
			}
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
				return nil, err
			}
		}
		log.Info("moved the previous data aside", "to", aside)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br, err := newBackupReader(f)
	if err != nil {
		return nil, err
	}
	tmp := graph + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	if err := particle.Restore(tmp, br, log); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, graph); err != nil {
		return nil, err
	}
	js, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(restoreMarkerPath(dir), js, 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

func restoreMarkerPath(dir string) string { return filepath.Join(dir, "restore.json") }

// readRestoreMarker returns the manifest a restore left, or nil.
func readRestoreMarker(dir string) (*BackupManifest, error) {
	b, err := os.ReadFile(restoreMarkerPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m BackupManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("restore marker %s: %w", restoreMarkerPath(dir), err)
	}
	return &m, nil
}

func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/backup", d.httpBackup)
	})
}

// httpBackup streams a backup as the response body. An error after the
// first byte leaves the file without its trailer, which restore refuses.
func (d *Daemon) httpBackup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="ctxgraph-`+time.Now().UTC().Format("20060102T150405Z")+`.backup"`)
	if _, err := d.Backup(r.Context(), w); err != nil {
		d.log.Error("backup failed", "err", err)
		// Headers may be out; if not, this is a clean JSON error.
		writeError(w, err)
	}
}
