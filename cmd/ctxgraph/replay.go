package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// publishFlags are the flags every publishing command shares.
type publishFlags struct {
	natsURL string
	prefix  string
	rate    float64
	wait    time.Duration
	quiet   bool
	retime  bool
	wire    string
	// stepsPerMessage groups an episode's steps (registerSteps).
	stepsPerMessage int
}

// registerSteps adds --steps-per-message, to commands that send
// episodes.
func (p *publishFlags) registerSteps(cmd *cobra.Command) {
	cmd.Flags().IntVar(&p.stepsPerMessage, "steps-per-message", 1,
		fmt.Sprintf("send up to this many consecutive steps of an episode in one message (kind steps; at most %d): fewer JetStream messages for an upload; 1 = one step a message, as a live controller sends", rlds.MaxStepsPerMessage))
}

// steps checks --steps-per-message.
func (p *publishFlags) steps() (int, error) {
	if p.stepsPerMessage < 1 || p.stepsPerMessage > rlds.MaxStepsPerMessage {
		return 0, fmt.Errorf("--steps-per-message %d: want 1..%d", p.stepsPerMessage, rlds.MaxStepsPerMessage)
	}
	return p.stepsPerMessage, nil
}

// registerWire adds --wire, the format episodes are sent in.
func (p *publishFlags) registerWire(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.wire, "wire", "json", "wire format of the messages sent: json or msgpack (MessagePack, see the README's wire format)")
}

// msgpack reports whether --wire asks for MessagePack.
func (p *publishFlags) msgpack() (bool, error) {
	switch p.wire {
	case "", "json":
		return false, nil
	case "msgpack":
		return true, nil
	}
	return false, fmt.Errorf("--wire %q: want json or msgpack", p.wire)
}

func (p *publishFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.natsURL, "nats", "nats://127.0.0.1:4222", "daemon NATS URL")
	f.StringVar(&p.prefix, "prefix", "ctxgraph", "subject prefix")
	f.Float64Var(&p.rate, "rate", 0, "messages (steps) per second; 0 = as fast as the daemon acknowledges")
	f.DurationVar(&p.wait, "wait", 0, "after publishing, wait up to this long for the daemon to apply everything (0 = don't wait)")
	f.BoolVar(&p.quiet, "quiet", false, "no progress bar")
	f.BoolVar(&p.retime, "retime", false, "shift recorded timestamps so the first is now, as if the episodes were lived now")
}

// replayCmd streams JSONL episodes as a robot controller would.
func replayCmd() *cobra.Command {
	var pf publishFlags
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE...",
		Short: "Stream JSONL episodes in the wire format into the daemon, as a robot controller would",
		Long: `replay publishes each line of each FILE (one wire message per line: episode_start,
step, episode_end; see the README's wire format) to <prefix>.rlds.<agent>.<episode>
with Nats-Msg-Id set, so replaying a file twice stores it once. Lines that are
not valid messages are reported with their file and line and skipped.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return publishJSONL(cmd.Context(), cmd.ErrOrStderr(), pf, args)
		},
	}
	pf.register(cmd)
	pf.registerWire(cmd)
	pf.registerSteps(cmd)
	return cmd
}

func publishJSONL(ctx context.Context, stderr io.Writer, pf publishFlags, files []string) error {
	asMsgpack, err := pf.msgpack()
	if err != nil {
		return err
	}
	perMessage, err := pf.steps()
	if err != nil {
		return err
	}
	nc, js, err := client.Connect(pf.natsURL, "ctxgraph-replay")
	if err != nil {
		return err
	}
	defer nc.Close()
	pub := client.NewPublisher(js, pf.prefix, pf.rate)
	pub.Msgpack, pub.StepsPerMessage = asMsgpack, perMessage
	bar := newBar(stderr, pf.quiet, -1, "publishing")
	episodes := map[string]bool{}
	var bad int
	start := time.Now()
	var rt client.Retimer
	for _, path := range files {
		err := client.ReadJSONL(path, func(m *rlds.Message) error {
			episodes[m.EpisodeID] = true
			if pf.retime {
				rt.Retime(m)
			}
			_ = bar.Add(1)
			return pub.Publish(ctx, m)
		}, func(le *client.LineError) {
			bad++
			fmt.Fprintln(stderr, "skipped:", le)
		})
		if err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	_ = bar.Finish()
	fmt.Fprintf(stderr, "published %d messages (%d episodes, %.1f KB) in %s; %d already stored, %d bad lines skipped\n",
		pub.Sent, len(episodes), float64(pub.Bytes)/1024, time.Since(start).Round(time.Millisecond), pub.Dups, bad)
	if pf.wait > 0 {
		if err := client.WaitApplied(ctx, js, pf.wait, map[string]string{daemon.StreamRLDS: daemon.DurableRLDS}); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "the daemon has applied everything")
	}
	if bad > 0 {
		return fmt.Errorf("%d bad lines skipped", bad)
	}
	return nil
}

func newBar(w io.Writer, quiet bool, max int64, what string) *progressbar.ProgressBar {
	if quiet {
		return progressbar.DefaultSilent(max, what)
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}
