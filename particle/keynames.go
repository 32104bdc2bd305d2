package particle

import (
	"math"
	"slices"

	"github.com/ctxgraph/ctxgraph/wave"
)

// keyNames records, for each key a view's edge facts hold for a name
// (the agent key of an edge's one agent, the site key of its canonical
// location), the one name it stands for, or that two names share it.
// Keys are hashes: without the record a walk whose key matches must
// read the edge to compare the strings. With it, a key that stands for
// exactly the name asked decides the match from the facts alone
// ([Reader.AgentKeyIs], [Reader.SiteKeyIs]).
//
// A record only grows: a name whose edges are all gone, or that now
// shares an agent set, stays recorded, which can only keep a key from
// being exact, never make a wrong one exact.
type keyNames struct {
	names map[uint32]keyName
	// The last key and name added: a load and a fleet's stream add the
	// same few names over and over.
	lastKey  uint32
	lastName string
}

type keyName struct {
	name   string
	shared bool // two names have this key: it decides nothing
}

// add records that key stands for name.
func (k *keyNames) add(key uint32, name string) {
	if key == k.lastKey && name == k.lastName && k.names != nil {
		return
	}
	if k.names == nil {
		k.names = map[uint32]keyName{}
	}
	switch old, ok := k.names[key]; {
	case !ok:
		k.names[key] = keyName{name: name}
	case !old.shared && old.name != name:
		k.names[key] = keyName{shared: true}
	}
	k.lastKey, k.lastName = key, name
}

// is reports whether key stands for name and nothing else.
func (k *keyNames) is(key uint32, name string) bool {
	n, ok := k.names[key]
	return ok && !n.shared && n.name == name
}

// edgeAgent is the one agent of e's provenance ("" when it has none or
// several), the agent EdgeAgentKey keys alone.
func edgeAgent(e *Edge) string {
	one := ""
	for i := range e.Provenance {
		switch a := e.Provenance[i].Agent; {
		case a == "" || a == one:
		case one == "":
			one = a
		default:
			return ""
		}
	}
	return one
}

// recordSite adds the canonical location behind the site key of e's
// facts f to the view's records.
func (v *view) recordSite(e *Edge, f *EdgeFacts) {
	if f.Site != 0 {
		loc := e.Scope.Location
		if loc != v.lastLocation {
			v.siteKeys.add(f.Site, Canonical(loc))
			v.lastLocation = loc
		}
	}
}

// agentSet is the agents of an edge whose provenance names several, as
// the view numbers agents (agentNumber): at most MaxProvenance, 0 in
// the slots left over. The view keeps one by seq for each such edge, so
// that a walk asking for one agent tells, from 16 bytes, whether the
// edge is among its experience where the facts' agent key (a Bloom
// filter of the set) cannot tell.
type agentSet [MaxProvenance]uint16

// agentSetUnknown marks a set with an agent the view could not number.
const agentSetUnknown = math.MaxUint16

// maxAgentNumbers bounds the agents the view numbers.
const maxAgentNumbers = math.MaxUint16 - 1

// agentNumber is the number of agent, numbering it if new (from 1); 0
// when the view numbers no more agents.
func (v *view) agentNumber(agent string) uint16 {
	if n, ok := v.agentNums[agent]; ok {
		return n
	}
	if len(v.agentNums) >= maxAgentNumbers {
		v.agentNumsFull = true
		return 0
	}
	if v.agentNums == nil {
		v.agentNums = map[string]uint16{}
	}
	n := uint16(len(v.agentNums) + 1)
	v.agentNums[agent] = n
	return n
}

// recordAgents records the agents behind the agent key of e's facts f:
// the name of its one agent (agentKeys), or, when its provenance names
// several, their set at its seq (edgeAgents), which an edge of at most
// one agent does not hold.
func (v *view) recordAgents(e *Edge, f *EdgeFacts) {
	if !wave.IsAgentSet(f.Agent) {
		if e.Seq < uint64(len(v.edgeAgents)) {
			v.edgeAgents[e.Seq] = agentSet{}
		}
		if f.Agent != 0 {
			if a := edgeAgent(e); a != "" {
				v.agentKeys.add(f.Agent, a)
			}
		}
		return
	}
	var set agentSet
	n := 0
	for i := range e.Provenance {
		a := e.Provenance[i].Agent
		if a == "" {
			continue
		}
		num := v.agentNumber(a)
		if num == 0 || n == len(set) && !slices.Contains(set[:], num) {
			set = agentSet{0: agentSetUnknown}
			break
		}
		if !slices.Contains(set[:n], num) {
			set[n] = num
			n++
		}
	}
	v.edgeAgents = setDense(v.edgeAgents, e.Seq, set)
}

// AgentNumber is the view's number for agent, for EdgeHasAgent. ok is
// false when the view numbers no more agents and agent has no number;
// a number of 0 with ok means no edge's agent set holds agent.
func (r Reader) AgentNumber(agent string) (num uint16, ok bool) {
	num = r.v.agentNums[agent]
	return num, num != 0 || !r.v.agentNumsFull
}

// EdgeHasAgent reports whether the provenance of the edge at seq, whose
// facts' agent key is a set (wave.IsAgentSet), names the agent numbered
// num (AgentNumber). known is false when the view holds no record of
// that edge's agents that can tell.
func (r Reader) EdgeHasAgent(seq uint64, num uint16) (has, known bool) {
	if seq >= uint64(len(r.v.edgeAgents)) {
		return false, false
	}
	set := &r.v.edgeAgents[seq]
	if set[0] == 0 || set[0] == agentSetUnknown {
		return false, false
	}
	return num != 0 && slices.Contains(set[:], num), true
}

// AgentKeyIs reports whether agent key key (wave.AgentKey) stands, in
// every edge's facts that hold it, for agent and no other: an edge whose
// facts' Agent is key then has agent as its one agent.
func (r Reader) AgentKeyIs(key uint32, agent string) bool { return r.v.agentKeys.is(key, agent) }

// SiteKeyIs reports whether site key key (wave.SiteKey) stands, in
// every edge's facts that hold it, for the canonical location canonical
// and no other.
func (r Reader) SiteKeyIs(key uint32, canonical string) bool { return r.v.siteKeys.is(key, canonical) }
