package particle

import (
	"fmt"
	"slices"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// NodeType is the kind of a node.
type NodeType string

// Node types of the data model.
const (
	NodeEntity   NodeType = "entity"
	NodeTool     NodeType = "tool"
	NodeGoal     NodeType = "goal"
	NodeIntent   NodeType = "intent"
	NodeConcept  NodeType = "concept"
	NodePolicy   NodeType = "policy"
	NodeSession  NodeType = "context_session"
	NodeAgent    NodeType = "agent"
	NodeLocation NodeType = "location"
	NodeEpisode  NodeType = "episode"
)

// NodeTypes lists every node type in a fixed order; the index of a type
// plus one is its compact code.
var NodeTypes = []NodeType{NodeEntity, NodeTool, NodeGoal, NodeIntent, NodeConcept, NodePolicy, NodeSession, NodeAgent, NodeLocation, NodeEpisode}

// Code is the compact code of t (0 when unknown).
func (t NodeType) Code() uint8 { return uint8(slices.Index(NodeTypes, t) + 1) }

// Valid reports whether t is a node type of the data model.
func (t NodeType) Valid() bool { return t.Code() != 0 }

// EdgeType is the kind of an edge.
type EdgeType string

// Edge types of the data model.
const (
	EdgeCausal     EdgeType = "causal"
	EdgeTemporal   EdgeType = "temporal"
	EdgeMembership EdgeType = "membership"
	EdgePolicy     EdgeType = "policy"
	EdgeToolUse    EdgeType = "tool_use"
	EdgeAssertion  EdgeType = "assertion"
)

// EdgeTypes lists every edge type in a fixed order (code = index + 1).
var EdgeTypes = []EdgeType{EdgeCausal, EdgeTemporal, EdgeMembership, EdgePolicy, EdgeToolUse, EdgeAssertion}

// Code is the compact code of t (0 when unknown).
func (t EdgeType) Code() uint8 { return uint8(slices.Index(EdgeTypes, t) + 1) }

// internEdgeType is the entry of EdgeTypes equal to t, or t when none is.
// A decoded edge's type points into its record otherwise: comparing the
// interned one with a constant finds the same pointer, without reading
// the record's bytes again (a reopen's index fill asks every edge's
// Code).
func internEdgeType(t EdgeType) EdgeType {
	if i := slices.Index(EdgeTypes, t); i >= 0 {
		return EdgeTypes[i]
	}
	return t
}

// Valid reports whether t is an edge type of the data model.
func (t EdgeType) Valid() bool { return t.Code() != 0 }

// Status is the life-cycle state of an edge.
type Status string

// Edge statuses.
const (
	StatusActive       Status = "active"
	StatusSuperseded   Status = "superseded"
	StatusContradicted Status = "contradicted"
	StatusHypothesis   Status = "hypothesis"
)

// DefaultNamespace is the tenant/project of records written without one.
const DefaultNamespace = "default/default"

// MaxScopeName is the longest tenant or project name.
const MaxScopeName = 64

// CheckScope reports, wrapping ErrInvalid, a tenant or project name that
// cannot name a namespace: each is empty (the default) or 1 to
// MaxScopeName letters, digits, '.', '_' and '-'. Anything else could
// make two scopes one namespace ("a/b" + "c" and "a" + "b/c") or break
// the store's keys (which join names with NUL bytes).
func CheckScope(tenant, project string) error {
	for _, f := range [2]struct{ what, name string }{{"tenant", tenant}, {"project", project}} {
		if len(f.name) > MaxScopeName {
			return fmt.Errorf("%w: %s of %d bytes, longer than %d", ErrInvalid, f.what, len(f.name), MaxScopeName)
		}
		for _, c := range []byte(f.name) {
			if !scopeByte(c) {
				return fmt.Errorf("%w: %s %q: only letters, digits, '.', '_' and '-' are allowed", ErrInvalid, f.what, f.name)
			}
		}
	}
	return nil
}

func scopeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Namespace joins a tenant and a project; empty parts become "default".
// Check them with CheckScope where they come from outside.
func Namespace(tenant, project string) string {
	if (tenant == "" || tenant == "default") && (project == "" || project == "default") {
		return DefaultNamespace // the constant: no string made per message
	}
	if tenant == "" {
		tenant = "default"
	}
	if project == "" {
		project = "default"
	}
	return tenant + "/" + project
}

// Belief is how strongly the graph holds a node or edge to be true: a
// Beta-Bernoulli belief (wave.Belief) over the confidences of its
// sightings, plus how many sightings there were.
type Belief struct {
	Score     float64   `json:"score"`
	Alpha     float64   `json:"alpha"`
	Beta      float64   `json:"beta"`
	Evidence  float64   `json:"evidence"`
	UpdatedAt time.Time `json:"updated_at"`
}

// wave returns b as a wave.Belief; a belief with no pseudo-counts yet
// starts from its score as the prior.
func (b Belief) wave() wave.Belief {
	if b.Alpha+b.Beta == 0 {
		w := wave.NewBelief(b.Score)
		w.UpdatedAt = b.UpdatedAt
		return w
	}
	return wave.Belief{Score: b.Score, Alpha: b.Alpha, Beta: b.Beta, UpdatedAt: b.UpdatedAt}
}

func (b *Belief) set(w wave.Belief) {
	b.Score, b.Alpha, b.Beta, b.UpdatedAt = w.Score, w.Alpha, w.Beta, w.UpdatedAt
}

// Observe folds in one sighting of the given confidence.
func (b *Belief) Observe(confidence float64, at time.Time) {
	w := b.wave()
	w.Observe(confidence, at)
	b.set(w)
	b.Evidence++
}

// Merge folds in the evidence of another belief (entity merges).
func (b *Belief) Merge(o Belief) {
	w := b.wave()
	w.Merge(o.wave())
	b.set(w)
	b.Evidence += o.Evidence
}

// Attributes are a node's open-ended properties.
type Attributes struct {
	Tags           []string          `json:"tags,omitempty"`
	CMSSpanIDs     []string          `json:"cms_span_ids,omitempty"`
	RLDSEpisodeIDs []string          `json:"rlds_episode_ids,omitempty"`
	Props          map[string]string `json:"props,omitempty"`
}

// Node is a vertex of the particle graph.
type Node struct {
	ID         string     `json:"id"`
	Namespace  string     `json:"namespace"`
	Type       NodeType   `json:"type"`
	Name       string     `json:"name"`
	Aliases    []string   `json:"aliases,omitempty"`
	Attributes Attributes `json:"attributes"`
	Embedding  []float32  `json:"embedding,omitempty"`
	Belief     Belief     `json:"belief"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// Seq is the store's compact id of the node (vector index key).
	Seq uint64 `json:"seq"`
}

// TimeRange is a closed interval; a zero bound is open.
type TimeRange struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// Overlaps reports whether r and o share any instant.
func (r TimeRange) Overlaps(o TimeRange) bool {
	if !o.To.IsZero() && !r.From.IsZero() && r.From.After(o.To) {
		return false
	}
	if !o.From.IsZero() && !r.To.IsZero() && r.To.Before(o.From) {
		return false
	}
	return true
}

// Scope says when, where and for whom an edge holds.
type Scope struct {
	TimeRange TimeRange `json:"time_range"`
	Location  string    `json:"location,omitempty"`
	Audience  []string  `json:"audience,omitempty"`
}

// Provenance is where an edge was observed: an RLDS step or a CMS span.
type Provenance struct {
	EpisodeID  string    `json:"episode_id,omitempty"`
	StepIndex  *int      `json:"step_index,omitempty"`
	CMSSpanID  string    `json:"cms_span_id,omitempty"`
	Agent      string    `json:"agent,omitempty"`
	ObservedAt time.Time `json:"observed_at"`
}

// Assertion is the predicate and value of an assertion edge.
type Assertion struct {
	Predicate string `json:"predicate"`
	Value     string `json:"value,omitempty"`
}

// Salience is how much an edge matters now, decaying with time.
type Salience struct {
	Score       float64   `json:"score"`
	DecayFn     string    `json:"decay_fn"`
	HalfLifeS   float64   `json:"half_life_s"`
	LastUpdated time.Time `json:"last_updated"`
}

// Policy lists roles allowed and denied an item. Deny beats allow; an
// empty allow list allows every role not denied.
type Policy struct {
	AllowRoles []string `json:"allow_roles,omitempty"`
	DenyRoles  []string `json:"deny_roles,omitempty"`
	// Sensitivity is public (default), personal or sensitive; Subject
	// is who a personal or sensitive item is about (default: the agent
	// of its first provenance).
	Sensitivity Sensitivity `json:"sensitivity,omitempty"`
	Subject     string      `json:"subject,omitempty"`
	// Portable false keeps the item in the context it came from (Origin,
	// default the agent of its first provenance) and out of exports.
	Portable *bool  `json:"portable,omitempty"`
	Origin   string `json:"origin,omitempty"`
}

// MaxProvenance is how many provenance records an edge keeps (the most
// recent); Evidence counts them all. Every batch that touches an edge
// rewrites it, so this bounds the bytes a re-observation costs.
const MaxProvenance = 8

// Edge is a typed, directed relation between two nodes.
type Edge struct {
	ID         string       `json:"id"`
	Namespace  string       `json:"namespace"`
	Source     string       `json:"source"`
	Target     string       `json:"target"`
	Type       EdgeType     `json:"type"`
	Scope      Scope        `json:"scope"`
	Provenance []Provenance `json:"provenance"`
	Evidence   int          `json:"evidence"`
	Assertion  *Assertion   `json:"assertion,omitempty"`
	Confidence float64      `json:"confidence"`
	Belief     Belief       `json:"belief"`
	Embedding  []float32    `json:"embedding,omitempty"`
	Salience   Salience     `json:"salience"`
	Policy     Policy       `json:"policy"`
	ValidFrom  time.Time    `json:"valid_from"`
	ValidTo    time.Time    `json:"valid_to,omitzero"`
	Status     Status       `json:"status"`
	// SupersededBy is the fact that ended this one; EndedAt is when the
	// evidence of its end was observed (as-of queries before it still
	// see it).
	SupersededBy string    `json:"superseded_by,omitempty"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	// Contradicts lists facts this one conflicts with, both kept.
	Contradicts []string  `json:"contradicts,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Seq         uint64    `json:"seq"`
}

// Predicate is the assertion predicate of e, or its type name.
func (e *Edge) Predicate() string {
	if e.Assertion != nil && e.Assertion.Predicate != "" {
		return e.Assertion.Predicate
	}
	return string(e.Type)
}

// Outcome is how an episode ended, when known.
type Outcome struct {
	Success   *bool    `json:"success,omitempty"`
	RewardSum *float64 `json:"reward_sum,omitempty"`
}

// Episode is one run of one agent.
type Episode struct {
	ID                  string         `json:"id"`
	Namespace           string         `json:"namespace"`
	Agent               string         `json:"agent"`
	StartTime           time.Time      `json:"start_time"`
	EndTime             time.Time      `json:"end_time,omitzero"`
	Location            string         `json:"location,omitempty"`
	LanguageInstruction string         `json:"language_instruction,omitempty"`
	Nodes               []string       `json:"nodes,omitempty"`
	Edges               []string       `json:"edges,omitempty"`
	Embedding           []float32      `json:"embedding,omitempty"`
	Outcome             Outcome        `json:"outcome"`
	Steps               int            `json:"steps"`
	Ended               bool           `json:"ended"`
	Metadata            map[string]any `json:"metadata,omitempty"`
	// Features maps each step feature to its dtype and shape, fixed by
	// the first step that carries it.
	Features map[string]string `json:"features,omitempty"`
	// LastTool is the node id of the tool last in use, for temporal edges.
	LastTool string `json:"last_tool,omitempty"`
	// NodeID is the episode's node in the graph (type episode).
	NodeID string `json:"node_id"`
	Seq    uint64 `json:"seq"`
	// sealed is the number of chunks of Edges stored apart from the
	// record (episodeedges.go): the first sealed·episodeEdgeChunk ids.
	sealed int
	// edgePos finds an id's place in a long Edges (HasEdge): the
	// writer's alone, shared by the view's episode and a batch's copy.
	edgePos map[string]int32
}

// Counts are the store's record counts by kind.
type Counts struct {
	Nodes       map[NodeType]int64 `json:"nodes"`
	Edges       map[EdgeType]int64 `json:"edges"`
	Episodes    int64              `json:"episodes"`
	Steps       int64              `json:"steps"`
	Spans       int64              `json:"spans"`
	SpansLevels map[int]int64      `json:"spans_by_level"`
	Blobs       int64              `json:"blobs"`
	Sessions    int64              `json:"sessions"`
}
