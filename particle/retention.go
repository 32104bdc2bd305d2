package particle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// RetentionRule says when an item of one kind and type has faded for
// good: its decayed salience has stayed below Below for at least For.
//
// An edge's salience is its own, decayed to now. A node's is the
// strongest decayed salience among the edges touching it, so a node
// fades only when all its relations have; a node without edges has
// faded since it was last updated.
type RetentionRule struct {
	// Kind is "edge" or "node".
	Kind string `yaml:"kind" json:"kind"`
	// Type is the edge or node type the rule covers; empty covers every
	// type of the kind (episode nodes are never removed by retention:
	// their steps are the record of what a robot did).
	Type string `yaml:"type" json:"type,omitempty"`
	// Below is the salience threshold, in (0, 1].
	Below float64 `yaml:"below" json:"below"`
	// For is how long the salience must have stayed below it.
	For time.Duration `yaml:"for" json:"for"`
}

// Validate reports what is wrong with the rule.
func (r RetentionRule) Validate() error {
	var errs []error
	switch r.Kind {
	case "edge":
		if r.Type != "" && !EdgeType(r.Type).Valid() {
			errs = append(errs, fmt.Errorf("unknown edge type %q", r.Type))
		}
	case "node":
		if r.Type != "" && !NodeType(r.Type).Valid() {
			errs = append(errs, fmt.Errorf("unknown node type %q", r.Type))
		}
		if NodeType(r.Type) == NodeEpisode {
			errs = append(errs, errors.New("episode nodes are not subject to retention"))
		}
	default:
		errs = append(errs, fmt.Errorf("kind %q must be edge or node", r.Kind))
	}
	if !(r.Below > 0 && r.Below <= 1) {
		errs = append(errs, fmt.Errorf("below %v must be in (0, 1]", r.Below))
	}
	if r.For < 0 {
		errs = append(errs, fmt.Errorf("for %v must not be negative", r.For))
	}
	return errors.Join(errs...)
}

func (r RetentionRule) covers(kind, typ string) bool {
	return r.Kind == kind && (r.Type == "" || r.Type == typ)
}

// RetentionOptions configures one retention pass.
type RetentionOptions struct {
	Rules []RetentionRule
	// Archive keeps each removed item as a record (kind "archive-edge"
	// or "archive-node", keyed by id) instead of deleting it outright.
	Archive bool
	// Now is the time salience is decayed to. Zero means time.Now().
	Now time.Time
	// MaxPerBatch bounds the items removed in one transaction. Default 256.
	MaxPerBatch int
}

// RetentionReport is what one pass removed.
type RetentionReport struct {
	At       time.Time `json:"at"`
	Edges    int       `json:"edges"`
	Nodes    int       `json:"nodes"`
	Archived bool      `json:"archived"`
}

// Record kinds retention writes.
const (
	RecordArchiveEdge = "archive-edge"
	RecordArchiveNode = "archive-node"
	RecordRetention   = "retention"
)

// Retain removes (or archives) every edge and node that a rule says has
// faded: first the faded edges, then the faded nodes with whatever edges
// they still have. It writes in batches of MaxPerBatch items, each one
// transaction, and records the pass (kind "retention"). Removed items
// leave the view and, through Changes, the derived indexes.
func (s *Store) Retain(ctx context.Context, o RetentionOptions) (RetentionReport, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = o.Now.UTC()
	if o.MaxPerBatch <= 0 {
		o.MaxPerBatch = 256
	}
	rep := RetentionReport{At: o.Now, Archived: o.Archive}
	for _, r := range o.Rules {
		if err := r.Validate(); err != nil {
			return rep, fmt.Errorf("%w: retention rule %+v: %v", ErrInvalid, r, err)
		}
	}
	if len(o.Rules) == 0 {
		return rep, nil
	}
	for _, kind := range []string{"edge", "node"} {
		for {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			n := 0
			_, err := s.Update(ctx, func(b *Batch) error {
				var ids []string
				s.Read(func(r Reader) {
					if kind == "edge" {
						ids = fadedEdges(r, o)
					} else {
						ids = fadedNodes(r, o)
					}
				})
				if len(ids) > o.MaxPerBatch {
					ids = ids[:o.MaxPerBatch]
				}
				n = len(ids)
				for _, id := range ids {
					if err := b.retire(kind, id, o.Archive); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return rep, err
			}
			if kind == "edge" {
				rep.Edges += n
			} else {
				rep.Nodes += n
			}
			if n < o.MaxPerBatch {
				break
			}
		}
	}
	if rep.Edges+rep.Nodes > 0 {
		raw, _ := json.Marshal(rep)
		if _, err := s.Update(ctx, func(b *Batch) error {
			return b.PutRecord(RecordRetention, rep.At.Format(time.RFC3339Nano), raw)
		}); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// retire archives (if asked) and deletes one edge or node; a node
// takes its remaining edges with it.
func (b *Batch) retire(kind, id string, archive bool) error {
	if kind == "edge" {
		if archive {
			if err := b.archiveEdge(id); err != nil {
				return err
			}
		}
		return b.DeleteEdge(id)
	}
	n := b.Node(id)
	if n == nil {
		return nil
	}
	if archive {
		raw, err := encodeNode(n)
		if err != nil {
			return err
		}
		if err := b.PutRecord(RecordArchiveNode, id, raw); err != nil {
			return err
		}
		for _, eid := range b.touching(id) {
			if err := b.archiveEdge(eid); err != nil {
				return err
			}
		}
	}
	return b.DeleteNode(id)
}

func (b *Batch) archiveEdge(id string) error {
	e := b.Edge(id)
	if e == nil {
		return nil
	}
	raw, err := encodeEdge(e)
	if err != nil {
		return err
	}
	return b.PutRecord(RecordArchiveEdge, id, raw)
}

func ruleFor(rules []RetentionRule, kind, typ string) (RetentionRule, bool) {
	for _, r := range rules {
		if r.covers(kind, typ) {
			return r, true
		}
	}
	return RetentionRule{}, false
}

// fadedEdges lists, in id order, the edges a rule says have faded.
func fadedEdges(r Reader, o RetentionOptions) []string {
	var ids []string
	r.Edges(func(e *Edge) bool {
		rule, ok := ruleFor(o.Rules, "edge", string(e.Type))
		if ok && o.Now.Sub(fadedSince(e, rule.Below)) >= rule.For {
			ids = append(ids, e.ID)
		}
		return true
	})
	slices.Sort(ids)
	return ids
}

// fadedNodes lists, in id order, the nodes a rule says have faded.
func fadedNodes(r Reader, o RetentionOptions) []string {
	var ids []string
	r.Nodes(func(n *Node) bool {
		if n.Type == NodeEpisode {
			return true
		}
		rule, ok := ruleFor(o.Rules, "node", string(n.Type))
		if !ok {
			return true
		}
		since := n.UpdatedAt
		edges := 0
		each := func(e *Edge) bool {
			edges++
			t := fadedSince(e, rule.Below)
			if edges == 1 || t.After(since) {
				since = t
			}
			return true
		}
		r.Out(n.ID, each)
		r.In(n.ID, each)
		if o.Now.Sub(since) >= rule.For {
			ids = append(ids, n.ID)
		}
		return true
	})
	slices.Sort(ids)
	return ids
}

// never is the fading time of an edge that never fades.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// fadedSince is when e's salience, decaying from its last update, fell
// below threshold (its last update if it was already below; never if
// its decay never takes it there). Salience only decays between
// sightings, and a sighting sets LastUpdated, so this is exact.
func fadedSince(e *Edge, threshold float64) time.Time {
	s, last := e.Salience.Score, e.Salience.LastUpdated
	if s < threshold {
		return last
	}
	d := wave.Decay{Fn: wave.DecayFn(e.Salience.DecayFn), HalfLife: time.Duration(e.Salience.HalfLifeS * float64(time.Second))}
	if d.Validate() != nil {
		return never
	}
	// The curves are non-increasing: find the first age below the
	// threshold by doubling, then bisect to a millisecond.
	hi := d.HalfLife
	for s*d.Factor(hi) >= threshold {
		if hi > math.MaxInt64/4 {
			return never
		}
		hi *= 2
	}
	lo := time.Duration(0)
	for hi-lo > time.Millisecond {
		mid := lo + (hi-lo)/2
		if s*d.Factor(mid) >= threshold {
			lo = mid
		} else {
			hi = mid
		}
	}
	return last.Add(hi)
}
