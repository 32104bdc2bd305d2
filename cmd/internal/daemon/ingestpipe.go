package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// The consumer's pipeline. Three goroutines overlap the work of
// consecutive batches, so that both cores stay busy:
//
//	pull (NATS client) → in → collect+decode → batches → commit → acks → ack
//
// collect takes whatever has arrived, up to ingest.batch_size, without
// waiting for more: under load a batch grows while the previous one
// commits, and a lone message is committed at once (low visibility lag).
// Every channel is bounded, so a slow commit (or storage held by a
// fault) stops the pulls: back-pressure, not an unbounded queue.
// Acks are sent only after the batch's commit, by the ack goroutine.

// pulled is one batch pulled and decoded, ready to commit.
type pulled struct {
	msgs    []jetstream.Msg
	results []decodeResult
}

// run pulls until ctx ends.
func (c *consumer) run(ctx context.Context, cons jetstream.Consumer) error {
	size := c.d.cfg.Ingest.BatchSize
	in := make(chan jetstream.Msg, 2*size)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-ctx.Done():
			_ = m.Nak() // not applied: hand it back at once
		}
	}, jetstream.PullMaxMessages(2*size), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if ctx.Err() == nil {
			c.log.Warn("pull failed", "err", err)
		}
	}))
	if err != nil {
		return fmt.Errorf("%s consumer: %w", c.stream, err)
	}
	defer cc.Stop()

	batches := make(chan pulled, 1) // one decoded while one commits
	acks := make(chan []*decoded, 4)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.ackLoop(acks)
	}()
	go func() {
		defer wg.Done()
		defer close(batches)
		c.collect(ctx, in, size, batches)
	}()
	for p := range batches {
		c.commitBatch(ctx, p.msgs, p.results, acks)
	}
	close(acks)
	wg.Wait()
	return nil
}

// collect forms batches from in and decodes them until ctx ends.
func (c *consumer) collect(ctx context.Context, in <-chan jetstream.Msg, size int, out chan<- pulled) {
	for {
		var first jetstream.Msg
		select {
		case <-ctx.Done():
			return
		case first = <-in:
		}
		msgs := make([]jetstream.Msg, 1, size)
		msgs[0] = first
	fill:
		for len(msgs) < size {
			select {
			case m := <-in:
				msgs = append(msgs, m)
			default:
				break fill
			}
		}
		p := pulled{msgs: msgs, results: c.decodeAll(msgs)}
		select {
		case out <- p:
		case <-ctx.Done():
			for _, m := range msgs {
				_ = m.Nak()
			}
			return
		}
	}
}

// ackLoop acknowledges committed batches until acks is closed.
func (c *consumer) ackLoop(acks <-chan []*decoded) {
	for ready := range acks {
		for _, dm := range ready {
			if err := dm.msg.Ack(); err != nil {
				c.log.Warn("ack failed; redelivery is harmless", "err", err)
			}
		}
	}
}
