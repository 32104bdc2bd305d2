package bench

import (
	"encoding/json"

	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// The generator's vectors are whole numbers; these views of the wire
// types marshal them as integers (the same JSON, written several times
// faster). Each outer field shadows the embedded one of the same name.
type (
	msgJSON struct {
		*rlds.Message
		Step  *stepJSON  `json:"step,omitempty"`
		Steps []stepJSON `json:"steps,omitempty"`
	}
	stepJSON struct {
		*rlds.Step
		Annotations *annJSON `json:"annotations,omitempty"`
	}
	annJSON struct {
		*rlds.Annotations
		Events []eventJSON `json:"events,omitempty"`
	}
	eventJSON struct {
		rlds.Event
		Embedding intVec `json:"embedding,omitempty"`
	}
	queryJSON struct {
		*Query
		Request requestJSON `json:"request"`
	}
	requestJSON struct {
		*planner.Request
		Vector intVec `json:"vector,omitempty"`
	}
)

// marshalMessage is json.Marshal(m) with integer vectors.
func marshalMessage(m *rlds.Message) ([]byte, error) {
	v := msgJSON{Message: m}
	if s := m.Step; s != nil {
		v.Step = stepView(s)
	}
	if m.Steps != nil {
		v.Steps = make([]stepJSON, len(m.Steps))
		for i := range m.Steps {
			v.Steps[i] = *stepView(&m.Steps[i])
		}
	}
	return json.Marshal(v)
}

// stepView is s with its event embeddings marshalled as integers.
func stepView(s *rlds.Step) *stepJSON {
	v := &stepJSON{Step: s}
	if a := s.Annotations; a != nil {
		v.Annotations = &annJSON{Annotations: a}
		for _, e := range a.Events {
			v.Annotations.Events = append(v.Annotations.Events, eventJSON{Event: e, Embedding: e.Embedding})
		}
	}
	return v
}

// marshalQuery is json.Marshal(q) with an integer vector.
func marshalQuery(q *Query) ([]byte, error) {
	return json.Marshal(queryJSON{Query: q, Request: requestJSON{Request: &q.Request, Vector: q.Request.Vector}})
}
