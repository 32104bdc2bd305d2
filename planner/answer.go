package planner

import (
	"math"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Answer is the stitched subgraph the planner returns.
type Answer struct {
	Nodes []NodeOut `json:"nodes"`
	Edges []EdgeOut `json:"edges"`
	// Unknowns are goals, tools and entities asked for that the graph
	// lacks (or that the caller may not see).
	Unknowns []Unknown `json:"unknowns"`
	// Hypotheses are the ids of edges in Edges held with low belief.
	Hypotheses []string `json:"hypotheses"`
	// Contradictions pair conflicting facts in Edges.
	Contradictions []Contradiction `json:"contradictions"`
	ContextState   *ContextState   `json:"context_state,omitempty"`
	Timings        Timings         `json:"timings_us"`
	// Strategy is how the seeds were found (semantic, keyword, graph,
	// temporal or hybrid); with auto or no strategy asked, the one
	// chosen, and StrategyReason says why.
	Strategy       string `json:"strategy"`
	StrategyReason string `json:"strategy_reason,omitempty"`
	// Truncated is true when the budget cut the expansion short.
	Truncated bool `json:"truncated"`
	// Search is the work of the prefilter's vector search (an IVF
	// index's; zero for the others), to explain the prefilter's time:
	// the daemon's metrics and the bench read it. The answer's formats
	// leave it out.
	Search wave.SearchStats `json:"-"`

	// keep is storage a reused answer keeps (Reset and stitch leave it).
	keep answerStorage
}

// answerStorage is what a plan writes into a reused answer instead of
// allocating: the context state (ContextState points at state when the
// planner made it here) and the copy of the query vector.
type answerStorage struct {
	state ContextState
	query []float32
}

// Reset empties a for reuse by [Planner.PlanInto]: its lists keep their
// capacity, and nothing in them refers to the graph any longer.
func (a *Answer) Reset() {
	clear(a.Nodes[:cap(a.Nodes)])
	clear(a.Edges[:cap(a.Edges)])
	clear(a.Hypotheses[:cap(a.Hypotheses)])
	*a = Answer{Nodes: a.Nodes[:0], Edges: a.Edges[:0], Hypotheses: a.Hypotheses[:0], keep: a.keep}
}

// NodeOut is a node of an answer with why it is there.
type NodeOut struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Name     string   `json:"name"`
	Aliases  []string `json:"aliases,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Score    float64  `json:"score"`
	Belief   float64  `json:"belief"`
	Seed     bool     `json:"seed"`
	Hop      int      `json:"hop"`
	Episodes []string `json:"rlds_episode_ids,omitempty"`
	Spans    []string `json:"cms_span_ids,omitempty"`
}

// EdgeOut is an edge of an answer with its provenance and confidence.
type EdgeOut struct {
	ID         string                `json:"id"`
	Source     string                `json:"source"`
	Target     string                `json:"target"`
	SourceName string                `json:"source_name"`
	TargetName string                `json:"target_name"`
	Type       string                `json:"type"`
	Predicate  string                `json:"predicate"`
	Value      string                `json:"value,omitempty"`
	Confidence float64               `json:"confidence"`
	Salience   float64               `json:"salience"`
	Score      float64               `json:"score"`
	Status     string                `json:"status"`
	Hypothesis bool                  `json:"hypothesis"`
	Evidence   int                   `json:"evidence"`
	Provenance []particle.Provenance `json:"provenance"`
	Scope      particle.Scope        `json:"scope"`
	ValidFrom  time.Time             `json:"valid_from"`
	ValidTo    time.Time             `json:"valid_to,omitzero"`
}

// Unknown is something a request named that the answer lacks.
type Unknown struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Contradiction is a pair of conflicting facts with their confidences.
type Contradiction struct {
	Subject     string  `json:"subject"`
	Predicate   string  `json:"predicate"`
	EdgeA       string  `json:"edge_a"`
	EdgeB       string  `json:"edge_b"`
	ConfidenceA float64 `json:"confidence_a"`
	ConfidenceB float64 `json:"confidence_b"`
}

// Timings are per-stage latencies in microseconds.
type Timings struct {
	// EmbedUS is the time before the graph's read lock: the request's
	// checks, the session's seeds, the query vector (embedded where the
	// request gives text, not a vector) and the strategy's choice, the
	// keyword search (KeywordUS) included.
	EmbedUS int64 `json:"embed"`
	// WaitUS is the wait for the graph's read lock, which a writer
	// holds while it publishes a committed batch to the view.
	WaitUS      int64 `json:"wait,omitempty"`
	PrefilterUS int64 `json:"prefilter"`
	// KeywordUS is the bleve search (keyword and hybrid strategies).
	KeywordUS int64 `json:"keyword,omitempty"`
	ExpandUS  int64 `json:"expand"`
	RerankUS  int64 `json:"rerank"`
	StitchUS  int64 `json:"stitch"`
	TotalUS   int64 `json:"total"`
}

// ContextState is the context state vector after the answer, with a
// summary a person can read.
type ContextState struct {
	Dim    int         `json:"dim"`
	Norm   float64     `json:"norm"`
	Top    []DimWeight `json:"top"`
	Vector []float32   `json:"vector"`
}

// DimWeight is one dimension of a vector and its value.
type DimWeight struct {
	Dim   int     `json:"dim"`
	Value float32 `json:"value"`
}

func newContextState(v []float32) *ContextState {
	cs := &ContextState{}
	summarise(cs, v, make([]DimWeight, 0, 5))
	return cs
}

// summarise makes cs the context state v, with its norm and its five
// strongest dimensions (in top, which has room for five).
func summarise(cs *ContextState, v []float32, top []DimWeight) {
	cs.Dim, cs.Vector = len(v), v
	var ss float64
	// The five strongest dimensions by one pass with a small sorted list
	// (not a sort of every dimension: this runs on every answer).
	top = top[:0]
	for i, x := range v {
		ss += float64(x) * float64(x)
		a := math.Abs(float64(x))
		if len(top) == cap(top) && a <= math.Abs(float64(top[len(top)-1].Value)) {
			continue
		}
		j := len(top)
		if j < cap(top) {
			top = append(top, DimWeight{})
		} else {
			j--
		}
		for j > 0 && math.Abs(float64(top[j-1].Value)) < a {
			top[j] = top[j-1]
			j--
		}
		top[j] = DimWeight{Dim: i, Value: x}
	}
	cs.Norm = math.Sqrt(ss)
	cs.Top = top
}
