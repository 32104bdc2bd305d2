package particle

import (
	"math"
	"slices"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// EdgeFacts is the compact copy of the fields of an edge that a graph
// walk checks for every edge it scans: scope, validity, status,
// confidence, keys of its agents and location, and whether its own
// policy is plain. The view keeps one per edge in a dense slice by seq,
// so that a walk rejects an edge by reading one 64-byte record instead
// of the edge and what it points to ([Reader.OutNewestFacts]).
//
// Facts are exact, not approximate, where FactExact is set: a check on
// them gives the answer the same check on the edge gives. The keys are
// the exception: different keys mean different values, equal keys may
// not (compare the strings on the edge then).
type EdgeFacts struct {
	// Times in Unix nanoseconds, 0 where the edge's time is zero.
	ScopeFrom, ScopeTo          int64
	ValidFrom, ValidTo, EndedAt int64
	Confidence                  float64
	// Agent is [EdgeAgentKey] of the edge.
	Agent uint32
	// Site is wave.SiteKey of the canonical form of Scope.Location.
	Site  uint32
	Flags FactFlags
}

// FactFlags are an edge's yes/no facts.
type FactFlags uint8

const (
	// FactLive marks facts that hold an edge (the zero EdgeFacts holds
	// none).
	FactLive FactFlags = 1 << iota
	// FactExact: every time of the edge is zero or a Unix nanosecond
	// count other than 0, so comparisons on the facts' times equal those
	// on the edge's.
	FactExact
	// FactPlain: the edge carries no policy or audience of its own and
	// is not a policy edge ([Guard.PlainEdgesVisible] then decides).
	FactPlain
	// FactSuperseded: the edge's status is superseded.
	FactSuperseded
	// FactLocated: the edge's scope names a location.
	FactLocated
)

// EdgeFactsOf computes e's facts, as the view holds them.
func EdgeFactsOf(e *Edge) EdgeFacts {
	f := EdgeFacts{Confidence: e.Confidence, Agent: EdgeAgentKey(e), Flags: FactLive | FactExact}
	exact := true
	for _, c := range []struct {
		to *int64
		t  time.Time
	}{{&f.ScopeFrom, e.Scope.TimeRange.From}, {&f.ScopeTo, e.Scope.TimeRange.To},
		{&f.ValidFrom, e.ValidFrom}, {&f.ValidTo, e.ValidTo}, {&f.EndedAt, e.EndedAt}} {
		ns, ok := FactTime(c.t)
		*c.to, exact = ns, exact && ok
	}
	if !exact {
		f.Flags &^= FactExact
	}
	if plainEdge(e) && e.Type != EdgePolicy {
		f.Flags |= FactPlain
	}
	if e.Status == StatusSuperseded {
		f.Flags |= FactSuperseded
	}
	if e.Scope.Location != "" {
		f.Flags |= FactLocated
		f.Site = wave.SiteKey(Canonical(e.Scope.Location))
	}
	return f
}

// Unix nanosecond bounds a time must fall within to be held exactly.
var (
	minFactTime = time.Unix(0, math.MinInt64+1)
	maxFactTime = time.Unix(0, math.MaxInt64)
)

// FactTime is t as EdgeFacts hold times: Unix nanoseconds, 0 for the
// zero time. ok is false when that count cannot stand for t (outside
// int64, or exactly the Unix epoch, whose count means zero): comparisons
// with the facts are then not exact.
func FactTime(t time.Time) (ns int64, ok bool) {
	if t.IsZero() {
		return 0, true
	}
	if t.Before(minFactTime) || t.After(maxFactTime) {
		return 0, false
	}
	ns = t.UnixNano()
	return ns, ns != 0
}

// EdgeAgentKey is the agent key of an edge's provenance: wave.AgentKey
// of its one agent, 0 without any, wave.AgentSetKey of its agents with
// several.
func EdgeAgentKey(e *Edge) uint32 {
	agent, key := "", uint32(0)
	var set []uint32
	for _, p := range e.Provenance {
		switch {
		case p.Agent == "" || p.Agent == agent:
		case agent == "":
			agent, key = p.Agent, wave.AgentKey(p.Agent)
		default:
			if set == nil {
				set = []uint32{key}
			}
			set = append(set, wave.AgentKey(p.Agent))
		}
	}
	if set != nil {
		return wave.AgentSetKey(set...)
	}
	return key
}

// setFacts stores an edge's facts at its seq (0: none).
func (v *view) setFacts(seq uint64, f EdgeFacts) {
	if seq == 0 {
		return
	}
	if need := int(seq) + 1 - len(v.edgeFacts); need > 0 {
		// As setSeq: past len the backing array is zero.
		v.edgeFacts = slices.Grow(v.edgeFacts, need)[:int(seq)+1]
	}
	v.edgeFacts[seq] = f
}

// unsetFacts clears the facts at seq.
func (v *view) unsetFacts(seq uint64) {
	if seq < uint64(len(v.edgeFacts)) {
		v.edgeFacts[seq] = EdgeFacts{}
	}
}

// EdgeFactsBySeq returns the facts of the edge with that seq (nil when
// there is none). The record is the view's: read it, don't keep it.
func (r Reader) EdgeFactsBySeq(seq uint64) *EdgeFacts {
	if seq < uint64(len(r.v.edgeFacts)) && r.v.edgeFacts[seq].Flags&FactLive != 0 {
		return &r.v.edgeFacts[seq]
	}
	return nil
}

// OutNewestFacts calls fn with the seq and facts of each edge leaving
// node id, newest first, until fn returns false.
func (r Reader) OutNewestFacts(id string, fn func(seq uint64, f *EdgeFacts) bool) {
	newestFacts(r, r.v.out[id], fn)
}

// InNewestFacts is OutNewestFacts for the edges entering node id.
func (r Reader) InNewestFacts(id string, fn func(seq uint64, f *EdgeFacts) bool) {
	newestFacts(r, r.v.in[id], fn)
}

func newestFacts(r Reader, seqs []uint64, fn func(uint64, *EdgeFacts) bool) {
	facts := r.v.edgeFacts
	for i := len(seqs) - 1; i >= 0; i-- {
		s := seqs[i]
		if s >= uint64(len(facts)) || facts[s].Flags&FactLive == 0 {
			continue
		}
		if !fn(s, &facts[s]) {
			return
		}
	}
}

// EdgesBySeq calls fn for every numbered edge with its facts, in seq
// order, until fn returns false. It walks dense slices: over a large
// graph it is much faster than Edges, which walks a map.
func (r Reader) EdgesBySeq(fn func(*Edge, *EdgeFacts) bool) {
	facts := r.v.edgeFacts
	for seq, e := range r.v.edgeSeq {
		if e != nil && seq < len(facts) && !fn(e, &facts[seq]) {
			return
		}
	}
}
