package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

// The ingest's transport baseline: what JetStream alone takes for the
// bulk phase's messages on this machine and server, with no graph behind
// it. They are published as the bulk phase publishes them (as fast as
// acknowledged, the same window) into a stream configured as the
// daemon's RLDS stream, and taken by a pull consumer as the daemon's
// takes them (batches of up to ingest.batch_size) that acknowledges each
// one and does nothing else. The rate is a ceiling on the daemon's
// ingest here, and its CPU per step is the part of the daemon's that is
// the transport's.

// transportStream names the baseline's stream; transportPrefix is what
// its subjects start with instead of the daemon's prefix.
const (
	transportStream = "CTXGRAPH_BENCH_TRANSPORT"
	transportPrefix = "_ctxgraph_bench_transport"
)

// transportBaseline measures the bulk phase's messages through JetStream
// alone, on the in-process daemon's server, before the ingest sends them
// to the daemon, and removes its stream.
func (r *runner) transportBaseline(ctx context.Context) error {
	msgs := r.w.msgs[:r.bulkCut()]
	sc := daemon.StreamConfig(r.cfg, transportStream, transportPrefix+".>")
	if _, err := r.js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("transport baseline: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.js.DeleteStream(dctx, transportStream)
	}()
	cons, err := r.js.CreateOrUpdateConsumer(ctx, transportStream, daemon.ConsumerConfig(r.cfg, "bench"))
	if err != nil {
		return fmt.Errorf("transport baseline: %w", err)
	}
	var acked atomic.Int64
	done := make(chan struct{})
	want := int64(len(msgs))
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if err := m.Ack(); err != nil {
			return
		}
		if acked.Add(1) == want {
			close(done)
		}
	}, jetstream.PullMaxMessages(daemon.PullMaxMessages(r.cfg)))
	if err != nil {
		return fmt.Errorf("transport baseline: %w", err)
	}
	defer cc.Stop()

	steps := countSteps(msgs)
	cpu0, t0 := cpuTime(), time.Now()
	pub := client.NewPublisher(r.js, transportPrefix, 0)
	for _, m := range msgs {
		subj := transportPrefix + strings.TrimPrefix(m.subj, r.prefix)
		if err := pub.PublishRaw(ctx, subj, m.id, m.body); err != nil {
			return fmt.Errorf("transport baseline: %w", err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return fmt.Errorf("transport baseline: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("transport baseline: %d of %d messages acknowledged after 5 minutes", acked.Load(), want)
	}
	took, cpu := time.Since(t0), cpuTime()-cpu0
	r.fig["ingest.transport.steps_per_s"] = float64(steps) / took.Seconds()
	r.fig["ingest.transport.cpu_us_per_step"] = float64(cpu.Microseconds()) / float64(steps)
	r.say("transport: JetStream alone (publish, deliver, ack; no graph): %d steps in %.1fs = %.0f steps/s, %.0f µs of CPU per step",
		steps, took.Seconds(), r.fig["ingest.transport.steps_per_s"], r.fig["ingest.transport.cpu_us_per_step"])
	return nil
}
