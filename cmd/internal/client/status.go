package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// StatusSubject is the request/reply subject, under the prefix, where
// the daemon says how much of some episodes it has stored:
// <prefix>.episodes.status. It is outside <prefix>.rlds.> so that the
// RLDS stream never captures a request.
const StatusSubject = "episodes.status"

// MaxStatusEpisodes is the most episodes one status request may name.
const MaxStatusEpisodes = 1024

// ErrNoStatus means the daemon does not answer status requests (no
// responder on the subject).
var ErrNoStatus = errors.New("client: the daemon answers no episode status requests")

// StatusRequest asks the daemon about episodes of one namespace. With
// no episodes it still reports the daemon's limits.
type StatusRequest struct {
	Tenant   string   `json:"tenant,omitempty"`
	Project  string   `json:"project,omitempty"`
	Episodes []string `json:"episodes"`
}

// StatusReply answers a StatusRequest, one EpisodeStatus per episode
// asked for, in order.
type StatusReply struct {
	// MaxMessageBytes is the largest wire message the daemon's ingest
	// applies (ingest.max_message_bytes); larger ones are dead-lettered.
	MaxMessageBytes int             `json:"max_message_bytes"`
	Episodes        []EpisodeStatus `json:"episodes"`
}

// EpisodeStatus is what the daemon has stored of one episode.
type EpisodeStatus struct {
	ID    string `json:"id"`
	Found bool   `json:"found"`
	// Ended is set once the episode_end message was applied.
	Ended bool `json:"ended"`
	// Steps is the episode's step count as the store knows it (the
	// highest index seen plus one, or the count the end message gave).
	Steps int `json:"steps"`
	// StoredSteps counts the step records actually stored.
	StoredSteps int `json:"stored_steps"`
	// Source is the dataset record an imported episode came from, set
	// once its episode_start was applied.
	Source *rlds.Source `json:"source,omitempty"`
}

// Complete reports whether the daemon holds the whole episode: its
// start (from src, when src is not nil), all n steps, and its end.
func (s EpisodeStatus) Complete(n int, src *rlds.Source) bool {
	if !s.Found || !s.Ended || s.Steps != n || s.StoredSteps != n {
		return false
	}
	if src == nil {
		return true
	}
	return s.Source != nil && s.Source.Dataset == src.Dataset && s.Source.Version == src.Version &&
		s.Source.Split == src.Split && s.Source.Shard == src.Shard && s.Source.Record == src.Record
}

// Status asks the daemon behind nc what it has stored of episodes (at
// most MaxStatusEpisodes) of the default namespace.
func Status(ctx context.Context, nc *nats.Conn, prefix string, episodes []string) (*StatusReply, error) {
	return StatusIn(ctx, nc, prefix, "", "", episodes)
}

// StatusIn is Status for the episodes of namespace tenant/project.
func StatusIn(ctx context.Context, nc *nats.Conn, prefix, tenant, project string, episodes []string) (*StatusReply, error) {
	if len(episodes) > MaxStatusEpisodes {
		return nil, fmt.Errorf("client: status of %d episodes asked at once (limit %d)", len(episodes), MaxStatusEpisodes)
	}
	body, err := json.Marshal(StatusRequest{Tenant: tenant, Project: project, Episodes: episodes})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, prefix+"."+StatusSubject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, ErrNoStatus
	case err != nil:
		return nil, fmt.Errorf("client: episode status: %w", err)
	}
	if st := msg.Header.Get("Status"); st != "" {
		return nil, fmt.Errorf("client: episode status: %s: %s", st, msg.Data)
	}
	var r StatusReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return nil, fmt.Errorf("client: episode status reply: %w", err)
	}
	if len(r.Episodes) != len(episodes) {
		return nil, fmt.Errorf("client: episode status: %d answers for %d episodes", len(r.Episodes), len(episodes))
	}
	return &r, nil
}
