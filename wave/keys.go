package wave

import "math"

// Agent, site and confidence keys are compact stand-ins, in [Meta] and
// [Filter], for constraints whose exact form (strings, float64) the
// caller checks in [Filter.Allow]. They let an index reject most items
// a constraint rules out before scoring them. A key rejects only what
// the exact check would reject: two different keys always mean two
// different values, and the confidence level rounds in the item's
// favour. Equal keys may still stand for different values, which Allow
// then tells apart.

// An agent key is one of: 0 (no agent known), the key of one agent
// (AgentKey: 31 bits, the top bit clear), or the key of a set of agents
// (AgentSetKey: the top bit set, and a 31-bit Bloom filter of them).
// MultiAgent, every bit set, is the set that admits every agent.
const (
	agentSetFlag = 1 << 31
	agentKeyMask = agentSetFlag - 1
)

// MultiAgent is the agent key of an item whose agents are not known
// one by one: every agent filter admits it (Allow decides).
const MultiAgent = math.MaxUint32

// AgentKey is the key of an agent name (0 for ""): 32-bit FNV-1a with
// the top bit cleared, never 0.
func AgentKey(agent string) uint32 {
	if agent == "" {
		return 0
	}
	h := fnv32(agent) & agentKeyMask
	if h == 0 {
		h = 1
	}
	return h
}

// AgentSetKey is the key of several agents, given by their AgentKeys: a
// filter for any of them admits the item, a filter for another agent
// rejects it unless the Bloom filter's bits collide (with 8 agents,
// about one time in four).
func AgentSetKey(keys ...uint32) uint32 {
	set := uint32(agentSetFlag)
	for _, k := range keys {
		set |= agentSetBit(k)
	}
	return set
}

// IsAgentSet reports whether agent key k is the key of a set of agents
// (AgentSetKey or MultiAgent) rather than of one.
func IsAgentSet(k uint32) bool { return k&agentSetFlag != 0 }

// agentSetBit is agent key k's bit in a set key.
func agentSetBit(k uint32) uint32 { return 1 << (k % 31) }

// AgentFilterAdmits reports whether a filter for agent key want admits
// an item of agent key have: false only when the item cannot be that
// agent's (0 on either side admits).
func AgentFilterAdmits(want, have uint32) bool {
	switch {
	case want == 0 || have == 0 || have == want:
		return true
	case have&agentSetFlag != 0:
		return want&agentSetFlag != 0 || have&agentSetBit(want) != 0
	}
	return false
}

// SiteKey is the key of a location in its canonical form (0 for ""):
// 32-bit FNV-1a folded to 24 bits, never 0 for a location. The caller
// canonicalises (the same form on both sides).
func SiteKey(canonical string) uint32 {
	if canonical == "" {
		return 0
	}
	h := fnv32(canonical)
	h = (h>>24 ^ h) & siteMask
	if h == 0 {
		h = 1
	}
	return h
}

// siteMask bounds site keys to 24 bits (packed with the confidence level).
const siteMask = 1<<24 - 1

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Confidence levels: a confidence in [0, 1] maps to 1..255.
const confLevels = 254

// ConfidenceLevel is the level of an item's confidence c in [0, 1]:
// 1 + ⌈254·c⌉, clamped to 1..255. An item admitted by a minimum m keeps
// ConfidenceLevel(c) ≥ MinConfidenceLevel(m) whenever c ≥ m.
func ConfidenceLevel(c float64) uint8 {
	switch {
	case !(c > 0): // also NaN
		return 1
	case c >= 1:
		return 255
	}
	return uint8(1 + math.Ceil(c*confLevels))
}

// MinConfidenceLevel is the filter level for a minimum confidence m
// (0, which admits everything, when m <= 0): 1 + ⌊254·m⌋, at most 255.
func MinConfidenceLevel(m float64) uint8 {
	switch {
	case !(m > 0):
		return 0
	case m >= 1:
		return 255
	}
	return uint8(1 + math.Floor(m*confLevels))
}
