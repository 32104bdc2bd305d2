package daemon

import (
	"sync/atomic"
	"time"
)

// ReplyTimes is what the daemon's NATS planner replies cost it after
// their plans, since it started: encoding each answer in the format
// its request asked for, and handing the reply to NATS (a write into
// the in-process connection, which returns once the embedded server
// has read it). With the plan's own time and the transport's, they
// make up what a requester over NATS waits beyond an in-process call.
type ReplyTimes struct {
	Replies int64
	Encode  time.Duration
	Respond time.Duration
}

// Sub is t less an earlier reading.
func (t ReplyTimes) Sub(earlier ReplyTimes) ReplyTimes {
	return ReplyTimes{Replies: t.Replies - earlier.Replies, Encode: t.Encode - earlier.Encode, Respond: t.Respond - earlier.Respond}
}

// replyTimer is ReplyTimes, added to by every planner reply over NATS.
type replyTimer struct{ replies, encode, respond atomic.Int64 }

func (t *replyTimer) add(encode, respond time.Duration) {
	t.replies.Add(1)
	t.encode.Add(int64(encode))
	t.respond.Add(int64(respond))
}

func (t *replyTimer) read() ReplyTimes {
	return ReplyTimes{Replies: t.replies.Load(), Encode: time.Duration(t.encode.Load()), Respond: time.Duration(t.respond.Load())}
}

// ReplyTimes reads the planner replies' times so far.
func (d *Daemon) ReplyTimes() ReplyTimes { return d.replies.read() }
