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
// waiting for more, and a decoded batch keeps taking (and decoding) what
// arrives until the committer takes it: under load a batch grows while
// the previous one commits, and a lone message is committed at once (low
// visibility lag).
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
	}, jetstream.PullMaxMessages(PullMaxMessages(c.d.cfg)), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if ctx.Err() == nil {
			c.log.Warn("pull failed", "err", err)
		}
	}))
	if err != nil {
		return fmt.Errorf("%s consumer: %w", c.stream, err)
	}
	defer cc.Stop()

	batches := make(chan pulled) // one decoded (and growing) while one commits
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
		for len(p.msgs) > 0 {
			n := weighed(p.results, size)
			c.commitBatch(ctx, p.msgs[:n], p.results[:n], acks)
			p.msgs, p.results = p.msgs[n:], p.results[n:]
		}
	}
	close(acks)
	wg.Wait()
	return nil
}

// collect forms batches from in and decodes them until ctx ends. A
// decoded batch waits for the committer (out is unbuffered) and, while
// it waits, takes in what arrives, up to size: a message that arrives
// during a commit is in the very next one. (Handing over a batch at
// once and starting the next left the waiting batch as small as what
// was there when it formed, often one message, and everything arriving
// during the commit went to the batch after it: two commits of delay.)
func (c *consumer) collect(ctx context.Context, in <-chan jetstream.Msg, size int, out chan<- pulled) {
	for {
		var first jetstream.Msg
		select {
		case <-ctx.Done():
			return
		case first = <-in:
		}
		// Room for what waits now, not for a whole batch: at a steady
		// rate batches hold a step or two, and a batch-sized slice for
		// each was most of what ingest allocated per step (appends
		// grow it while it waits).
		msgs := drain(in, append(make([]jetstream.Msg, 0, min(size, 1+len(in))), first), size)
		p := pulled{msgs: msgs, results: c.decodeAll(msgs)}
		for sent := false; !sent; {
			more := in
			if len(p.msgs) == size {
				more = nil // full: wait for the committer only
			}
			select {
			case out <- p:
				sent = true
			case m := <-more:
				n := len(p.msgs)
				p.msgs = drain(in, append(p.msgs, m), size)
				p.results = append(p.results, c.decodeAll(p.msgs[n:])...)
			case <-ctx.Done():
				for _, m := range p.msgs {
					_ = m.Nak()
				}
				return
			}
		}
	}
}

// weighed is how many of results, from the first, one transaction
// takes: as many as weigh size at most (a steps message weighs its
// steps), and at least one. A pull takes up to ingest.batch_size
// messages; steps messages make that many times as many steps, more
// than Badger takes in one transaction.
func weighed(results []decodeResult, size int) int {
	w := 0
	for i, r := range results {
		if w += r.weight(); w > size && i > 0 {
			return i
		}
	}
	return len(results)
}

// drain appends to msgs what in holds now, without waiting, up to size.
func drain(in <-chan jetstream.Msg, msgs []jetstream.Msg, size int) []jetstream.Msg {
	for len(msgs) < size {
		select {
		case m := <-in:
			msgs = append(msgs, m)
		default:
			return msgs
		}
	}
	return msgs
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
