package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/bench"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

func serveCmd(stderr io.Writer) *cobra.Command {
	var configPath string
	var data, natsAddr, httpAddr, logLevel, cpuProfile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: embedded NATS + JetStream, the graph, the planner, the HTTP API",
		Long: `serve runs ctxgraph: an embedded NATS server with JetStream (streams RLDS,
CMS and DLQ under DIR/jetstream), the Badger graph under DIR/graph, the
vector index, the planner on <prefix>.planner.context and POST /v1/context,
sessions, and the HTTP API with /metrics, /healthz and /readyz.

Defaults come from --config (see configs/ctxgraph.yaml); flags override it.
SIGINT or SIGTERM shuts it down gracefully. --cpuprofile writes a CPU
profile of the whole run, start-up (the store's load) included, for
go tool pprof.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.LoadConfig(configPath)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("data") {
				cfg.Data = data
			}
			if f.Changed("nats-addr") {
				cfg.NATS.Addr = natsAddr
			}
			if f.Changed("http-addr") {
				cfg.HTTP.Addr = httpAddr
			}
			if f.Changed("log-level") {
				cfg.LogLevel = logLevel
			}
			log, err := newLogger(stderr, cfg.LogLevel)
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			d, err := daemon.Start(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			<-cmd.Context().Done()
			return d.Shutdown(context.Background())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML config file (default: built-in defaults, as in configs/ctxgraph.yaml)")
	f.StringVar(&data, "data", "./ctxgraph-data", "data directory (Badger graph and JetStream store)")
	f.StringVar(&natsAddr, "nats-addr", "127.0.0.1:4222", "NATS listen address (port 0: random)")
	f.StringVar(&httpAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (start-up included) to this file")
	return cmd
}
