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

// MultiAgent is the agent key of an item several agents stand behind:
// every agent filter admits it (Allow decides).
const MultiAgent = math.MaxUint32

// AgentKey is the key of an agent name (0 for ""): 32-bit FNV-1a, never
// 0 or MultiAgent for a name.
func AgentKey(agent string) uint32 {
	if agent == "" {
		return 0
	}
	h := fnv32(agent)
	if h == 0 || h == MultiAgent {
		h = 1
	}
	return h
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
