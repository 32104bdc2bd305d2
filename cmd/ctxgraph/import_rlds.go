package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// rldsFlags are the flags of import rlds beyond publishFlags.
type rldsFlags struct {
	publishFlags
	tenant     string
	project    string
	limit      int
	splits     []string
	skipBad    bool
	skipStored bool
}

// importRLDSCmd imports TFDS/RLDS datasets through the live ingest path.
func importRLDSCmd() *cobra.Command {
	var f rldsFlags
	cmd := &cobra.Command{
		Use:   "rlds [flags] DIR_OR_FILES...",
		Short: "Import RLDS datasets (TFDS TFRecord shards) through the live ingest path",
		Long: `rlds reads RLDS datasets as TensorFlow Datasets writes them (a version folder
with features.json, dataset_info.json and <name>-<split>.tfrecord-NNNNN-of-NNNNN
shards, or the shard files themselves) and publishes every episode to
<prefix>.rlds.<agent>.<episode> exactly as a live controller would: start,
steps, end, with Nats-Msg-Id set. Episode IDs are derived from dataset,
version, split, shard and record, so importing the same dataset twice stores
it once, and an interrupted import run again finishes the rest: episodes the
daemon already holds in full are skipped (--skip-stored), and any other is
published whole again, which dedupe makes harmless. --tenant and --project
write the episodes into that namespace (each at most 64 letters, digits, '.',
'_' and '-'); message IDs outside the default
namespace carry it, so one dataset can be imported into several.

A bad record (bad CRC, truncated file, wrong dtype) or an episode with a
message over the size limit ends the import with an error naming the file,
record and offset (or episode and step); everything before it is published.
With --skip-bad it is reported and the import goes on, and the command still
exits non-zero at the end.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return importRLDS(cmd.Context(), cmd.ErrOrStderr(), f, args)
		},
	}
	f.register(cmd)
	f.registerSteps(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.tenant, "tenant", "", "tenant of the namespace the episodes are written to (default: default)")
	fl.StringVar(&f.project, "project", "", "project of that namespace (default: default)")
	fl.IntVar(&f.limit, "limit", 0, "import at most this many episodes (the first ones, in reading order, counting those already stored); 0 = all")
	fl.StringSliceVar(&f.splits, "split", nil, "import only these splits (repeat or comma-separate); default all")
	fl.BoolVar(&f.skipBad, "skip-bad", false, "report bad records and unsendable episodes and go on, instead of stopping at the first")
	fl.BoolVar(&f.skipStored, "skip-stored", true, "ask the daemon first and skip episodes it already holds in full")
	return cmd
}

func importRLDS(ctx context.Context, stderr io.Writer, f rldsFlags, inputs []string) error {
	perMessage, err := f.steps()
	if err != nil {
		return err
	}
	o := client.ImportOptions{
		Prefix: f.prefix, Tenant: f.tenant, Project: f.project, Rate: f.rate, Limit: f.limit, Splits: f.splits,
		StepsPerMessage: perMessage,
		SkipBad:         f.skipBad, SkipStored: f.skipStored,
		OnBad:  func(err error) { fmt.Fprintln(stderr, "skipped:", err) },
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if f.retime {
		o.Retimer = &client.Retimer{}
	}
	datasets, err := client.OpenRLDS(inputs, o)
	if err != nil {
		return err
	}
	nc, js, err := client.Connect(f.natsURL, "ctxgraph-import-rlds")
	if err != nil {
		return err
	}
	defer nc.Close()

	bar := episodeBar(stderr, f.quiet, client.ExpectedEpisodes(datasets, f.limit))
	o.OnProgress = func(st client.ImportStats) {
		_ = bar.Set64(st.Episodes + st.Stored)
		bar.Describe(fmt.Sprintf("importing: %d steps, %.1f MB/s", st.Steps, mbps(st.Bytes, st.Elapsed)))
	}
	st, ierr := client.ImportRLDS(ctx, nc, js, datasets, o)
	_ = bar.Finish()
	fmt.Fprintf(stderr, "%s: published %d episodes (%d steps, %.1f MB) in %s: %.0f steps/s, %.1f MB/s; %d already stored, %d bad skipped, %d duplicates dropped by JetStream\n",
		datasetNames(datasets), st.Episodes, st.Steps, float64(st.Bytes)/1e6, st.Elapsed.Round(time.Millisecond),
		float64(st.Steps)/max(st.Elapsed.Seconds(), 1e-9), mbps(st.Bytes, st.Elapsed), st.Stored, st.Bad, st.Dups)
	if ierr != nil && ctx.Err() != nil {
		return fmt.Errorf("import interrupted (run it again to finish the rest): %w", ierr)
	}
	// What was published is durable in JetStream even when the import
	// stopped at a bad record: wait for it too, then say what is stored.
	if f.wait > 0 && len(st.Published) > 0 {
		if err := client.WaitApplied(ctx, js, f.wait, map[string]string{daemon.StreamRLDS: daemon.DurableRLDS}); err != nil {
			return joinErr(ierr, err)
		}
		missing, err := client.VerifyStored(ctx, nc, f.prefix, f.tenant, f.project, st.Published)
		if err != nil && !errors.Is(err, client.ErrNoStatus) {
			return joinErr(ierr, err)
		}
		for _, m := range missing {
			fmt.Fprintf(stderr, "not stored in full: episode %s (%d of %d steps, ended %v); see %s.dlq.%s\n",
				m.ID, m.StoredSteps, m.Steps, m.Ended, f.prefix, daemon.StreamRLDS)
		}
		if len(missing) > 0 {
			return joinErr(ierr, fmt.Errorf("%d of %d published episodes are not stored in full", len(missing), len(st.Published)))
		}
		if err == nil {
			fmt.Fprintf(stderr, "the daemon holds all %d published episodes in full\n", len(st.Published))
		}
	}
	if ierr != nil {
		return ierr
	}
	if st.Bad > 0 {
		return fmt.Errorf("%d bad records or episodes skipped", st.Bad)
	}
	return nil
}

func joinErr(first, then error) error {
	if first == nil {
		return then
	}
	return fmt.Errorf("%w (and then: %v)", first, then)
}

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

func datasetNames(datasets []*rlds.Dataset) string {
	names := make([]string, len(datasets))
	for i, ds := range datasets {
		names[i] = fmt.Sprintf("%s %s (%s)", ds.Name, ds.Version, strings.Join(ds.Splits(), ", "))
	}
	return strings.Join(names, "; ")
}

func episodeBar(w io.Writer, quiet bool, max int64) *progressbar.ProgressBar {
	if quiet {
		return progressbar.DefaultSilent(max, "importing")
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("importing"),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("ep"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}
