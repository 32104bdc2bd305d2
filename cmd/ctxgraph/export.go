package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
)

func init() { extraCommands = append(extraCommands, exportCmd) }

// exportFlags are the flags of ctxgraph export.
type exportFlags struct {
	httpURL     string
	table       string
	format      string
	out         string
	agent       string
	episodes    []string
	since       string
	until       string
	minSalience float64
	roles       []string
	rowsPerFile int64
	batchRows   int
	tenant      string
	project     string
	fps         float64
	quiet       bool
}

// exportCmd streams a table from the daemon (GET /v1/export as an Arrow
// IPC stream) and writes it locally in the asked format.
func exportCmd() *cobra.Command {
	var ef exportFlags
	cmd := &cobra.Command{
		Use:   "export --table steps|episodes|nodes|edges --format arrow|arrow-stream|parquet|lerobot --out PATH",
		Short: "Export steps, episodes, nodes or edges for training: Arrow IPC, Parquet or a LeRobot dataset",
		Long: `export streams one table from the daemon's consistent snapshot (GET /v1/export, an
Arrow IPC stream, while ingest goes on) and writes it to --out:

  arrow         an Arrow IPC file (.arrow)
  arrow-stream  an Arrow IPC stream (.arrows)
  parquet       Parquet, zstd-compressed (.parquet)
  lerobot       a LeRobot v2.1 dataset directory (steps only): data/chunk-NNN/episode_NNNNNN.parquet,
                meta/info.json, meta/episodes.jsonl, meta/tasks.jsonl, meta/episodes_stats.jsonl

--rows-per-file N cuts arrow, arrow-stream and parquet output into files of N rows
(PATH-00000.ext, PATH-00001.ext, ...). --role applies policy exactly as the planner
does: the export never holds what the role is denied. Times are RFC 3339, a date
(2026-01-02) or a duration before now (24h). The README's "Export" section documents
every column.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExport(cmd.Context(), cmd.ErrOrStderr(), ef)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ef.httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	f.StringVar(&ef.table, "table", "steps", "steps, episodes, nodes or edges")
	f.StringVar(&ef.format, "format", "parquet", "arrow, arrow-stream, parquet or lerobot")
	f.StringVar(&ef.out, "out", "", "output file, or directory for lerobot (default: TABLE.EXT in the current directory)")
	f.StringVar(&ef.agent, "agent", "", "only this agent's episodes, steps and what they observed")
	f.StringSliceVar(&ef.episodes, "episode", nil, "only these episode ids (repeatable, or comma-separated)")
	f.StringVar(&ef.since, "since", "", "only what happened at or after this time")
	f.StringVar(&ef.until, "until", "", "only what happened at or before this time")
	f.Float64Var(&ef.minSalience, "min-salience", 0, "only edges whose salience, decayed to now, is at least this (0..1)")
	f.StringSliceVar(&ef.roles, "role", nil, "export as this role (repeatable): what it is denied is left out")
	f.Int64Var(&ef.rowsPerFile, "rows-per-file", 0, "at most this many rows per file (0 = one file)")
	f.IntVar(&ef.batchRows, "batch-rows", 0, "rows per record batch (default 4096)")
	f.StringVar(&ef.tenant, "tenant", "", "tenant of the namespace (default: default)")
	f.StringVar(&ef.project, "project", "", "project of the namespace (default: default)")
	f.Float64Var(&ef.fps, "fps", 0, "lerobot: frame rate (0 = from the median step interval)")
	f.BoolVar(&ef.quiet, "quiet", false, "no progress bar")
	return cmd
}

// options turns the flags into export options and checks them.
func (ef exportFlags) options() (arrowexport.Options, arrowexport.Format, error) {
	o := arrowexport.Options{Table: arrowexport.Table(ef.table), BatchRows: ef.batchRows}
	o.Filter.Agent, o.Filter.Episodes, o.Filter.MinSalience = ef.agent, ef.episodes, ef.minSalience
	o.Filter.Principal.Roles = ef.roles
	var errs []error
	for _, t := range []struct {
		flag, val string
		dst       *time.Time
	}{{"--since", ef.since, &o.Filter.Since}, {"--until", ef.until, &o.Filter.Until}} {
		if t.val == "" {
			continue
		}
		v, err := arrowexport.ParseTime(t.val)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.flag, err))
		}
		*t.dst = v
	}
	f := arrowexport.Format(ef.format)
	switch {
	case f == arrowexport.FormatLeRobot && o.Table != arrowexport.TableSteps:
		errs = append(errs, fmt.Errorf("--format lerobot holds steps, not %s", ef.table))
	case f != arrowexport.FormatLeRobot:
		if _, err := arrowexport.NewWriter(f, io.Discard); err != nil {
			errs = append(errs, err)
		}
	}
	if ef.rowsPerFile < 0 {
		errs = append(errs, errors.New("--rows-per-file must not be negative"))
	}
	if _, err := arrowexport.ParseQuery(o.Query()); err != nil {
		errs = append(errs, err)
	}
	return o, f, errors.Join(errs...)
}

func runExport(ctx context.Context, stderr io.Writer, ef exportFlags) error {
	o, f, err := ef.options()
	if err != nil {
		return err
	}
	out := ef.out
	if out == "" {
		out = ef.table + f.Ext()
	}
	q := o.Query()
	q.Set("format", string(arrowexport.FormatArrowStream))
	if ef.tenant != "" {
		q.Set("tenant", ef.tenant)
	}
	if ef.project != "" {
		q.Set("project", ef.project)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(ef.httpURL, "/")+"/v1/export?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb daemon.ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
			return fmt.Errorf("export: %s: %s", resp.Status, eb.Error.Message)
		}
		return fmt.Errorf("export: %s: %s", resp.Status, b)
	}
	estimate, err := strconv.ParseInt(resp.Header.Get(daemon.HeaderExportEstimate), 10, 64)
	if err != nil || estimate < 0 {
		estimate = -1
	}
	bar := exportBar(stderr, ef.quiet, estimate)

	var w interface {
		arrowexport.RecordWriter
		Close() error
	}
	var files func() []string
	if f == arrowexport.FormatLeRobot {
		lw := &arrowexport.LeRobotWriter{Dir: out, FPS: ef.fps}
		w, files = lw, func() []string { return []string{out + string(filepath.Separator)} }
	} else {
		sw := &arrowexport.SplitWriter{Format: f, Path: out, RowsPerFile: ef.rowsPerFile}
		w, files = sw, func() []string { return sw.Files }
	}
	body := &countingReader{r: resp.Body}
	st, err := arrowexport.Copy(ctx, body, w, func(rows int64) { _ = bar.Set64(rows) })
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// The trailer comes after the stream's end marker.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if got := resp.Trailer.Get(daemon.HeaderExportRows); got != strconv.FormatInt(st.Rows, 10) {
		return fmt.Errorf("export: incomplete: read %d rows, the daemon reports %q", st.Rows, got)
	}
	_ = bar.Finish()
	took := time.Since(start)
	fmt.Fprintf(stderr, "exported %d %s rows in %d batches (%.1f MB streamed) to %s in %s (%.0f rows/s)\n",
		st.Rows, ef.table, st.Batches, float64(body.n)/1e6, strings.Join(files(), ", "), took.Round(time.Millisecond),
		float64(st.Rows)/max(took.Seconds(), 1e-9))
	return nil
}

func exportBar(w io.Writer, quiet bool, max int64) *progressbar.ProgressBar {
	if quiet {
		return progressbar.DefaultSilent(max, "exporting")
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("exporting"),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
