package particle

import (
	"math"
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
// not (compare the strings on the edge then). NS is exact always.
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
	// Decay is the edge's decay function where its [EdgeSalience] is
	// exact, FactDecayEdge where the edge must be read.
	Decay FactDecay
	// NS is the view's number for the edge's namespace
	// ([Reader.NamespaceKey]): equal numbers, equal namespaces.
	// EdgeFactsOf leaves it 0 (no namespace's); the view sets it.
	NS uint32
}

// EdgeSalience is the compact copy of what an edge's decayed salience
// is computed from, beside its facts: 24 bytes by seq, read for the
// edges a walk admits and scores ([Reader.EdgeSalienceBySeq]), so that
// it ranks them without reading the edges. It is exact where the
// facts' Decay is not FactDecayEdge.
type EdgeSalience struct {
	Score float64
	// LastUpdated in Unix nanoseconds, as [FactTime] holds it.
	LastUpdated int64
	HalfLifeS   float64
}

// FactDecay is an edge's salience decay function as a code.
type FactDecay uint8

const (
	// FactDecayEdge: the edge's function is none of the known ones, or
	// its LastUpdated is not held exactly: read the edge.
	FactDecayEdge    FactDecay = iota
	FactDecayDefault           // "", which decays as wave.DecayExp
	FactDecayExp
	FactDecayPower
	FactDecayLinear
)

var factDecayFns = [...]wave.DecayFn{FactDecayDefault: "", FactDecayExp: wave.DecayExp,
	FactDecayPower: wave.DecayPower, FactDecayLinear: wave.DecayLinear}

// Fn is the decay function d stands for ("" for FactDecayEdge, which
// stands for none).
func (d FactDecay) Fn() wave.DecayFn { return factDecayFns[d] }

// factDecayOf is the code of s's decay function, FactDecayEdge where
// the code and an EdgeSalience cannot stand for s.
func factDecayOf(s Salience) FactDecay {
	if _, ok := FactTime(s.LastUpdated); !ok {
		return FactDecayEdge
	}
	switch wave.DecayFn(s.DecayFn) {
	case "":
		return FactDecayDefault
	case wave.DecayExp:
		return FactDecayExp
	case wave.DecayPower:
		return FactDecayPower
	case wave.DecayLinear:
		return FactDecayLinear
	}
	return FactDecayEdge
}

// EdgeSalienceOf is e's salience record, as the view holds it.
func EdgeSalienceOf(e *Edge) EdgeSalience {
	last, _ := FactTime(e.Salience.LastUpdated)
	return EdgeSalience{Score: e.Salience.Score, LastUpdated: last, HalfLifeS: e.Salience.HalfLifeS}
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
	// FactUnit: the edge's embedding has unit length ([wave.IsUnit]), so
	// a vector index can keep it as it is without checking (a reopen's
	// index fill would read 1.5 GB of embeddings at 1M edges to find
	// that out; a view snapshot's records say it, so that a load reads
	// none of them).
	FactUnit
)

// EdgeFactsOf computes e's facts, as the view holds them but for NS.
func EdgeFactsOf(e *Edge) EdgeFacts { return edgeFacts(e, wave.IsUnit(e.Embedding)) }

// edgeFacts is EdgeFactsOf for an edge whose embedding has unit length
// when unit is set (known without reading it).
func edgeFacts(e *Edge, unit bool) EdgeFacts {
	f := EdgeFacts{Confidence: e.Confidence, Agent: EdgeAgentKey(e), Flags: FactLive | FactExact, Decay: factDecayOf(e.Salience)}
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
	if unit {
		f.Flags |= FactUnit
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

// FactInstant is the time that FactTime holds as ns: the zero time for
// 0. Where FactTime was ok, it is the same instant as the time given
// (comparisons and differences equal those on it; the location is
// Local).
func FactInstant(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// FactSince is FactInstant(now).Sub(FactInstant(ns)) for now other than
// 0, without building either time: the difference, or the bound of
// Duration it passes.
func FactSince(now, ns int64) time.Duration {
	if ns == 0 {
		// The zero time is centuries before any other.
		return math.MaxInt64
	}
	d := now - ns
	if (now^ns)&(now^d) < 0 { // overflowed: the signs differ, and d's is ns's
		if now > ns {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return time.Duration(d)
}

// EdgeAgentKey is the agent key of an edge's provenance: wave.AgentKey
// of its one agent, 0 without any, wave.AgentSetKey of its agents with
// several.
func EdgeAgentKey(e *Edge) uint32 {
	agent, key := "", uint32(0)
	var set []uint32
	for i := range e.Provenance {
		p := &e.Provenance[i] // 88 bytes: read in place
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

// setFacts stores the facts f of edge e at its seq (0: none), with e's
// salience record, and returns them as stored: with the number of e's
// namespace. keepCode: e has the embedding its seq's code was made of,
// or (a load) every code is made stale at the end (linkLoaded).
func (v *view) setFacts(e *Edge, f EdgeFacts, keepCode bool) EdgeFacts {
	if e.Seq == 0 {
		return f
	}
	f.NS = v.nsKey(e.Namespace)
	v.recordAgents(e, &f)
	v.recordSite(e, &f)
	if !keepCode {
		v.codes.stale(e.Seq, e.Embedding)
	}
	v.edgeFacts = setDense(v.edgeFacts, e.Seq, f)
	v.edgeSal = setDense(v.edgeSal, e.Seq, EdgeSalienceOf(e))
	return f
}

// setDense stores x at index seq of s, growing s as needed (roomFor).
func setDense[T any](s []T, seq uint64, x T) []T {
	if seq >= uint64(len(s)) {
		// Past len the backing array is zero: the view never shrinks.
		s = roomFor(s, seq)[:seq+1]
	}
	s[seq] = x
	return s
}

// unsetFacts clears the facts and salience record at seq.
func (v *view) unsetFacts(seq uint64) {
	if seq < uint64(len(v.edgeFacts)) {
		v.edgeFacts[seq] = EdgeFacts{}
	}
	if seq < uint64(len(v.edgeSal)) {
		v.edgeSal[seq] = EdgeSalience{}
	}
	if seq < uint64(len(v.edgeAgents)) {
		v.edgeAgents[seq] = agentSet{}
	}
	v.codes.unset(seq)
}

// nsKey is the number of namespace ns in edge facts, numbering it if
// new (from 1; a view never renumbers). The last namespace numbered is
// remembered: a load puts the edges of one namespace in a row.
func (v *view) nsKey(ns string) uint32 {
	if ns == v.lastNS && v.lastNSKey != 0 {
		return v.lastNSKey
	}
	k, ok := v.nsKeys[ns]
	if !ok {
		k = uint32(len(v.nsKeys) + 1)
		v.nsKeys[ns] = k
	}
	v.lastNS, v.lastNSKey = ns, k
	return k
}

// NamespaceKey is the number that the facts of namespace ns's edges
// hold as NS: EdgeFacts.NS == r.NamespaceKey(ns) exactly when the
// edge's namespace is ns. It is 0, which no facts hold, for a
// namespace without edges.
func (r Reader) NamespaceKey(ns string) uint32 { return r.v.nsKeys[ns] }

// EdgeFactsBySeq returns the facts of the edge with that seq (nil when
// there is none). The record is the view's: read it, don't keep it.
func (r Reader) EdgeFactsBySeq(seq uint64) *EdgeFacts {
	if seq < uint64(len(r.v.edgeFacts)) && r.v.edgeFacts[seq].Flags&FactLive != 0 {
		return &r.v.edgeFacts[seq]
	}
	return nil
}

// EdgeSalienceBySeq returns the salience record of the edge with that
// seq (nil when there is none). It is exact where the edge's facts say
// so (EdgeFacts.Decay); read it, don't keep it.
func (r Reader) EdgeSalienceBySeq(seq uint64) *EdgeSalience {
	if seq < uint64(len(r.v.edgeSal)) {
		return &r.v.edgeSal[seq]
	}
	return nil
}

// OutNewestFacts calls fn with the seq and facts of each edge leaving
// node id, newest first, until fn returns false. target is the seq of
// the node the edge enters as it was when the edge was linked, 0 when
// unknown: [Reader.NodeBySeq] finds that node there, or nothing (the
// node was removed or renumbered since), and then [Reader.Node] of the
// edge's Target is the one to ask.
func (r Reader) OutNewestFacts(id string, fn func(seq uint64, f *EdgeFacts, target uint64) bool) {
	r.v.awaitLinks()
	newestFacts(r.v.out[id], fn)
}

// InNewestFacts is OutNewestFacts for the edges entering node id, with
// the seq of the node each edge leaves.
func (r Reader) InNewestFacts(id string, fn func(seq uint64, f *EdgeFacts, source uint64) bool) {
	r.v.awaitLinks()
	newestFacts(r.v.in[id], fn)
}

func newestFacts(list []adjEdge, fn func(uint64, *EdgeFacts, uint64) bool) {
	for i := len(list) - 1; i >= 0; i-- {
		a := &list[i]
		if a.facts.Flags&FactLive == 0 {
			continue
		}
		if !fn(a.seq, &a.facts, a.end) {
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
