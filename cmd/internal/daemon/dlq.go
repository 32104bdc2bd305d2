package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DLQEntry is one dead letter as the operator tools see it: the record
// published on <prefix>.dlq.<stream> and its sequence in the DLQ stream
// (its id for show, replay and drop).
type DLQEntry struct {
	ID uint64 `json:"id"`
	DeadLetter
	Size int `json:"size"`
}

// DLQList is a page of dead letters, oldest first.
type DLQList struct {
	Entries []DLQEntry `json:"entries"`
	// Next is the id to list from for the next page (0: no more).
	Next uint64 `json:"next,omitempty"`
}

func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/dlq", d.httpDLQList)
		mux.HandleFunc("GET /v1/dlq/{id}", d.httpDLQShow)
		mux.HandleFunc("POST /v1/dlq/{id}/replay", d.httpDLQReplay)
		mux.HandleFunc("DELETE /v1/dlq/{id}", d.httpDLQDrop)
		mux.HandleFunc("POST /v1/dlq/replay", d.httpDLQReplayAll)
		mux.HandleFunc("DELETE /v1/dlq", d.httpDLQDropAll)
	})
}

var errNoDeadLetter = errors.New("no such dead letter")

// dlqSubject is the DLQ subject of stream ("" or "*": every stream).
func (d *Daemon) dlqSubject(stream string) string {
	if stream == "" {
		stream = "*"
	}
	return d.cfg.Prefix() + ".dlq." + stream
}

// DeadLetters lists up to limit dead letters of stream ("" for all),
// starting at id from.
func (d *Daemon) DeadLetters(ctx context.Context, stream string, from uint64, limit int) (*DLQList, error) {
	st, err := d.js.Stream(ctx, StreamDLQ)
	if err != nil {
		return nil, err
	}
	out := &DLQList{Entries: []DLQEntry{}}
	seq := max(from, 1)
	for {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(d.dlqSubject(stream)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(out.Entries) == limit {
			out.Next = m.Sequence
			return out, nil
		}
		e, err := decodeDLQ(m)
		if err != nil {
			return nil, err
		}
		e.Payload = nil
		out.Entries = append(out.Entries, *e)
		seq = m.Sequence + 1
	}
}

// DeadLetter returns dead letter id with its payload.
func (d *Daemon) DeadLetter(ctx context.Context, id uint64) (*DLQEntry, error) {
	st, err := d.js.Stream(ctx, StreamDLQ)
	if err != nil {
		return nil, err
	}
	m, err := st.GetMsg(ctx, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("dead letter %d: %w", id, errNoDeadLetter)
	}
	if err != nil {
		return nil, err
	}
	return decodeDLQ(m)
}

func decodeDLQ(m *jetstream.RawStreamMsg) (*DLQEntry, error) {
	e := &DLQEntry{ID: m.Sequence}
	if err := json.Unmarshal(m.Data, &e.DeadLetter); err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", m.Sequence, err)
	}
	e.Size = len(e.Payload)
	return e, nil
}

// ReplayDeadLetter publishes dead letter id's original payload to its
// original subject, where ingest takes it up again, and removes it from
// the DLQ. If it fails again it comes back as a new dead letter.
func (d *Daemon) ReplayDeadLetter(ctx context.Context, id uint64) (*jetstream.PubAck, error) {
	e, err := d.DeadLetter(ctx, id)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(e.Subject)
	msg.Data = e.Payload
	// Replaying the same dead letter twice publishes it once.
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("dlq-replay/%d", id))
	msg.Header.Set("Ctxgraph-Replay-Of", strconv.FormatUint(id, 10))
	ack, err := d.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("replay dead letter %d to %s: %w", id, e.Subject, err)
	}
	if err := d.DropDeadLetter(ctx, id); err != nil {
		return ack, err
	}
	d.log.Info("dead letter replayed", "id", id, "subject", e.Subject, "seq", ack.Sequence)
	return ack, nil
}

// DropDeadLetter deletes dead letter id.
func (d *Daemon) DropDeadLetter(ctx context.Context, id uint64) error {
	st, err := d.js.Stream(ctx, StreamDLQ)
	if err != nil {
		return err
	}
	if err := st.DeleteMsg(ctx, id); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			return fmt.Errorf("dead letter %d: %w", id, errNoDeadLetter)
		}
		return err
	}
	return nil
}

// DLQBulk is the result of replaying or dropping many dead letters.
type DLQBulk struct {
	Done   []uint64          `json:"done"`
	Failed map[uint64]string `json:"failed,omitempty"`
}

// eachDeadLetter calls fn with the id of every dead letter of stream.
func (d *Daemon) eachDeadLetter(ctx context.Context, stream string, fn func(id uint64) error) (*DLQBulk, error) {
	out := &DLQBulk{Done: []uint64{}}
	var from uint64
	for {
		page, err := d.DeadLetters(ctx, stream, from, 256)
		if err != nil {
			return out, err
		}
		for _, e := range page.Entries {
			if err := fn(e.ID); err != nil {
				if out.Failed == nil {
					out.Failed = map[uint64]string{}
				}
				out.Failed[e.ID] = err.Error()
				continue
			}
			out.Done = append(out.Done, e.ID)
		}
		if page.Next == 0 {
			return out, nil
		}
		from = page.Next
	}
}

func dlqID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: dead letter id %q", errBadRequest, r.PathValue("id"))
	}
	return id, nil
}

func dlqError(err error) error {
	if errors.Is(err, errNoDeadLetter) {
		return fmt.Errorf("%w: %v", errNotFound, err)
	}
	return err
}

func (d *Daemon) httpDLQList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, fmt.Errorf("%w: limit %q must be in 1..10000", errBadRequest, s))
			return
		}
		limit = n
	}
	var from uint64
	if s := q.Get("from"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			writeError(w, fmt.Errorf("%w: from %q", errBadRequest, s))
			return
		}
		from = n
	}
	out, err := d.DeadLetters(r.Context(), q.Get("stream"), from, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) httpDLQShow(w http.ResponseWriter, r *http.Request) {
	id, err := dlqID(r)
	if err == nil {
		var e *DLQEntry
		if e, err = d.DeadLetter(r.Context(), id); err == nil {
			writeJSON(w, http.StatusOK, e)
			return
		}
	}
	writeError(w, dlqError(err))
}

func (d *Daemon) httpDLQReplay(w http.ResponseWriter, r *http.Request) {
	id, err := dlqID(r)
	if err == nil {
		var ack *jetstream.PubAck
		if ack, err = d.ReplayDeadLetter(r.Context(), id); err == nil {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "stream": ack.Stream, "sequence": ack.Sequence})
			return
		}
	}
	writeError(w, dlqError(err))
}

func (d *Daemon) httpDLQDrop(w http.ResponseWriter, r *http.Request) {
	id, err := dlqID(r)
	if err == nil {
		if err = d.DropDeadLetter(r.Context(), id); err == nil {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "dropped": true})
			return
		}
	}
	writeError(w, dlqError(err))
}

func (d *Daemon) httpDLQReplayAll(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	out, err := d.eachDeadLetter(ctx, r.URL.Query().Get("stream"), func(id uint64) error {
		_, err := d.ReplayDeadLetter(ctx, id)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) httpDLQDropAll(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("all") != "true" {
		writeError(w, fmt.Errorf("%w: dropping every dead letter needs ?all=true", errBadRequest))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	out, err := d.eachDeadLetter(ctx, r.URL.Query().Get("stream"), func(id uint64) error {
		return d.DropDeadLetter(ctx, id)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
