package particle

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// Observation is one sighting of a relation, from an RLDS step or a CMS
// span. [Batch.Observe] turns it into a new edge or reinforces the edge
// with the same identity.
type Observation struct {
	Namespace string
	Source    string // node id
	Target    string // node id
	Type      EdgeType
	Predicate string // for assertion edges; may be set for others
	Value     string
	// Confidence of this sighting in [0,1]; 0 means DefaultConfidence.
	Confidence float64
	Provenance Provenance
	At         time.Time
	// Decay and HalfLife set the salience dynamics of a new edge; the
	// source's (RLDS or a CMS level) parameters.
	Decay    wave.DecayFn
	HalfLife time.Duration
	// Reinforce is how much this sighting adds to salience, in [0,1]
	// (a CMS span's update size; a default for RLDS steps).
	Reinforce float64
	Policy    Policy
	Audience  []string
	Location  string
	// Embed computes the edge's embedding; called only for a new edge.
	Embed func() ([]float32, error)
}

// DefaultConfidence is the confidence of a sighting that states none.
const DefaultConfidence = 0.8

// Observe records o: a new edge, or more evidence for the existing one
// (salience decayed to now then reinforced, belief and confidence
// updated, provenance appended, time range widened). It reports whether
// the edge is new.
func (b *Batch) Observe(o Observation) (*Edge, bool, error) {
	if !o.Type.Valid() {
		return nil, false, fmt.Errorf("%w: unknown edge type %q", ErrInvalid, o.Type)
	}
	conf := o.Confidence
	if conf == 0 {
		conf = DefaultConfidence
	}
	if math.IsNaN(conf) || conf < 0 || conf > 1 {
		return nil, false, fmt.Errorf("%w: confidence %v outside [0,1]", ErrInvalid, conf)
	}
	at := o.At
	if at.IsZero() {
		at = b.now
	}
	if o.Provenance.ObservedAt.IsZero() {
		o.Provenance.ObservedAt = at
	}
	ns := o.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	// The identity of non-assertion edges ignores their label; a fact's
	// is its registered predicate and scope location.
	var reg *Predicate
	if o.Type == EdgeAssertion {
		if strings.TrimSpace(o.Predicate) == "" { // Canonical(o.Predicate) == ""
			return nil, false, fmt.Errorf("%w: an assertion needs a predicate", ErrInvalid)
		}
		var err error
		if reg, err = b.predicate(ns, o.Predicate); err != nil {
			return nil, false, err
		}
		o.Predicate = reg.Name
	}
	b.key = appendObservedIdentity(b.key[:0], ns, o.Source, o.Type, reg, o.Location, o.Target)
	if e := b.edgeByIdentity(b.key); e != nil {
		d := wave.Decay{Fn: wave.DecayFn(e.Salience.DecayFn), HalfLife: time.Duration(e.Salience.HalfLifeS * float64(time.Second))}
		last := e.Salience.LastUpdated
		if at.Before(last) {
			at = last // out-of-order evidence reinforces, it does not rewind
		}
		e.Salience.Score = wave.Reinforce(d.Apply(e.Salience.Score, last, at), o.Reinforce)
		e.Salience.LastUpdated = at
		e.Belief.Observe(conf, at)
		e.Confidence = e.Belief.Score
		e.Evidence++
		e.Provenance = append(e.Provenance, o.Provenance)
		if len(e.Provenance) > MaxProvenance {
			e.Provenance = slices.Delete(e.Provenance, 0, len(e.Provenance)-MaxProvenance)
		}
		widen(&e.Scope.TimeRange, o.Provenance.ObservedAt)
		if o.Value != "" && e.Assertion != nil {
			e.Assertion.Value = o.Value
		}
		return e, false, b.PutEdge(e)
	}
	// The edge, its sighting and its assertion in one box, of which the
	// batch commits a copy (commitEdge).
	e, box := newBoxedEdge(o.Provenance)
	*e = Edge{
		Namespace: ns, Source: o.Source, Target: o.Target, Type: o.Type,
		Scope:      Scope{TimeRange: TimeRange{From: o.Provenance.ObservedAt, To: o.Provenance.ObservedAt}, Location: o.Location, Audience: o.Audience},
		Provenance: e.Provenance, Evidence: 1,
		Confidence: conf, Belief: Belief{Score: 0.5},
		Salience: Salience{
			Score: wave.Reinforce(0, o.Reinforce), DecayFn: string(o.Decay),
			HalfLifeS: o.HalfLife.Seconds(), LastUpdated: at,
		},
		Policy: o.Policy, ValidFrom: o.Provenance.ObservedAt, Status: StatusActive,
	}
	e.Belief.Observe(conf, at)
	e.Confidence = e.Belief.Score
	if o.Predicate != "" || o.Value != "" {
		*box = Assertion{Predicate: Canonical(o.Predicate), Value: o.Value}
		e.Assertion = box
	}
	if o.Embed != nil {
		v, err := o.Embed()
		if err != nil {
			return nil, false, fmt.Errorf("embed edge: %w", err)
		}
		e.Embedding = v
		// The embedder may use the batch, and so its scratch key.
		b.key = appendObservedIdentity(b.key[:0], ns, o.Source, o.Type, reg, o.Location, o.Target)
	}
	// b.key is the identity of the new edge, as PutEdge would make it of
	// the edge (its assertion's predicate is Canonical(reg.Name), whose
	// canonical form is reg.Name's); putEdge copies it.
	if err := b.putEdge(e, b.key); err != nil {
		return nil, false, err
	}
	if reg != nil {
		if err := b.settle(e, reg); err != nil {
			return nil, false, err
		}
	}
	return e, true, nil
}

// appendObservedIdentity appends the identity of an observed edge:
// edgeIdentity(ns, src, t, pred, dst) where pred is factKey(reg.Name,
// location) for a fact (reg set), else "". The fact key is written in
// place: Canonical of it is Canonical(reg.Name) [+ "@" +
// Canonical(location)], each part canonical already.
func appendObservedIdentity(k []byte, ns, src string, t EdgeType, reg *Predicate, location, dst string) []byte {
	k = appendIdentityHead(k, ns, src, t)
	if reg != nil {
		k = appendFactKey(k, reg.Name, location)
	}
	return appendIdentityTail(k, dst)
}

func widen(r *TimeRange, t time.Time) {
	if t.IsZero() {
		return
	}
	if r.From.IsZero() || t.Before(r.From) {
		r.From = t
	}
	if r.To.IsZero() || t.After(r.To) {
		r.To = t
	}
}

// TouchNode records that node n was seen in an episode or span: belief
// strengthened and the episode or span id remembered (most recent
// MaxAttributeIDs).
func TouchNode(n *Node, episodeID, spanID string, conf float64, at time.Time) {
	if conf == 0 {
		conf = DefaultConfidence
	}
	n.Belief.Observe(conf, at)
	if episodeID != "" {
		n.Attributes.RLDSEpisodeIDs = appendRecent(n.Attributes.RLDSEpisodeIDs, episodeID)
	}
	if spanID != "" {
		n.Attributes.CMSSpanIDs = appendRecent(n.Attributes.CMSSpanIDs, spanID)
	}
}

// MaxAttributeIDs bounds the episode and span id lists of a node.
const MaxAttributeIDs = 64

// appendRecent returns ids with id last, at most MaxAttributeIDs of
// them. It never writes the ids it was given (a batch's copy of a node
// shares its lists with the view's, cloneNode): an id already listed
// moves to the end in a new slice, the oldest goes in a new slice, and
// otherwise id is appended, past the end that any holder of ids reads.
func appendRecent(ids []string, id string) []string {
	if n := len(ids); n > 0 && eqID(ids[n-1], id) {
		return ids // the most recent already: a step touches its episode's nodes again and again
	}
	if i := indexOf(ids, id); i >= 0 {
		out := make([]string, 0, len(ids))
		out = append(append(out, ids[:i]...), ids[i+1:]...)
		out = append(out, id)
		return out[max(0, len(out)-MaxAttributeIDs):]
	}
	if len(ids) < MaxAttributeIDs {
		return append(ids, id)
	}
	out := make([]string, 0, MaxAttributeIDs)
	out = append(out, ids[len(ids)-MaxAttributeIDs+1:]...)
	return append(out, id)
}

// indexOf is slices.Index, with eqID.
func indexOf(ids []string, id string) int {
	for i, s := range ids {
		if eqID(s, id) {
			return i
		}
	}
	return -1
}

// HasID is slices.Contains for a list of ids, searching from the end:
// an episode's node and edge lists meet again mostly what they took
// last.
func HasID(ids []string, id string) bool {
	for i := len(ids) - 1; i >= 0; i-- {
		if eqID(ids[i], id) {
			return true
		}
	}
	return false
}

// eqID is s == id. The ids of a list have one length and differ mostly
// at the end, so lengths and last bytes are compared before the rest.
func eqID(s, id string) bool {
	return len(s) == len(id) && (len(s) == 0 || s[len(s)-1] == id[len(id)-1]) && s == id
}

// AddTag adds tag to n's tags once.
func AddTag(n *Node, tag string) {
	if tag != "" && !slices.Contains(n.Attributes.Tags, tag) {
		n.Attributes.Tags = append(n.Attributes.Tags, tag)
	}
}
