package rlds

import (
	"cmp"
	"slices"
)

// StepGrouper gathers the step messages of a stream into steps messages
// (KindSteps) of up to N steps each, per episode, for a sender that
// does not need each step seen on its own: an upload, a replay, a
// controller stepping faster than the planner asks. Messages of an
// episode keep their order: a start or an end sends the episode's held
// steps first, and so does a step whose index does not follow the held
// ones. Episodes do not wait on each other. A group of one step is sent
// as the step message it was.
//
// A StepGrouper is not safe for concurrent use.
type StepGrouper struct {
	// N is the most steps a steps message carries; N ≤ 1 sends every
	// message as it comes.
	N int

	held map[groupKey]*heldSteps
	seq  uint64
}

// groupKey names one episode's stream: its namespace, agent and id.
type groupKey struct{ tenant, project, agent, episode string }

// heldSteps is one episode's steps not yet sent, and when the first of
// them came (Flush sends the oldest first).
type heldSteps struct {
	msg   *Message
	first uint64
}

// Add takes m and returns the messages now ready to send, in order.
func (g *StepGrouper) Add(m *Message) []*Message {
	if g.N <= 1 {
		return []*Message{m}
	}
	k := groupKey{m.Tenant, m.Project, m.Agent, m.EpisodeID}
	h := g.held[k]
	var out []*Message
	if m.Kind != KindStep || m.Step == nil {
		if h != nil {
			out = append(out, g.release(k, h))
		}
		return append(out, m)
	}
	if h != nil && m.Step.Index <= h.msg.Steps[len(h.msg.Steps)-1].Index {
		out = append(out, g.release(k, h))
		h = nil
	}
	if h == nil {
		if g.held == nil {
			g.held = map[groupKey]*heldSteps{}
		}
		g.seq++
		h = &heldSteps{msg: &Message{Kind: KindSteps, Agent: m.Agent, EpisodeID: m.EpisodeID, Tenant: m.Tenant, Project: m.Project,
			Steps: make([]Step, 0, g.N)}, first: g.seq}
		g.held[k] = h
	}
	h.msg.Steps = append(h.msg.Steps, *m.Step)
	if len(h.msg.Steps) >= g.N {
		out = append(out, g.release(k, h))
	}
	return out
}

// Flush returns every message still held, the episodes in the order
// their held steps began.
func (g *StepGrouper) Flush() []*Message {
	hs := make([]*heldSteps, 0, len(g.held))
	for _, h := range g.held {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *heldSteps) int { return cmp.Compare(a.first, b.first) })
	out := make([]*Message, len(hs))
	for i, h := range hs {
		out[i] = single(h.msg)
	}
	clear(g.held)
	return out
}

// release forgets k's held steps and returns them as one message.
func (g *StepGrouper) release(k groupKey, h *heldSteps) *Message {
	delete(g.held, k)
	return single(h.msg)
}

// single returns a steps message of one step as that step's message.
func single(m *Message) *Message {
	if len(m.Steps) != 1 {
		return m
	}
	s := m.Steps[0]
	return &Message{Kind: KindStep, Agent: m.Agent, EpisodeID: m.EpisodeID, Tenant: m.Tenant, Project: m.Project, Step: &s}
}

// GroupSteps returns msgs with each episode's consecutive steps gathered
// into steps messages of up to n steps (StepGrouper).
func GroupSteps(msgs []*Message, n int) []*Message {
	g := StepGrouper{N: n}
	out := make([]*Message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, g.Add(m)...)
	}
	return append(out, g.Flush()...)
}

// SplitSteps halves a steps message of two steps or more (for one too
// large to send), each half a steps message or, of one step, a step
// message; ok is false for any other message.
func (m *Message) SplitSteps() (first, second *Message, ok bool) {
	if m.Kind != KindSteps || len(m.Steps) < 2 {
		return nil, nil, false
	}
	half := len(m.Steps) / 2
	a, b := *m, *m
	a.Steps, b.Steps = m.Steps[:half:half], m.Steps[half:]
	return single(&a), single(&b), true
}
