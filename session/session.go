// Package session keeps context sessions: the active workspace of a
// planner — its goals, tools, active entities, intents, constraints and
// the context state vector that the planner's answers move.
//
// Sessions persist in the particle store (one record each) and are cached
// in memory; a [Manager] is safe for concurrent use.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

var (
	// ErrNotFound is returned for an unknown session id.
	ErrNotFound = errors.New("session: not found")
	// ErrInvalid marks a create or update with bad fields.
	ErrInvalid = errors.New("session: invalid")
)

// TimeWindow bounds what a session looks at; a zero bound is open.
type TimeWindow struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// Constraints limit what a session's planner requests may see.
type Constraints struct {
	Permissions []string   `json:"permissions,omitempty"`
	TimeWindow  TimeWindow `json:"time_window"`
	Location    string     `json:"location,omitempty"`
}

// Session is one context session.
type Session struct {
	ID                 string      `json:"id"`
	Namespace          string      `json:"namespace"`
	Agent              string      `json:"agent,omitempty"`
	Goals              []string    `json:"goals"`
	Tools              []string    `json:"tools"`
	ActiveEntities     []string    `json:"active_entities"`
	Intents            []string    `json:"intents"`
	Constraints        Constraints `json:"constraints"`
	ContextStateVector []float32   `json:"context_state_vector,omitempty"`
	StateUpdates       int         `json:"state_updates"`
	CreatedAt          time.Time   `json:"created_at"`
	UpdatedAt          time.Time   `json:"updated_at"`
}

// Patch is a partial update: nil fields stay as they are.
type Patch struct {
	Agent          *string      `json:"agent,omitempty"`
	Goals          *[]string    `json:"goals,omitempty"`
	Tools          *[]string    `json:"tools,omitempty"`
	ActiveEntities *[]string    `json:"active_entities,omitempty"`
	Intents        *[]string    `json:"intents,omitempty"`
	Constraints    *Constraints `json:"constraints,omitempty"`
	// Vector, when set, is blended into the context state vector.
	Vector []float32 `json:"vector,omitempty"`
}

// Manager creates, reads and updates sessions.
type Manager struct {
	store *particle.Store
	dim   int
	alpha float64

	rmw   sync.Mutex // serialises read-modify-write of sessions
	mu    sync.Mutex
	cache map[string]*Session // ns \0 id
	subs  []func(*Session)
}

// NewManager returns a manager over store whose state vectors have dim
// dimensions and blend new evidence at rate alpha (0 < alpha ≤ 1).
func NewManager(store *particle.Store, dim int, alpha float64) *Manager {
	if alpha <= 0 || alpha > 1 {
		alpha = 0.3
	}
	return &Manager{store: store, dim: dim, alpha: alpha, cache: map[string]*Session{}}
}

// OnChange registers fn to be called with every session after a change
// (create, update, state blend): the push to subscribers.
func (m *Manager) OnChange(fn func(*Session)) {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
}

// Create stores a new session from s (its id is generated when empty).
func (m *Manager) Create(ctx context.Context, s Session) (*Session, error) {
	if s.ID == "" {
		s.ID = uuid.Must(uuid.NewV7()).String()
	}
	if strings.ContainsAny(s.ID, ". *>/\t\r\n") {
		return nil, fmt.Errorf("%w: id %q may not contain '.', '/', '*', '>' or spaces", ErrInvalid, s.ID)
	}
	if s.Namespace == "" {
		s.Namespace = particle.DefaultNamespace
	}
	if err := m.validVector(s.ContextStateVector); err != nil {
		return nil, err
	}
	m.rmw.Lock()
	defer m.rmw.Unlock()
	if _, err := m.Get(ctx, s.Namespace, s.ID); err == nil {
		return nil, fmt.Errorf("%w: session %s exists", ErrInvalid, s.ID)
	}
	now := time.Now().UTC()
	s.CreatedAt, s.UpdatedAt = now, now
	if len(s.ContextStateVector) == 0 {
		s.ContextStateVector = make([]float32, m.dim)
	}
	normalizeLists(&s)
	return m.save(ctx, &s)
}

// Get returns session id of namespace ns.
func (m *Manager) Get(ctx context.Context, ns, id string) (*Session, error) {
	if ns == "" {
		ns = particle.DefaultNamespace
	}
	m.mu.Lock()
	s, ok := m.cache[ns+"\x00"+id]
	m.mu.Unlock()
	if ok {
		return s.clone(), nil
	}
	raw, err := m.store.Session(ns, id)
	if errors.Is(err, particle.ErrNotFound) {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var out Session
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("session %s: decode: %w", id, err)
	}
	m.mu.Lock()
	m.cache[ns+"\x00"+id] = &out
	m.mu.Unlock()
	return out.clone(), nil
}

// List returns every session of namespace ns.
func (m *Manager) List(ctx context.Context, ns string) ([]*Session, error) {
	if ns == "" {
		ns = particle.DefaultNamespace
	}
	var out []*Session
	err := m.store.Sessions(ns, func(raw []byte) error {
		var s Session
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		out = append(out, &s)
		return nil
	})
	return out, err
}

// Update applies p to session id.
func (m *Manager) Update(ctx context.Context, ns, id string, p Patch) (*Session, error) {
	m.rmw.Lock()
	defer m.rmw.Unlock()
	s, err := m.Get(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	if p.Agent != nil {
		s.Agent = *p.Agent
	}
	if p.Goals != nil {
		s.Goals = *p.Goals
	}
	if p.Tools != nil {
		s.Tools = *p.Tools
	}
	if p.ActiveEntities != nil {
		s.ActiveEntities = *p.ActiveEntities
	}
	if p.Intents != nil {
		s.Intents = *p.Intents
	}
	if p.Constraints != nil {
		s.Constraints = *p.Constraints
	}
	if len(p.Vector) > 0 {
		if err := m.validVector(p.Vector); err != nil {
			return nil, err
		}
		if err := m.blend(s, [][]float32{p.Vector}, []float64{1}); err != nil {
			return nil, err
		}
	}
	normalizeLists(s)
	s.UpdatedAt = time.Now().UTC()
	return m.save(ctx, s)
}

// Blend moves the state vector of session id toward the weighted mean of
// vecs and stores it; it returns the session as stored.
func (m *Manager) Blend(ctx context.Context, ns, id string, vecs [][]float32, weights []float64) (*Session, error) {
	m.rmw.Lock()
	defer m.rmw.Unlock()
	s, err := m.Get(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	if err := m.blend(s, vecs, weights); err != nil {
		return nil, err
	}
	s.UpdatedAt = time.Now().UTC()
	return m.save(ctx, s)
}

func (m *Manager) blend(s *Session, vecs [][]float32, weights []float64) error {
	var kept [][]float32
	var kw []float64
	for i, v := range vecs {
		if len(v) == m.dim {
			kept = append(kept, v)
			kw = append(kw, weights[i])
		}
	}
	if len(kept) == 0 {
		return nil
	}
	sv := wave.StateVector{Vec: slices.Clone(s.ContextStateVector), Updates: s.StateUpdates}
	if len(sv.Vec) != m.dim {
		sv = *wave.NewStateVector(m.dim)
	}
	if err := sv.Blend(kept, kw, m.alpha, time.Now().UTC()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	s.ContextStateVector, s.StateUpdates = sv.Vec, sv.Updates
	return nil
}

func (m *Manager) validVector(v []float32) error {
	if len(v) == 0 {
		return nil
	}
	if len(v) != m.dim {
		return fmt.Errorf("%w: vector has %d dimensions, want %d", ErrInvalid, len(v), m.dim)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: vector[%d] is %v", ErrInvalid, i, x)
		}
	}
	return nil
}

func (m *Manager) save(ctx context.Context, s *Session) (*Session, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", s.ID, err)
	}
	if _, err := m.store.Update(ctx, func(b *particle.Batch) error {
		return b.PutSession(s.Namespace, s.ID, raw)
	}); err != nil {
		return nil, fmt.Errorf("save session %s: %w", s.ID, err)
	}
	m.mu.Lock()
	m.cache[s.Namespace+"\x00"+s.ID] = s.clone()
	subs := m.subs
	m.mu.Unlock()
	for _, fn := range subs {
		fn(s.clone())
	}
	return s.clone(), nil
}

// clone is a deep copy: sessions handed out never share slices with the
// cache, so a later blend cannot change what a caller holds.
func (s *Session) clone() *Session {
	c := *s
	c.Goals, c.Tools = slices.Clone(s.Goals), slices.Clone(s.Tools)
	c.ActiveEntities, c.Intents = slices.Clone(s.ActiveEntities), slices.Clone(s.Intents)
	c.Constraints.Permissions = slices.Clone(s.Constraints.Permissions)
	c.ContextStateVector = slices.Clone(s.ContextStateVector)
	return &c
}

func normalizeLists(s *Session) {
	for _, l := range []*[]string{&s.Goals, &s.Tools, &s.ActiveEntities, &s.Intents} {
		if *l == nil {
			*l = []string{}
		}
	}
}
