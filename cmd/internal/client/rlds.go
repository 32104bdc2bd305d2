package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// ImportOptions configures OpenRLDS and ImportRLDS. The zero value
// imports everything, fails on the first bad record, and publishes every
// episode again (relying on dedupe) instead of asking the daemon.
type ImportOptions struct {
	// Prefix starts every subject. Default "ctxgraph".
	Prefix string
	// Tenant and Project name the namespace the episodes are written to
	// (empty: the default one).
	Tenant, Project string
	// Rate bounds the messages (steps) published per second; 0 means as
	// fast as the daemon acknowledges.
	Rate float64
	// StepsPerMessage > 1 sends each episode's steps in steps messages
	// of up to that many (halved as needed to fit MaxMessageBytes).
	StepsPerMessage int
	// Limit stops after the first Limit episodes of the input, in
	// reading order, counting those already stored; 0 means all.
	Limit int
	// Splits restricts datasets to these splits; empty means all.
	Splits []string
	// SkipBad reports a record that cannot be read or decoded, or an
	// episode that cannot be sent (a message over the size limit, a
	// non-finite number), to OnBad and carries on. Otherwise the first
	// one ends the import with its error; every episode before it has
	// been published whole, and no part of it has.
	SkipBad bool
	// SkipStored asks the daemon, before publishing an episode, whether
	// it already holds all of it, and skips it if so. A daemon that does
	// not answer gets every episode (dedupe keeps that harmless).
	SkipStored bool
	// MaxMessageBytes bounds one wire message. Zero means the smaller of
	// the NATS server's max payload and the daemon's
	// ingest.max_message_bytes.
	MaxMessageBytes int
	// Retimer, when set, shifts every timestamp as if the episodes were
	// lived now (datasets carry none: steps are otherwise 100 ms apart
	// from the Unix epoch). Episode and message IDs do not change.
	Retimer *Retimer
	// OnBad receives each record or episode SkipBad steps over.
	OnBad func(error)
	// OnProgress is called after each episode, published or skipped,
	// with the totals so far.
	OnProgress func(ImportStats)
	// Logger receives the reader's warnings (an inferred schema). Nil
	// means slog.Default().
	Logger *slog.Logger
}

// ErrNamespace is the error of a tenant or project an import cannot
// write to.
var ErrNamespace = errors.New("client: bad namespace")

// ImportStats counts what an import did.
type ImportStats struct {
	// Episodes and Steps were published.
	Episodes, Steps int64
	// Stored episodes were skipped: the daemon already held them in full.
	Stored int64
	// Bad records and episodes were skipped (SkipBad).
	Bad int64
	// Messages and Bytes were published; JetStream dropped Dups of them
	// as already in its dedupe window.
	Messages, Bytes, Dups int64
	// Elapsed is the time since the import started.
	Elapsed time.Duration
	// Published lists the episodes published, with their step counts,
	// for VerifyStored.
	Published []PublishedEpisode
}

// PublishedEpisode is an episode an import published.
type PublishedEpisode struct {
	ID     string
	Steps  int
	Source *rlds.Source
}

// EpisodeError is an episode that cannot be sent as it is.
type EpisodeError struct {
	Episode string
	Source  *rlds.Source
	// Step is the step at fault, -1 for the episode's start or end.
	Step int
	Err  error
}

func (e *EpisodeError) Error() string {
	where := "episode " + e.Episode
	if s := e.Source; s != nil {
		where += fmt.Sprintf(" (%s %s record %d)", s.Dataset, s.Shard, s.Record)
	}
	if e.Step >= 0 {
		where += fmt.Sprintf(" step %d", e.Step)
	}
	return where + ": " + e.Err.Error()
}

func (e *EpisodeError) Unwrap() error { return e.Err }

// ErrTooLarge marks a wire message over the size limit.
var ErrTooLarge = errors.New("message too large")

// OpenRLDS opens the datasets named by inputs: each folder is one
// dataset (a TFDS version folder or its parent), and each run of
// consecutive shard files in one folder is another, read with the
// metadata beside them.
func OpenRLDS(inputs []string, o ImportOptions) ([]*rlds.Dataset, error) {
	var out []*rlds.Dataset
	open := func(dir string, files []string) error {
		ds, err := rlds.OpenDatasetOptions(rlds.DatasetOptions{
			Dir: dir, Files: files, Splits: o.Splits, SkipBad: o.SkipBad, OnError: o.OnBad, Logger: o.Logger,
		})
		if err != nil {
			return err
		}
		out = append(out, ds)
		return nil
	}
	var files []string
	flush := func() error {
		if len(files) == 0 {
			return nil
		}
		err := open("", files)
		files = nil
		return err
	}
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			if err := flush(); err != nil {
				return nil, err
			}
			if err := open(in, nil); err != nil {
				return nil, err
			}
			continue
		}
		if len(files) > 0 && filepath.Dir(files[0]) != filepath.Dir(in) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		files = append(files, in)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// ExpectedEpisodes is how many episodes the datasets hold by their
// dataset_info.json, capped at limit (when > 0), or -1 when some
// dataset does not say.
func ExpectedEpisodes(datasets []*rlds.Dataset, limit int) int64 {
	var n int64
	for _, ds := range datasets {
		if ds.Info == nil {
			return -1
		}
		for _, sh := range ds.Shards {
			si, ok := ds.Info.Split(sh.Split)
			if !ok || sh.Index < 0 || sh.Count != len(si.ShardLengths) {
				return -1
			}
			n += si.ShardLengths[sh.Index]
		}
	}
	if limit > 0 && int64(limit) < n {
		return int64(limit)
	}
	return n
}

// errLimit ends reading once Limit episodes were read.
var errLimit = errors.New("limit reached")

// prepared is one episode ready to publish: its messages encoded and
// checked, or marked as already stored.
type prepared struct {
	pub    PublishedEpisode
	stored bool
	msgs   []wireMsg
}

type wireMsg struct {
	subj, id string
	body     []byte
}

// ImportRLDS publishes the episodes of datasets through nc/js exactly as
// a live controller would: each episode's start, steps and end on
// <prefix>.rlds.<agent>.<episode> with Nats-Msg-Id set, so that
// importing twice stores everything once. Episodes are read, checked and
// encoded ahead of publishing, one episode at a time; an episode is
// published only whole. It returns when everything published is
// acknowledged by JetStream (not yet applied: see WaitApplied and
// VerifyStored), with the stats so far even on error.
func ImportRLDS(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, datasets []*rlds.Dataset, o ImportOptions) (ImportStats, error) {
	start := time.Now()
	// The daemon's rule, checked before anything is sent.
	if err := particle.CheckScope(o.Tenant, o.Project); err != nil {
		return ImportStats{}, fmt.Errorf("%w: %w", ErrNamespace, err)
	}
	if o.Prefix == "" {
		o.Prefix = "ctxgraph"
	}
	var st ImportStats
	maxBytes := o.MaxMessageBytes
	if maxBytes <= 0 || o.SkipStored {
		// One status request up front: the daemon's message size limit,
		// and whether it answers status requests at all.
		r, err := Status(ctx, nc, o.Prefix, nil)
		switch {
		case errors.Is(err, ErrNoStatus):
			o.SkipStored = false
		case err != nil:
			return st, err
		}
		if maxBytes <= 0 {
			maxBytes = int(nc.MaxPayload())
			if r != nil && r.MaxMessageBytes > 0 && r.MaxMessageBytes < maxBytes {
				maxBytes = r.MaxMessageBytes
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *prepared, 2)
	readErr := make(chan error, 1)
	var bad int64 // owned by the reader until readErr is sent
	go func() {
		defer close(work)
		readErr <- readEpisodes(ctx, nc, datasets, o, maxBytes, &bad, work)
	}()

	pub := NewPublisher(js, o.Prefix, o.Rate)
	var pubErr error
	for p := range work {
		if pubErr = ctx.Err(); pubErr != nil {
			break // interrupted: every episode so far went out whole
		}
		if !p.stored {
			for _, m := range p.msgs {
				if pubErr = pub.PublishRaw(ctx, m.subj, m.id, m.body); pubErr != nil {
					break
				}
			}
			if pubErr != nil {
				cancel()
				break
			}
			st.Episodes++
			st.Steps += int64(p.pub.Steps)
			st.Published = append(st.Published, p.pub)
		} else {
			st.Stored++
		}
		st.Messages, st.Bytes, st.Elapsed = pub.Sent, pub.Bytes, time.Since(start)
		if o.OnProgress != nil {
			o.OnProgress(st)
		}
	}
	for range work {
		// Drain what the reader prepared before it saw the cancel.
	}
	rerr := <-readErr
	st.Bad = bad
	// Wait for the acks of what is in flight even when interrupted, so
	// that the counts say what JetStream holds.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	ferr := pub.Flush(fctx)
	st.Messages, st.Bytes, st.Dups, st.Elapsed = pub.Sent, pub.Bytes, pub.Dups, time.Since(start)
	if errors.Is(rerr, errLimit) || (pubErr != nil && errors.Is(rerr, context.Canceled)) {
		rerr = nil // the reader stopped because it was told to
	}
	return st, errors.Join(pubErr, rerr, ferr)
}

// readEpisodes reads, checks and encodes the episodes of datasets into
// work, until they end, Limit is reached (errLimit), or an error.
func readEpisodes(ctx context.Context, nc *nats.Conn, datasets []*rlds.Dataset, o ImportOptions, maxBytes int, bad *int64, work chan<- *prepared) error {
	n := 0
	for _, ds := range datasets {
		onErr := ds.OnError
		ds.OnError = func(err error) {
			*bad++
			if onErr != nil {
				onErr(err)
			}
		}
		err := ds.Episodes(ctx, func(ep *rlds.Episode) error {
			n++
			p, err := prepare(ctx, nc, ep, o, maxBytes)
			var ee *EpisodeError
			switch {
			case err != nil && o.SkipBad && errors.As(err, &ee):
				*bad++
				if o.OnBad != nil {
					o.OnBad(err)
				}
			case err != nil:
				return err
			default:
				select {
				case work <- p:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if o.Limit > 0 && n >= o.Limit {
				return errLimit
			}
			return nil
		})
		ds.OnError = onErr
		if err != nil {
			return err
		}
	}
	return nil
}

// prepare asks the daemon whether it holds ep already (SkipStored), and
// otherwise encodes and checks ep's messages.
func prepare(ctx context.Context, nc *nats.Conn, ep *rlds.Episode, o ImportOptions, maxBytes int) (*prepared, error) {
	p := &prepared{pub: PublishedEpisode{ID: ep.ID, Steps: len(ep.Steps), Source: ep.Source}}
	if o.SkipStored {
		r, err := StatusIn(ctx, nc, o.Prefix, o.Tenant, o.Project, []string{ep.ID})
		if err != nil {
			return nil, err
		}
		if r.Episodes[0].Complete(len(ep.Steps), ep.Source) {
			p.stored = true
			return p, nil
		}
	}
	msgs := ep.Messages()
	if tags := sceneTags(ep.Metadata); len(tags) > 0 && len(msgs) > 2 {
		msgs[1].Step.Annotations = &rlds.Annotations{SceneTags: tags}
	}
	fail := func(m *rlds.Message, err error) error {
		step := -1
		if m.Step != nil {
			step = m.Step.Index
		}
		return &EpisodeError{Episode: ep.ID, Source: ep.Source, Step: step, Err: err}
	}
	for _, m := range msgs {
		m.Tenant, m.Project = o.Tenant, o.Project
		if o.Retimer != nil {
			o.Retimer.Retime(m)
		}
		if err := m.Validate(); err != nil {
			return nil, fail(m, err)
		}
	}
	msgs = rlds.GroupSteps(msgs, o.StepsPerMessage)
	p.msgs = make([]wireMsg, 0, len(msgs))
	for _, m := range msgs {
		err := encodeWithin(m, maxBytes, func(m *rlds.Message) ([]byte, error) { return jsonMarshal(m) }, func(m *rlds.Message, body []byte) error {
			p.msgs = append(p.msgs, wireMsg{subj: m.Subject(o.Prefix), id: m.MsgID(), body: body})
			return nil
		})
		var tl *tooLargeError
		if errors.As(err, &tl) {
			m = tl.msg // the step at fault, not the steps message
		}
		if err != nil {
			return nil, fail(m, err)
		}
	}
	return p, nil
}

// sceneTags turns episode metadata that names a scene or environment
// into scene tags ("scene:<value>") for the episode's node.
func sceneTags(md map[string]any) []string {
	var tags []string
	for k, v := range md {
		name := k[strings.LastIndexByte(k, '/')+1:]
		switch name {
		case "scene", "scene_id", "scene_name", "environment", "environment_name", "env_name":
		default:
			continue
		}
		if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
			tags = append(tags, "scene:"+strings.TrimSpace(s))
		}
	}
	slices.Sort(tags)
	return slices.Compact(tags)
}

// VerifyStored asks the daemon whether it holds every published episode
// of namespace tenant/project in full, and returns the status of each
// that it does not.
func VerifyStored(ctx context.Context, nc *nats.Conn, prefix, tenant, project string, published []PublishedEpisode) ([]EpisodeStatus, error) {
	var missing []EpisodeStatus
	for len(published) > 0 {
		batch := published[:min(len(published), MaxStatusEpisodes)]
		published = published[len(batch):]
		ids := make([]string, len(batch))
		for i, p := range batch {
			ids[i] = p.ID
		}
		r, err := StatusIn(ctx, nc, prefix, tenant, project, ids)
		if err != nil {
			return nil, err
		}
		for i, s := range r.Episodes {
			if !s.Complete(batch[i].Steps, batch[i].Source) {
				missing = append(missing, s)
			}
		}
	}
	return missing, nil
}
