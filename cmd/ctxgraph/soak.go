package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/soak"
)

func init() { extraCommands = append(extraCommands, soakCmd) }

func soakCmd() *cobra.Command {
	var o soak.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "soak [--controllers N] [--rate HZ] [--steps-per-message N] [--planner-rps N] [--duration D]",
		Short: "Run a daemon under a simulated fleet and report latency, lag, memory, and lost or duplicated steps",
		Long: `soak starts 'ctxgraph serve' (this binary) on a fresh data directory and
loopback ports, seeds it, measures the planner idle, then streams steps from
--controllers simulated robot controllers (one NATS connection each) at --rate
steps per second each while asking the planner --planner-rps times a second,
for --duration. It drains, measures the planner idle again, stops the
daemon, audits the store (every acknowledged step stored, none applied
twice) and runs ctxgraph check. It reports planner p99 under load beside
idle, ingest lag, RSS growth and lost or duplicated steps, and exits
non-zero if any step was lost, duplicated or dead-lettered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.Binary, o.Log = bin, cmd.ErrOrStderr()
			r, err := soak.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.MarshalIndent(r, "", "  ")
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			} else {
				r.Print(cmd.OutOrStdout())
			}
			if !r.OK() {
				return errSilent
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Controllers, "controllers", 200, "simulated robot controllers")
	f.Float64Var(&o.Rate, "rate", 10, "steps per second per controller")
	f.IntVar(&o.StepsPerEpisode, "episode-steps", 100, "steps per episode")
	f.IntVar(&o.StepsPerMessage, "steps-per-message", 1, "each controller sends its steps this many to a steps message, at the same step rate")
	f.Float64Var(&o.PlannerRPS, "planner-rps", 50, "planner requests per second")
	f.DurationVar(&o.Duration, "duration", 60*time.Second, "length of the load")
	f.DurationVar(&o.Idle, "idle", 10*time.Second, "length of each idle planner measurement")
	f.StringVar(&o.Dir, "data", "", "data directory (default: a temporary one, removed after)")
	f.BoolVar(&o.Keep, "keep", false, "keep the temporary data directory")
	f.BoolVar(&o.Check, "check", true, "run ctxgraph check on the store after the run")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
