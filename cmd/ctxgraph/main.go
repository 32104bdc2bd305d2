// Command ctxgraph is the context-graph runtime for robot fleets: the
// daemon (serve) and the clients that stream episodes into it and ask its
// planner for context.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ctxgraph:", err)
		os.Exit(1)
	}
}

// run is main without the process: it parses args and runs the command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// errSilent marks an error the command already printed.
var errSilent = errors.New("")

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "ctxgraph",
		Short: "Context-graph runtime for robot fleets",
		Long: `ctxgraph is one daemon that robot controllers stream RLDS episodes into,
that HOPE planners ask for situation-aware context, and that training jobs
export from. 'ctxgraph serve' runs it; the other commands are its clients.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serveCmd(stderr), replayCmd(), importCmd(), contextCmd(), statsCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	return root
}

// extraCommands are subcommands that files of this package register in
// init (export, policy, keys, dlq, check, backup, bench, ...).
var extraCommands []func() *cobra.Command

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
