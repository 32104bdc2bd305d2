package particle

import "slices"

// Principal is who reads: the roles it holds and, for a robot, its agent.
type Principal struct {
	Roles []string `json:"roles,omitempty"`
	Agent string   `json:"agent,omitempty"`
}

// EdgeVisible is the one policy check every read path applies to an edge:
// deny beats allow; a non-empty allow list admits only its roles; a
// non-empty audience admits only its roles (or the named agent).
func EdgeVisible(e *Edge, p Principal) bool {
	if e == nil {
		return false
	}
	return policyAdmits(e.Policy, p) && audienceAdmits(e.Scope.Audience, p)
}

func policyAdmits(pol Policy, p Principal) bool {
	for _, r := range p.Roles {
		if slices.Contains(pol.DenyRoles, r) {
			return false
		}
	}
	if len(pol.AllowRoles) == 0 {
		return true
	}
	for _, r := range p.Roles {
		if slices.Contains(pol.AllowRoles, r) {
			return true
		}
	}
	return false
}

func audienceAdmits(aud []string, p Principal) bool {
	if len(aud) == 0 {
		return true
	}
	if p.Agent != "" && slices.Contains(aud, p.Agent) {
		return true
	}
	for _, r := range p.Roles {
		if slices.Contains(aud, r) {
			return true
		}
	}
	return false
}

// NodeVisible is the policy check every read path applies to a node.
// Nodes carry no policy of their own in the data model yet, so every
// node of the caller's namespace is visible; policies attached to nodes
// extend this function, and every read path picks that up.
func NodeVisible(n *Node, p Principal) bool { return n != nil }
