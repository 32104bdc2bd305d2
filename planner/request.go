package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds/mplex"
)

var (
	// ErrInvalid marks a request the planner cannot answer as asked.
	ErrInvalid = errors.New("planner: invalid request")
)

// Limits on what one request may ask for.
const (
	MaxK      = 1000
	MaxHops   = 4
	MaxBudget = 10000
)

// TimeWindow bounds the time an answer's edges must overlap.
type TimeWindow struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// Request is a planner fast-path request (NATS ctxgraph.planner.context,
// HTTP POST /v1/context).
type Request struct {
	Query     string    `json:"query,omitempty"`
	Vector    []float32 `json:"vector,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Goals     []string  `json:"goals,omitempty"`
	Tools     []string  `json:"tools,omitempty"`
	Entities  []string  `json:"entities,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Roles     []string  `json:"roles,omitempty"`
	// TimeWindow keeps edges whose time range overlaps it.
	TimeWindow *TimeWindow `json:"time_window,omitempty"`
	Location   string      `json:"location,omitempty"`
	// MinConfidence drops edges below it.
	MinConfidence float64 `json:"min_confidence,omitempty"`
	// SameAgent keeps only experience of Agent.
	SameAgent bool `json:"same_agent,omitempty"`
	// K is how many seeds the prefilter keeps (default 10).
	K int `json:"k,omitempty"`
	// Hops is how far expansion goes from the seeds (default 1).
	Hops int `json:"hops,omitempty"`
	// Budget caps nodes plus edges in the answer (default 256).
	Budget int `json:"budget,omitempty"`
	// AsOf answers as of that time (what was valid then).
	AsOf     *time.Time `json:"as_of,omitempty"`
	Format   string     `json:"format,omitempty"`
	Strategy string     `json:"strategy,omitempty"`
	Tenant   string     `json:"tenant,omitempty"`
	Project  string     `json:"project,omitempty"`
	// Principal, when the daemon sets it, is the authenticated caller:
	// policy evaluates it (with Roles, which a session may narrow)
	// instead of what the request body names.
	Principal *particle.Principal `json:"-"`
}

// DecodeRequest parses a request, JSON or msgpack (request_msgpack.go);
// unknown fields are errors.
func DecodeRequest(b []byte) (*Request, error) {
	if mplex.IsMap(b) {
		return decodeRequestMsgpack(b)
	}
	if r, ok := decodeRequestFast(b); ok {
		return r, nil
	}
	return decodeRequestJSON(b)
}

// decodeRequestJSON is DecodeRequest by encoding/json alone: what the
// fast decoder leaves to it, and what that decoder is tested against.
func decodeRequestJSON(b []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the request", ErrInvalid)
	}
	return &r, nil
}

// normalize fills defaults and checks r against dims (the vector
// dimension) and the limits.
func (r *Request) normalize(dims int) error {
	if r.K == 0 {
		r.K = 10
	}
	if r.Hops == 0 {
		r.Hops = 1
	}
	if r.Budget == 0 {
		r.Budget = 256
	}
	if err := particle.CheckScope(r.Tenant, r.Project); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch {
	case r.K < 0 || r.K > MaxK:
		return fmt.Errorf("%w: k %d outside 1..%d", ErrInvalid, r.K, MaxK)
	case r.Hops < 0 || r.Hops > MaxHops:
		return fmt.Errorf("%w: hops %d outside 0..%d", ErrInvalid, r.Hops, MaxHops)
	case r.Budget < 0 || r.Budget > MaxBudget:
		return fmt.Errorf("%w: budget %d outside 1..%d", ErrInvalid, r.Budget, MaxBudget)
	case math.IsNaN(r.MinConfidence) || r.MinConfidence < 0 || r.MinConfidence > 1:
		return fmt.Errorf("%w: min_confidence %v outside [0,1]", ErrInvalid, r.MinConfidence)
	case r.SameAgent && r.Agent == "":
		return fmt.Errorf("%w: same_agent needs agent", ErrInvalid)
	case r.TimeWindow != nil && !r.TimeWindow.From.IsZero() && !r.TimeWindow.To.IsZero() && r.TimeWindow.To.Before(r.TimeWindow.From):
		return fmt.Errorf("%w: time_window.to is before time_window.from", ErrInvalid)
	}
	if len(r.Vector) > 0 {
		if len(r.Vector) != dims {
			return fmt.Errorf("%w: vector has %d dimensions, want %d", ErrInvalid, len(r.Vector), dims)
		}
		for i, x := range r.Vector {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: vector[%d] is %v", ErrInvalid, i, x)
			}
		}
	}
	if r.Strategy != "" && !slices.Contains(Strategies, r.Strategy) {
		return fmt.Errorf("%w: unknown strategy %q (want one of %s)", ErrInvalid, r.Strategy, strings.Join(Strategies, ", "))
	}
	if _, ok := formatters[r.Format]; !ok && r.Format != "" {
		return fmt.Errorf("%w: unknown format %q", ErrInvalid, r.Format)
	}
	return nil
}

func (r *Request) namespace() string { return particle.Namespace(r.Tenant, r.Project) }

func (r *Request) principal() particle.Principal {
	if r.Principal != nil {
		p := *r.Principal
		p.Roles = r.Roles
		return p
	}
	return particle.Principal{Roles: r.Roles, Agent: r.Agent}
}
