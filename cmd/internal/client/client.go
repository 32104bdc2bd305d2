// Package client is what ctxgraph's client subcommands share: a
// connection to the daemon's NATS server, a rate-limited, deduplicating
// publisher of RLDS episodes and CMS spans, and a wait for the daemon to
// apply what was published.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// Connect dials the daemon's NATS server.
func Connect(url, name string) (*nats.Conn, jetstream.JetStream, error) {
	auth, err := AuthOptions()
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(name), nats.Timeout(5 * time.Second)}, auth...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// Publisher publishes wire messages as a robot controller does: to
// <prefix>.rlds.<agent>.<episode> with Nats-Msg-Id set, asynchronously
// with a bounded window of unacknowledged publishes.
type Publisher struct {
	js     jetstream.JetStream
	prefix string
	limit  *rate.Limiter
	window int

	// Msgpack makes Publish send the msgpack wire format instead of
	// JSON (rlds/wire_msgpack.go).
	Msgpack bool
	// StepsPerMessage > 1 makes Publish gather each episode's
	// consecutive steps into steps messages of up to that many steps
	// (rlds.StepGrouper); Flush sends what is still held.
	StepsPerMessage int
	// MaxMessageBytes bounds a message Publish sends: a steps message
	// that encodes larger is sent in halves, any other is refused with
	// ErrTooLarge. Zero means the NATS server's max payload.
	MaxMessageBytes int

	grouper rlds.StepGrouper

	inflight []jetstream.PubAckFuture
	Sent     int64
	Bytes    int64
	Dups     int64
}

// NewPublisher returns a publisher; stepsPerSecond ≤ 0 means unlimited.
// The rate counts messages, a steps message as many as its steps.
func NewPublisher(js jetstream.JetStream, prefix string, stepsPerSecond float64) *Publisher {
	p := &Publisher{js: js, prefix: prefix, window: 1024}
	if stepsPerSecond > 0 {
		p.limit = rate.NewLimiter(rate.Limit(stepsPerSecond), max(1, int(stepsPerSecond/10)))
	}
	return p
}

// Publish sends m, or holds it for a steps message (StepsPerMessage);
// it may return before the server acknowledges it.
func (p *Publisher) Publish(ctx context.Context, m *rlds.Message) error {
	p.grouper.N = p.StepsPerMessage
	return p.send(ctx, p.grouper.Add(m))
}

// send publishes msgs.
func (p *Publisher) send(ctx context.Context, msgs []*rlds.Message) error {
	limit := p.MaxMessageBytes
	if limit <= 0 && len(msgs) > 0 {
		limit = int(p.js.Conn().MaxPayload())
	}
	for _, m := range msgs {
		err := encodeWithin(m, limit, p.encode, func(m *rlds.Message, body []byte) error {
			return p.publish(ctx, m.Subject(p.prefix), m.MsgID(), body, max(1, len(m.Steps)))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// encode writes m in the publisher's wire format.
func (p *Publisher) encode(m *rlds.Message) ([]byte, error) {
	if p.Msgpack {
		return m.AppendMsgpack(nil)
	}
	return jsonMarshal(m)
}

// PublishRaw sends body to subj with msgID for dedupe.
func (p *Publisher) PublishRaw(ctx context.Context, subj, msgID string, body []byte) error {
	return p.publish(ctx, subj, msgID, body, 1)
}

// publish sends body, a message of steps steps (1 for any other).
func (p *Publisher) publish(ctx context.Context, subj, msgID string, body []byte, steps int) error {
	for left := steps; p.limit != nil && left > 0; {
		n := min(left, p.limit.Burst())
		if err := p.limit.WaitN(ctx, n); err != nil {
			return err
		}
		left -= n
	}
	if len(p.inflight) >= p.window {
		if err := p.waitAcks(ctx); err != nil {
			return err
		}
	}
	f, err := p.js.PublishAsync(subj, body, jetstream.WithMsgID(msgID))
	if err != nil {
		return fmt.Errorf("publish %s: %w", subj, err)
	}
	p.inflight = append(p.inflight, f)
	p.Sent++
	p.Bytes += int64(len(body))
	return nil
}

// Flush sends the steps held for steps messages and waits for every
// publish so far to be acknowledged.
func (p *Publisher) Flush(ctx context.Context) error {
	if err := p.send(ctx, p.grouper.Flush()); err != nil {
		return err
	}
	return p.waitAcks(ctx)
}

// waitAcks waits for every publish so far to be acknowledged.
func (p *Publisher) waitAcks(ctx context.Context) error {
	var errs []error
	for _, f := range p.inflight {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				p.Dups++
			}
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("publish %s: %w", f.Msg().Subject, err))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.inflight = p.inflight[:0]
	return errors.Join(errs...)
}

// WaitApplied waits until the daemon's consumers of streams have been
// delivered everything their stream held when the call began (or since)
// and have no unacknowledged messages, or timeout passes. The stream's
// last sequence is part of the test: a consumer's pending count is
// updated by the server asynchronously, so right after a publish it can
// read 0 before the message reaches the consumer.
func WaitApplied(ctx context.Context, js jetstream.JetStream, timeout time.Duration, consumers map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		idle := true
		for stream, durable := range consumers {
			c, err := js.Consumer(ctx, stream, durable)
			if err != nil {
				return fmt.Errorf("consumer %s/%s: %w", stream, durable, err)
			}
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return fmt.Errorf("stream %s: %w", stream, err)
			}
			si, err := st.Info(ctx)
			if err != nil {
				return fmt.Errorf("stream %s info: %w", stream, err)
			}
			ci, err := c.Info(ctx)
			if err != nil {
				return fmt.Errorf("consumer %s/%s info: %w", stream, durable, err)
			}
			if ci.NumPending > 0 || ci.NumAckPending > 0 || ci.Delivered.Stream < si.State.LastSeq {
				idle = false
			}
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the daemon to apply: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Retimer shifts recorded episodes to the present, as if a controller
// were living them now: the first timestamp it sees becomes now, and
// every later one keeps its offset from it.
type Retimer struct {
	shift time.Duration
	set   bool
	Now   func() time.Time
}

// Retime shifts every timestamp of m in place.
func (r *Retimer) Retime(m *rlds.Message) {
	first := firstTime(m)
	if first.IsZero() {
		return
	}
	if !r.set {
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		r.shift, r.set = now().Sub(first), true
	}
	shift := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.Add(r.shift).UTC()
		}
	}
	switch {
	case m.Start != nil:
		shift(&m.Start.StartTime)
	case m.Step != nil:
		shift(&m.Step.Timestamp)
	case m.End != nil:
		shift(&m.End.EndTime)
	}
	for i := range m.Steps {
		shift(&m.Steps[i].Timestamp)
	}
}

func firstTime(m *rlds.Message) time.Time {
	switch {
	case m.Start != nil:
		return m.Start.StartTime
	case m.Step != nil:
		return m.Step.Timestamp
	case m.End != nil:
		return m.End.EndTime
	case len(m.Steps) > 0:
		return m.Steps[0].Timestamp
	}
	return time.Time{}
}
