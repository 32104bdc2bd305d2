package cms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds/mplex"
	"github.com/ctxgraph/ctxgraph/wave"
)

var (
	// ErrMalformed marks bytes that are not a span at all.
	ErrMalformed = errors.New("cms: malformed span")
	// ErrInvalid marks a well-formed span whose fields are wrong.
	ErrInvalid = errors.New("cms: invalid span")
)

// Span is one CMS consolidation, the body of a message on
// ctxgraph.cms.<level>.
type Span struct {
	ID    string `json:"id"`
	Level int    `json:"level"`
	// Period is the level's update period (for time-chunked levels) and
	// ChunkSize its update size in steps (for step-chunked levels).
	Period    string `json:"period,omitempty"`
	ChunkSize int    `json:"chunk_size,omitempty"`
	Agent     string `json:"agent,omitempty"`
	// EpisodeID or StreamID names what the span covers.
	EpisodeID string    `json:"episode_id,omitempty"`
	StreamID  string    `json:"stream_id,omitempty"`
	StepStart *int      `json:"step_start,omitempty"`
	StepEnd   *int      `json:"step_end,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	// UpdateIndex counts this level's consolidations of the stream.
	UpdateIndex int `json:"update_index"`
	// ParentID is the slower-level span this one rolls into.
	ParentID  string    `json:"parent_id,omitempty"`
	Text      string    `json:"text,omitempty"`
	Embedding []float32 `json:"embedding,omitempty"`
	Concepts  []string  `json:"concepts,omitempty"`
	// Entities are entity names the span is about; they resolve to the
	// same nodes as RLDS annotations naming them.
	Entities []string `json:"entities,omitempty"`
	// UpdateSize is the magnitude of the consolidation (for example the
	// norm of the memory update); it seeds salience. 0 means 0.1.
	UpdateSize float64 `json:"update_size"`
	Tenant     string  `json:"tenant,omitempty"`
	Project    string  `json:"project,omitempty"`
}

// MaxLevel is the slowest level a span may name.
const MaxLevel = 15

// Decode parses and validates one span, JSON or msgpack (msgpack.go);
// unknown fields are errors.
// dims is the embedding dimension spans must match (0 skips the check).
func Decode(b []byte, dims int) (*Span, error) {
	if mplex.IsMap(b) {
		s, err := decodeMsgpack(b)
		if err == nil {
			err = s.Validate(dims)
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Span
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the span", ErrMalformed)
	}
	if err := s.Validate(dims); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports the first field of s that is wrong.
func (s *Span) Validate(dims int) error {
	if err := particle.CheckScope(s.Tenant, s.Project); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch {
	case strings.TrimSpace(s.ID) == "":
		return fmt.Errorf("%w: id is required", ErrInvalid)
	case strings.ContainsAny(s.ID, " \t\r\n"):
		return fmt.Errorf("%w: id %q may not contain spaces", ErrInvalid, s.ID)
	case s.Level < 0 || s.Level > MaxLevel:
		return fmt.Errorf("%w: level %d outside 0..%d", ErrInvalid, s.Level, MaxLevel)
	case !s.Start.IsZero() && !s.End.IsZero() && s.End.Before(s.Start):
		return fmt.Errorf("%w: end %s before start %s", ErrInvalid, s.End, s.Start)
	case math.IsNaN(s.UpdateSize) || math.IsInf(s.UpdateSize, 0) || s.UpdateSize < 0:
		return fmt.Errorf("%w: update_size %v must be a finite number ≥ 0", ErrInvalid, s.UpdateSize)
	case s.StepStart != nil && s.StepEnd != nil && *s.StepEnd < *s.StepStart:
		return fmt.Errorf("%w: step_end %d before step_start %d", ErrInvalid, *s.StepEnd, *s.StepStart)
	case s.Period != "":
		if _, err := time.ParseDuration(s.Period); err != nil {
			return fmt.Errorf("%w: period %q: %v", ErrInvalid, s.Period, err)
		}
	}
	for i, x := range s.Embedding {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: embedding[%d] is %v", ErrInvalid, i, x)
		}
	}
	if len(s.Embedding) > 0 && dims > 0 && len(s.Embedding) != dims {
		return fmt.Errorf("%w: embedding has %d dimensions, want %d", ErrInvalid, len(s.Embedding), dims)
	}
	for i, c := range s.Concepts {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("%w: concept %d is empty", ErrInvalid, i)
		}
	}
	return nil
}

// Subject is the NATS subject of s under prefix.
func (s *Span) Subject(prefix string) string { return fmt.Sprintf("%s.cms.%d", prefix, s.Level) }

// Band is the decay of one CMS level: what its spans touch fades with
// this function and half-life.
type Band struct {
	Level    int           `yaml:"level" json:"level"`
	Decay    wave.DecayFn  `yaml:"decay" json:"decay"`
	HalfLife time.Duration `yaml:"half_life" json:"half_life"`
}

// DefaultBands are the decay bands of levels 0-3; a slower level not
// listed decays like the slowest listed.
func DefaultBands() []Band {
	return []Band{
		{Level: 0, Decay: wave.DecayExp, HalfLife: 10 * time.Minute},
		{Level: 1, Decay: wave.DecayExp, HalfLife: 6 * time.Hour},
		{Level: 2, Decay: wave.DecayPower, HalfLife: 7 * 24 * time.Hour},
		{Level: 3, Decay: wave.DecayPower, HalfLife: 90 * 24 * time.Hour},
	}
}

// BandFor returns the band of level among bands (the slowest one at or
// below level).
func BandFor(bands []Band, level int) Band {
	best := Band{Level: level, Decay: wave.DecayExp, HalfLife: time.Hour}
	found := false
	for _, b := range bands {
		if b.Level <= level && (!found || b.Level > best.Level) {
			best, found = b, true
		}
	}
	return best
}
