package rlds

import (
	"time"
)

// Episode is a whole episode in memory: what a dataset reader yields and
// what [Episode.Messages] turns into the wire messages a controller
// would have sent.
type Episode struct {
	ID                  string
	Agent               string
	Location            string
	StartTime           time.Time
	LanguageInstruction string
	Metadata            map[string]any
	Source              *Source
	Steps               []Step
	Success             *bool
}

// Messages returns the episode as its wire messages: start, each step,
// end. Steps missing a timestamp are spaced 100 ms apart from StartTime.
func (e *Episode) Messages() []*Message {
	start := e.StartTime
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}
	out := make([]*Message, 0, len(e.Steps)+2)
	out = append(out, &Message{Kind: KindEpisodeStart, Agent: e.Agent, EpisodeID: e.ID, Start: &EpisodeStart{
		StartTime: start, Location: e.Location, LanguageInstruction: e.LanguageInstruction,
		Metadata: e.Metadata, Source: e.Source,
	}})
	var rewardSum float64
	end := start
	for i := range e.Steps {
		s := e.Steps[i]
		s.Index = i
		if s.Timestamp.IsZero() {
			s.Timestamp = start.Add(time.Duration(i) * 100 * time.Millisecond)
		}
		if s.LanguageInstruction == "" {
			s.LanguageInstruction = e.LanguageInstruction
		}
		rewardSum += s.Reward
		end = s.Timestamp
		out = append(out, &Message{Kind: KindStep, Agent: e.Agent, EpisodeID: e.ID, Step: &s})
	}
	rs := rewardSum
	out = append(out, &Message{Kind: KindEpisodeEnd, Agent: e.Agent, EpisodeID: e.ID, End: &EpisodeEnd{
		EndTime: end, Success: e.Success, RewardSum: &rs, Steps: len(e.Steps),
	}})
	return out
}
