package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/backupfile"
	"github.com/ctxgraph/ctxgraph/particle"
)

// backupFormat names the manifest of a ctxgraph backup file (the file
// format itself is package backupfile's).
const backupFormat = "ctxgraph-backup"

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
	bw, err := backupfile.NewWriter(w, m)
	if err != nil {
		return nil, err
	}
	if _, err := d.store.Backup(bw); err != nil {
		return nil, err
	}
	if err := bw.Close(); err != nil {
		return nil, err
	}
	d.log.Info("backup written", "bytes", bw.Bytes(), "steps", m.Counts.Steps, "positions", m.Positions)
	return m, nil
}

// errBadBackup marks a file that is not a whole, intact backup.
var errBadBackup = backupfile.ErrBad

// openBackup reads the manifest of the backup on r and returns the
// reader of its snapshot.
func openBackup(r io.Reader) (*backupfile.Reader, *BackupManifest, error) {
	br, err := backupfile.NewReader(r)
	if err != nil {
		return nil, nil, err
	}
	var m BackupManifest
	if err := br.Manifest(&m); err != nil {
		return nil, nil, err
	}
	if m.Format != backupFormat || m.Version != 1 {
		return nil, nil, fmt.Errorf("%w: manifest format %q version %d", errBadBackup, m.Format, m.Version)
	}
	return br, &m, nil
}

// VerifyBackup reads a whole backup file and checks its digest.
func VerifyBackup(path string) (*BackupManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br, m, err := openBackup(f)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, err
	}
	return m, nil
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
	br, _, err := openBackup(f)
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
