package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/gzip"

	"github.com/ctxgraph/ctxgraph/planner"
)

// ErrInvalid marks a bad option or a workload that does not fit the run.
var ErrInvalid = errors.New("bench: invalid")

// Names of the files of a workload directory.
const (
	ManifestFile = "manifest.json"
	MessagesFile = "messages.jsonl.gz"
	SpansFile    = "spans.jsonl.gz"
	QueriesFile  = "queries.jsonl.gz"
)

// FormatVersion is the version of the workload files; a run refuses
// files of another version.
const FormatVersion = 1

// Manifest describes a generated workload (manifest.json).
type Manifest struct {
	Version int    `json:"version"`
	Preset  Preset `json:"preset"`
	Seed    uint64 `json:"seed"`
	Dims    int    `json:"dims"`
	// Counts of what the files hold.
	Messages int `json:"messages"`
	Steps    int `json:"steps"`
	Events   int `json:"events"`
	Spans    int `json:"spans"`
	Queries  int `json:"queries"`
	// FleetStart and FleetEnd bound the workload's timestamps.
	FleetStart string `json:"fleet_start"`
	FleetEnd   string `json:"fleet_end"`
	// GenSeconds is how long generation took.
	GenSeconds float64 `json:"gen_seconds"`
}

// Query is one line of queries.jsonl.gz: a planner request and the
// exact top-k event edges it should find, best first.
type Query struct {
	ID      int             `json:"id"`
	Request planner.Request `json:"request"`
	// Admitted is the fraction of the workload's events the request's
	// filters admit (roles, confidence, time window, location, agent).
	Admitted float64 `json:"admitted"`
	Truth    []Truth `json:"truth"`
}

// Truth is one ground-truth hit: an event edge, named by its subject and
// object (unique per workload), and its cosine to the query.
type Truth struct {
	Subject string  `json:"subject"`
	Object  string  `json:"object"`
	Score   float32 `json:"score"`
}

// writer is a gzipped JSONL file being written.
type writer struct {
	f  *os.File
	gz *gzip.Writer
	bw *bufio.Writer
	n  int
}

func createJSONL(path string) (*writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	return &writer{f: f, gz: gz, bw: bufio.NewWriterSize(gz, 1<<20)}, nil
}

// line writes one line (b must not hold a newline).
func (w *writer) line(b []byte) error {
	w.n++
	w.bw.Write(b)
	return w.bw.WriteByte('\n')
}

func (w *writer) json(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.line(b)
}

func (w *writer) close() error {
	return errors.Join(w.bw.Flush(), w.gz.Close(), w.f.Close())
}

// readJSONL calls fn with each line of a gzipped JSONL file (the slice is
// reused: copy what you keep).
func readJSONL(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	br := bufio.NewReaderSize(gz, 1<<20)
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it.
			long := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if len(b) > 0 && b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
		}
		if len(b) > 0 {
			if ferr := fn(b); ferr != nil {
				return fmt.Errorf("%s:%d: %w", path, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// ReadManifest reads dir's manifest and checks its version.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, ManifestFile, err)
	}
	if m.Version != FormatVersion {
		return nil, fmt.Errorf("%w: %s is format %d, this ctxgraph reads %d (generate it again)", ErrInvalid, dir, m.Version, FormatVersion)
	}
	return &m, nil
}

// ReadQueries reads dir's queries.
func ReadQueries(dir string) ([]Query, error) {
	var qs []Query
	err := readJSONL(filepath.Join(dir, QueriesFile), func(b []byte) error {
		var q Query
		if err := json.Unmarshal(b, &q); err != nil {
			return err
		}
		qs = append(qs, q)
		return nil
	})
	return qs, err
}
