package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// decoded is one pulled message, decoded and ready to apply.
type decoded struct {
	msg   jetstream.Msg
	id    string
	apply func(ctx context.Context, b *particle.Batch) error
	// steps is what the message weighs against ingest.batch_size: the
	// steps of a steps message, 1 for any other.
	steps int
}

// weight is what a decoded message weighs against ingest.batch_size (a
// message that did not decode: 1).
func (r decodeResult) weight() int {
	if r.dm == nil {
		return 1
	}
	return max(r.dm.steps, 1)
}

// decoder turns a message body into something to apply, or a permanent
// error (the message is dead-lettered, never retried).
type decoder func(m jetstream.Msg) (*decoded, error)

// consumer pulls one stream in batches and applies each batch in one
// store transaction, acking only after the commit.
type consumer struct {
	d       *Daemon
	stream  string // RLDS, CMS
	durable string
	decode  decoder
	log     *slog.Logger

	applied atomic.Int64
	failed  atomic.Int64
	retried atomic.Int64 // messages nak'd to retry with backoff
	paused  atomic.Int64 // batch retries held back by storage failures
}

// permanentError marks a message that can never apply: it goes to the
// dead-letter stream at once.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) ||
		errors.Is(err, rlds.ErrInvalid) || errors.Is(err, rlds.ErrMalformed) || errors.Is(err, rlds.ErrShape) ||
		errors.Is(err, rlds.ErrNonFinite) || errors.Is(err, rlds.ErrDType) ||
		errors.Is(err, cms.ErrInvalid) || errors.Is(err, cms.ErrMalformed) ||
		errors.Is(err, particle.ErrInvalid)
}

// batchError names the message of a batch that failed to apply.
type batchError struct {
	i   int
	err error
}

func (e *batchError) Error() string { return fmt.Sprintf("message %d: %v", e.i, e.err) }
func (e *batchError) Unwrap() error { return e.err }

// process decodes and applies one pulled batch. What happens to a
// message that does not apply depends on whose fault it is:
//
//   - the message's (malformed, invalid, too big): dead-lettered at once;
//   - storage's (particle.ErrStorage: disk full, I/O): nothing is acked
//     or counted against the message; the batch is held (JetStream told
//     it is in progress) and retried with backoff until storage
//     recovers, while /readyz reports storage false;
//   - anything else that names one message (an embedder failing on its
//     text, a bug): that message alone is retried with backoff and
//     dead-lettered after ingest.max_deliver deliveries, and the rest of
//     the batch commits without it, so the stream keeps flowing.
func (c *consumer) process(ctx context.Context, msgs []jetstream.Msg, acks chan<- []*decoded) {
	c.commitBatch(ctx, msgs, c.decodeAll(msgs), acks)
}

// commitBatch is process of a batch already decoded (results in the
// order of msgs). Committed messages go to acks, to be acked there.
func (c *consumer) commitBatch(ctx context.Context, msgs []jetstream.Msg, results []decodeResult, acks chan<- []*decoded) {
	start := time.Now()
	ready := make([]*decoded, 0, len(msgs))
	for i, r := range results {
		if r.err != nil {
			c.deadLetter(msgs[i], r.err)
			continue
		}
		ready = append(ready, r.dm)
	}
	pause := c.d.cfg.Ingest.Backoff
	for len(ready) > 0 {
		err := c.commit(ctx, ready)
		if err == nil {
			acks <- ready
			c.applied.Add(int64(len(ready)))
			c.d.metrics.ingested.WithLabelValues(c.stream, "applied").Add(float64(len(ready)))
			c.d.metrics.batchSeconds.WithLabelValues(c.stream).Observe(time.Since(start).Seconds())
			c.d.setStorageOK(true)
			return
		}
		var be *batchError
		errors.As(err, &be)
		switch {
		case errors.Is(err, particle.ErrStorage):
			c.d.setStorageOK(false)
			c.paused.Add(1)
			c.log.Error("storage failing; batch held unacked", "err", err, "messages", len(ready), "retry_in", pause)
			if !c.hold(ctx, ready, pause) {
				c.handBack(ready)
				return
			}
			pause = min(2*pause, c.d.cfg.Ingest.MaxBackoff)
		case be != nil && isPermanent(be.err):
			c.deadLetter(ready[be.i].msg, be.err)
			ready = append(ready[:be.i], ready[be.i+1:]...)
		case errors.Is(err, particle.ErrTooBig) && len(ready) > 1:
			half := len(ready) / 2
			c.process(ctx, msgsOf(ready[:half]), acks)
			c.process(ctx, msgsOf(ready[half:]), acks)
			return
		case errors.Is(err, particle.ErrTooBig):
			c.deadLetter(ready[0].msg, fmt.Errorf("message does not fit one transaction: %w", err))
			return
		case ctx.Err() != nil:
			// Shutting down mid-batch: nothing was committed.
			c.handBack(ready)
			return
		case be != nil:
			c.log.Warn("message failed; retrying it with backoff", "err", be.err, "subject", ready[be.i].msg.Subject())
			c.retryOrDeadLetter(ready[be.i].msg, be.err)
			ready = append(ready[:be.i], ready[be.i+1:]...)
		default:
			c.log.Error("batch failed; will retry", "err", err, "messages", len(ready))
			for _, dm := range ready {
				c.retryOrDeadLetter(dm.msg, err)
			}
			return
		}
	}
}

// hold keeps ready unacked for d, telling JetStream they are still in
// progress so that they are not redelivered meanwhile. It reports false
// if ctx ended first.
func (c *consumer) hold(ctx context.Context, ready []*decoded, d time.Duration) bool {
	tick := max(c.d.cfg.Ingest.AckWait/3, time.Millisecond)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(left, tick)):
		}
		for _, dm := range ready {
			_ = dm.msg.InProgress()
		}
	}
}

// handBack naks ready for immediate redelivery: they were not applied,
// and are not to blame.
func (c *consumer) handBack(ready []*decoded) {
	for _, dm := range ready {
		_ = dm.msg.Nak()
	}
}

// decodeResult is one message's decoding.
type decodeResult struct {
	dm  *decoded
	err error
}

// decodeAll decodes a pulled batch, in parallel across the cores:
// decoding is stateless and, for JSON steps with tensors, the larger part
// of ingest's CPU. Results keep the batch's order.
func (c *consumer) decodeAll(msgs []jetstream.Msg) []decodeResult {
	out := make([]decodeResult, len(msgs))
	one := func(i int) {
		c.d.priority.Yield()
		m := msgs[i]
		if len(m.Data()) > c.d.cfg.Ingest.MaxMessageBytes {
			out[i].err = fmt.Errorf("message of %d bytes exceeds ingest.max_message_bytes %d", len(m.Data()), c.d.cfg.Ingest.MaxMessageBytes)
			return
		}
		out[i].dm, out[i].err = c.decode(m)
	}
	workers := min(runtime.GOMAXPROCS(0), len(msgs))
	if workers <= 1 {
		for i := range msgs {
			one(i)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(msgs); i = int(next.Add(1) - 1) {
				one(i)
			}
		}()
	}
	wg.Wait()
	return out
}

func msgsOf(ds []*decoded) []jetstream.Msg {
	out := make([]jetstream.Msg, len(ds))
	for i, d := range ds {
		out[i] = d.msg
	}
	return out
}

// commit applies ready in one transaction. A panic while applying is a
// permanent error of that message.
func (c *consumer) commit(ctx context.Context, ready []*decoded) error {
	_, err := c.d.store.Update(ctx, func(b *particle.Batch) (err error) {
		for i, dm := range ready {
			c.d.priority.Yield()
			if err := safeApply(ctx, b, dm); err != nil {
				return &batchError{i: i, err: err}
			}
		}
		return nil
	})
	return err
}

func safeApply(ctx context.Context, b *particle.Batch, dm *decoded) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = permanent(fmt.Errorf("apply panicked: %v\n%s", r, debug.Stack()))
		}
	}()
	return dm.apply(ctx, b)
}

func (c *consumer) retryOrDeadLetter(m jetstream.Msg, cause error) {
	md, err := m.Metadata()
	if err == nil && int(md.NumDelivered) >= c.d.cfg.Ingest.MaxDeliver {
		c.deadLetter(m, fmt.Errorf("gave up after %d deliveries: %w", md.NumDelivered, cause))
		return
	}
	delay := c.d.cfg.Ingest.Backoff
	if err == nil {
		for i := uint64(1); i < md.NumDelivered && delay < c.d.cfg.Ingest.MaxBackoff; i++ {
			delay *= 2
		}
	}
	c.retried.Add(1)
	if err := m.NakWithDelay(min(delay, c.d.cfg.Ingest.MaxBackoff)); err != nil {
		c.log.Warn("nak failed", "err", err)
	}
}

// DeadLetter is the record published on <prefix>.dlq.<stream>.
type DeadLetter struct {
	Stream     string    `json:"stream"`
	Subject    string    `json:"subject"`
	Sequence   uint64    `json:"sequence"`
	MsgID      string    `json:"msg_id,omitempty"`
	Deliveries uint64    `json:"deliveries"`
	Error      string    `json:"error"`
	At         time.Time `json:"at"`
	Payload    []byte    `json:"payload"`
}

// deadLetter records m on the dead-letter stream with the reason, then
// acks it so the stream flows on. If the record cannot be written the
// message is not acked (it will come back).
func (c *consumer) deadLetter(m jetstream.Msg, reason error) {
	dl := DeadLetter{Stream: c.stream, Subject: m.Subject(), Error: reason.Error(), At: time.Now().UTC(), Payload: m.Data()}
	if md, err := m.Metadata(); err == nil {
		dl.Sequence, dl.Deliveries = md.Sequence.Stream, md.NumDelivered
	}
	if h := m.Headers(); h != nil {
		dl.MsgID = h.Get(nats.MsgIdHdr)
	}
	body, err := json.Marshal(dl)
	if err != nil {
		c.log.Error("encode dead letter", "err", err)
		return
	}
	subj := fmt.Sprintf("%s.dlq.%s", c.d.cfg.Prefix(), c.stream)
	msg := nats.NewMsg(subj)
	msg.Data = body
	msg.Header.Set("Ctxgraph-Error", truncate(dl.Error, 512))
	if dl.Sequence != 0 {
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s-%d", c.stream, dl.Sequence))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.d.js.PublishMsg(ctx, msg); err != nil {
		c.log.Error("dead-letter publish failed; message stays unacked", "err", err, "subject", m.Subject())
		_ = m.NakWithDelay(c.d.cfg.Ingest.Backoff)
		return
	}
	c.failed.Add(1)
	c.d.metrics.ingested.WithLabelValues(c.stream, "dead_lettered").Inc()
	c.log.Warn("message dead-lettered", "subject", m.Subject(), "seq", dl.Sequence, "reason", dl.Error)
	if err := m.Ack(); err != nil {
		c.log.Warn("ack of dead-lettered message failed", "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// rldsDecoder decodes RLDS wire messages and checks that the subject
// names the message's agent and episode.
func (d *Daemon) rldsDecoder() decoder {
	return func(m jetstream.Msg) (*decoded, error) {
		msg, err := rlds.DecodeMessage(m.Data())
		if err != nil {
			return nil, err
		}
		msg.NormalizeEmbeddings() // here, in parallel: the commit then takes them as they are
		if want := msg.Subject(d.cfg.Prefix()); m.Subject() != want {
			return nil, permanent(fmt.Errorf("subject %s does not match the message (want %s)", m.Subject(), want))
		}
		id := msg.MsgID()
		return &decoded{msg: m, id: id, steps: len(msg.Steps), apply: func(ctx context.Context, b *particle.Batch) error {
			return d.rldsApplier.Apply(ctx, b, id, msg)
		}}, nil
	}
}

// cmsDecoder decodes CMS spans and checks the subject's level.
func (d *Daemon) cmsDecoder() decoder {
	return func(m jetstream.Msg) (*decoded, error) {
		span, err := cms.Decode(m.Data(), d.embedder.Dimensions())
		if err != nil {
			return nil, err
		}
		if want := span.Subject(d.cfg.Prefix()); m.Subject() != want {
			return nil, permanent(fmt.Errorf("subject %s does not match the span's level (want %s)", m.Subject(), want))
		}
		return &decoded{msg: m, id: span.ID, apply: func(ctx context.Context, b *particle.Batch) error {
			return d.cmsApplier.Apply(ctx, b, span)
		}}, nil
	}
}
