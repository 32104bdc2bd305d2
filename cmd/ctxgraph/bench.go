package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/bench"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

func init() { extraCommands = append(extraCommands, benchCmd) }

// benchCmd groups the workload generator and the measuring run.
func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Generate a fleet workload and measure ctxgraph on it against the targets",
		Long: `bench gen writes a deterministic fleet workload: robots, episodes, annotated
steps whose events carry clustered 384-d embeddings, CMS spans, and planner
queries with their exact ground truth.

bench run loads a workload through the real ingest path into a daemon it
starts on a fresh temporary directory, asks the planner every query
in-process and over NATS, beside the exact brute-force baseline, reopens
the store, and prints a table of every figure against the design's
targets (--json writes them all by name).

bench compare puts the JSON of several runs side by side: the median of
each group of runs and its range, and each group's change from the first.`,
	}
	cmd.AddCommand(benchGenCmd(), benchRunCmd(), benchCompareCmd())
	return cmd
}

func benchGenCmd() *cobra.Command {
	var (
		preset string
		seed   uint64
		out    string
	)
	cmd := &cobra.Command{
		Use:   "gen --preset micro|small|medium|large --out DIR",
		Short: "Write a deterministic fleet workload (the same preset and seed give the same files)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := bench.PresetNamed(preset)
			if err != nil {
				return err
			}
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			m, err := bench.Generate(bench.GenOptions{Preset: p, Seed: seed, Out: out})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d messages (%d steps, %d events with embeddings), %d spans, %d queries in %.1fs\n",
				out, m.Messages, m.Steps, m.Events, m.Spans, m.Queries, m.GenSeconds)
			return nil
		},
	}
	cmd.Flags().StringVar(&preset, "preset", "small", "workload size: micro, small (≈20k edges), medium (≈200k), large (≈1M)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the files to")
	return cmd
}

func benchRunCmd() *cobra.Command {
	var (
		o        bench.RunOptions
		config   string
		jsonPath string
		logLevel string

		memLimitGiB, maxRSSGiB float64
		restart                bool
	)
	cmd := &cobra.Command{
		Use:   "run --preset micro|small|medium|large",
		Short: "Measure ingest, visibility, the planner, recall, reopen, memory and disk on a workload",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config != "" {
				c, err := daemon.LoadConfig(config)
				if err != nil {
					return err
				}
				o.Config = &c
			}
			log, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			o.Log, o.Out = log, cmd.ErrOrStderr()
			o.MemoryLimit, o.MaxRSS = int64(memLimitGiB*(1<<30)), int64(maxRSSGiB*(1<<30))
			if restart {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--restart-process: %w", err)
				}
				o.Serve = []string{exe, "serve"}
			}
			rep, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			rep.WriteTable(cmd.OutOrStdout())
			if jsonPath == "" {
				return nil
			}
			f, err := os.Create(jsonPath)
			if err != nil {
				return err
			}
			if err := rep.WriteJSON(f); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Preset, "preset", "small", "workload size: micro, small, medium, large")
	f.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	f.StringVar(&o.Dir, "dir", "", "workload directory (generated there if missing; default a temp dir per preset and seed, reused)")
	f.StringVar(&o.Data, "data", "", "daemon data directory, must not exist (default a temp dir, removed after)")
	f.StringVar(&config, "config", "", "daemon configuration file (default: the built-in defaults, durable sync writes)")
	f.StringVar(&jsonPath, "json", "", "write every figure by name to this JSON file")
	f.StringVar(&o.NATS, "nats", "", "measure a running daemon at this NATS URL instead of starting one")
	f.StringVar(&o.HTTP, "http", "", "that daemon's HTTP address (visibility and counts)")
	f.IntSliceVar(&o.Threads, "threads", []int{1, 2}, "planner client threads to measure")
	f.IntVar(&o.Queries, "queries", 0, "ask only the first N workload queries (0: all)")
	f.IntVar(&o.ExactQueries, "exact-queries", 50, "queries per configuration for the exact baseline planner (-1: all)")
	f.BoolVar(&o.ExactThreads, "exact-threads", false, "measure the exact baseline on every --threads count, not only one")
	f.Float64Var(&o.VisibilityRate, "visibility-rate", 0, "steps/s of the paced phase (0: min(20000, half the bulk rate))")
	f.Float64Var(&o.VisibilityShare, "visibility-share", bench.DefaultVisibilityShare, "share of the steps sent in the paced phase, between 0 and 1 (a larger share times a longer stretch of steady ingest)")
	f.Float64Var(&o.MixedShare, "mixed-share", bench.DefaultMixedShare, "share of the steps sent in the mixed phase, between the bulk and the paced ones, at the paced rate with the planner asked beside them (in-process daemon; negative: none)")
	f.StringVar(&o.Wire, "wire", bench.WireJSON, "wire format of the episodes and CMS spans sent: json or msgpack (the workload's JSON written as MessagePack before the run)")
	f.IntVar(&o.StepsPerMessage, "steps-per-message", 1, "send the bulk phase's steps up to this many of an episode a message (kind steps), as an upload would; the mixed and paced phases send one step a message, as a live controller does")
	f.StringSliceVar(&o.Phases, "phases", []string{"planner", "reopen"}, "phases after the load, which with an in-process daemon a transport baseline (JetStream alone) precedes: planner, reopen (none: --phases=\"\")")
	f.StringVar(&o.CallsDir, "calls", "", fmt.Sprintf("write every timed planner call (query index, latency, stage times, the index search's lists scanned, items scored, candidates asked about and candidates rescored, whether the query is far: its exact 10th best hit scores below %g) of each configuration to DIR/CONFIG.jsonl (the in-process one-thread configurations' second pass to DIR/CONFIG.second_pass.jsonl), and each query of the recall pass (its recall@10, constraints, far or not, both top 10s and what each missed hit is) to DIR/recall.jsonl", bench.FarScore))
	f.StringVar(&o.ProfileDir, "profile", "", "write a CPU profile of each phase (transport, ingest, planner, reopen) to this directory, and after each the allocations so far (PHASE.allocs.pprof; diff two with pprof -base); with the daemon in process, also execution traces of the bulk and paced phases (ingest.bulk.trace, ingest.paced.trace, for go tool trace), from which the run reports how the graph writer spent each stage: on a CPU, waiting for one, in system calls, blocked")
	f.Float64Var(&memLimitGiB, "memory-limit-gib", 0, "Go memory limit of the run, GiB (the daemon runs in-process; 0: none)")
	f.Float64Var(&maxRSSGiB, "max-rss-gib", 0, "stop the run once its resident memory passes this many GiB (0: never)")
	f.StringVar(&logLevel, "log-level", "error", "daemon log level")
	f.BoolVar(&restart, "restart-process", true, "after the reopen phase, stop the daemon and time a \"ctxgraph serve\" of its data directory, a process of its own as a restart is, until its first planner answer over NATS (reopen.process_s)")
	return cmd
}

func benchCompareCmd() *cobra.Command {
	var figures []string
	cmd := &cobra.Command{
		Use:   "compare [--figures NAMES] [LABEL=]RUN.json ...",
		Short: "Compare bench runs: each group's median and range of every figure, and its change from the first group",
		Long: `compare reads the files bench run --json wrote and prints a Markdown table
with a column per group of runs: runs given as LABEL=FILE with the same
label form a group (a file without a label is a group of its own, named
after the file), in the order the labels first appear. Each cell is the
median of the group's runs and, when they differ, their range; the last
columns give each group's median against the first group's, in percent.
Interleave the runs of the groups (A, B, A, B, ...) so that the machine's
drift falls on both.

--figures takes figure names or patterns (path.Match: '*' within a name,
as in 'ingest.paced_writer_*'), comma-separated or repeated; by default
the targets' figures and the ones that explain them. Runs of different
presets are refused.

  ctxgraph bench compare before=a1.json after=b1.json before=a2.json after=b2.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs := make([]bench.LabeledReport, 0, len(args))
			for _, a := range args {
				label, file, ok := strings.Cut(a, "=")
				if !ok {
					label, file = a, a
				}
				rep, err := bench.ReadReport(file)
				if err != nil {
					return err
				}
				runs = append(runs, bench.LabeledReport{Label: label, Report: rep})
			}
			return bench.Compare(cmd.OutOrStdout(), runs, figures)
		},
	}
	cmd.Flags().StringSliceVar(&figures, "figures", nil, "figure names or path.Match patterns to show (default: the targets' figures and what explains them)")
	return cmd
}
