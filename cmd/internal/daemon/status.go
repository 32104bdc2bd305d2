package daemon

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

func init() { extraResponders = append(extraResponders, startEpisodeStatus) }

// startEpisodeStatus answers <prefix>.episodes.status: how much of some
// episodes the store holds, so that an importer can skip what is
// already stored in full and confirm what it published.
func startEpisodeStatus(d *Daemon) error {
	subj := d.cfg.Prefix() + "." + client.StatusSubject
	if _, err := d.nc.QueueSubscribe(subj, "ctxgraph", d.onEpisodeStatus); err != nil {
		return fmt.Errorf("subscribe %s: %w", subj, err)
	}
	return nil
}

func (d *Daemon) onEpisodeStatus(m *nats.Msg) {
	reply, err := d.episodeStatus(m.Data)
	d.respond(m, reply, err)
}

func (d *Daemon) episodeStatus(data []byte) (*client.StatusReply, error) {
	if len(data) > maxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", errTooLarge, len(data), maxRequestBytes)
	}
	var req client.StatusRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err)
	}
	if len(req.Episodes) > client.MaxStatusEpisodes {
		return nil, fmt.Errorf("%w: %d episodes (limit %d)", errBadRequest, len(req.Episodes), client.MaxStatusEpisodes)
	}
	ns, err := requestNamespace(req.Tenant, req.Project)
	if err != nil {
		return nil, err
	}
	out := &client.StatusReply{MaxMessageBytes: d.cfg.Ingest.MaxMessageBytes, Episodes: make([]client.EpisodeStatus, len(req.Episodes))}
	for i, id := range req.Episodes {
		st := client.EpisodeStatus{ID: id}
		ep, err := d.store.Episode(ns, id)
		switch {
		case errors.Is(err, particle.ErrNotFound):
			out.Episodes[i] = st
			continue
		case err != nil:
			return nil, err
		}
		st.Found, st.Ended, st.Steps = true, ep.Ended, ep.Steps
		if err := d.store.Steps(ns, id, func(int, []byte) error { st.StoredSteps++; return nil }); err != nil {
			return nil, err
		}
		st.Source = episodeSource(ep)
		out.Episodes[i] = st
	}
	return out, nil
}

// episodeSource is the dataset record an episode was imported from, as
// its episode_start recorded it in metadata.source.
func episodeSource(ep *particle.Episode) *rlds.Source {
	v, ok := ep.Metadata["source"]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var src rlds.Source
	if err := json.Unmarshal(b, &src); err != nil || src.Dataset == "" {
		return nil
	}
	return &src
}
