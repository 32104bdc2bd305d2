package client

import (
	"fmt"
	"math"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// Synthetic describes a simulated robot controller: deterministic
// episodes whose steps carry a state vector, an action and annotations
// (the agent's tool, one of a few objects, its cell), as a real
// controller streams them. The crash test and the soak drive the daemon
// with it.
type Synthetic struct {
	Agent string
	// Objects is how many distinct objects the robot handles (default 8).
	Objects int
	// StateDim and ActionDim size the observation and action (default
	// 7 and 4).
	StateDim, ActionDim int
}

func (s Synthetic) defaults() Synthetic {
	if s.Objects <= 0 {
		s.Objects = 8
	}
	if s.StateDim <= 0 {
		s.StateDim = 7
	}
	if s.ActionDim <= 0 {
		s.ActionDim = 4
	}
	return s
}

// Tool is the tool every step of the agent's episodes uses: the edge
// agent -uses-> tool gains one piece of evidence per applied step.
func (s Synthetic) Tool() string { return "gripper of " + s.Agent }

// Evidence is how many steps of the agent the store applied, as the
// evidence of its agent -uses-> tool edge counts them: one per applied
// step, so a step applied twice shows as one too many (-1: no edge).
func (s Synthetic) Evidence(store *particle.Store) int {
	ev := -1
	store.Read(func(r particle.Reader) {
		a := r.Lookup(particle.DefaultNamespace, particle.NodeAgent, s.Agent)
		tool := r.Lookup(particle.DefaultNamespace, particle.NodeTool, s.Tool())
		if a == nil || tool == nil {
			return
		}
		r.Out(a.ID, func(e *particle.Edge) bool {
			if e.Target == tool.ID {
				ev = e.Evidence
			}
			return true
		})
	})
	return ev
}

// Start is the first message of episode ep, starting at t0.
func (s Synthetic) Start(ep string, t0 time.Time) *rlds.Message {
	return &rlds.Message{Kind: rlds.KindEpisodeStart, Agent: s.Agent, EpisodeID: ep,
		Start: &rlds.EpisodeStart{StartTime: t0, Location: "cell " + s.Agent,
			LanguageInstruction: "pick up the part and place it in the tray"}}
}

// Step is step i of episode ep (at t0 + i × 100 ms).
func (s Synthetic) Step(ep string, i int, t0 time.Time) *rlds.Message {
	s = s.defaults()
	state := make([]float64, s.StateDim)
	for j := range state {
		state[j] = math.Sin(float64(i+1) * float64(j+1) / 10)
	}
	action := make([]float64, s.ActionDim)
	for j := range action {
		action[j] = math.Cos(float64(i+j) / 7)
	}
	obj := fmt.Sprintf("part %d", i%s.Objects)
	return &rlds.Message{Kind: rlds.KindStep, Agent: s.Agent, EpisodeID: ep, Step: &rlds.Step{
		Index: i, Timestamp: t0.Add(time.Duration(i) * 100 * time.Millisecond),
		Observation: rlds.Features{"state": {DType: rlds.Float32, Shape: []int{s.StateDim}, Data: state}},
		Action:      rlds.Features{"": {DType: rlds.Float32, Shape: []int{s.ActionDim}, Data: action}},
		Discount:    1, IsFirst: i == 0,
		Annotations: &rlds.Annotations{Entities: []string{obj}, Tool: s.Tool()},
	}}
}

// End is the last message of an episode of n steps.
func (s Synthetic) End(ep string, n int, t0 time.Time) *rlds.Message {
	ok := true
	return &rlds.Message{Kind: rlds.KindEpisodeEnd, Agent: s.Agent, EpisodeID: ep,
		End: &rlds.EpisodeEnd{EndTime: t0.Add(time.Duration(n) * 100 * time.Millisecond), Success: &ok, Steps: n}}
}

// Episode is a whole episode of n steps: start, steps, end.
func (s Synthetic) Episode(ep string, n int, t0 time.Time) []*rlds.Message {
	out := []*rlds.Message{s.Start(ep, t0)}
	for i := range n {
		out = append(out, s.Step(ep, i, t0))
	}
	return append(out, s.End(ep, n, t0))
}
