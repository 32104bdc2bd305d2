package planner

import (
	"fmt"
	"math"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/rlds/mplex"
)

// A request may come as MessagePack, for programs in a control loop
// that take their answers in msgpack too: the JSON request's object as
// a map under the same keys, in the forms rlds/mplex reads (the vector
// an array of numbers). DecodeRequest tells it from JSON by its first
// byte. A request with a 384-d vector decodes in about a seventh of its
// JSON's time (BenchmarkDecodeRequest).

// decodeRequestMsgpack reads a msgpack request.
func decodeRequestMsgpack(b []byte) (*Request, error) {
	d := mplex.Reader{B: b}
	var r Request
	err := d.Object(func(key string) (err error) {
		switch key {
		case "query":
			err = d.StrTo(&r.Query)
		case "vector":
			r.Vector, err = d.Vector()
		case "session_id":
			err = d.StrTo(&r.SessionID)
		case "goals":
			r.Goals, err = d.Strs()
		case "tools":
			r.Tools, err = d.Strs()
		case "entities":
			r.Entities, err = d.Strs()
		case "agent":
			err = d.StrTo(&r.Agent)
		case "roles":
			r.Roles, err = d.Strs()
		case "time_window":
			err = mplex.OptInto(&d, &r.TimeWindow, func(w *TimeWindow) error {
				return d.Object(func(key string) (err error) {
					switch key {
					case "from":
						w.From, err = d.Time()
					case "to":
						w.To, err = d.Time()
					default:
						err = mplex.ErrUnknownKey
					}
					return err
				})
			})
		case "location":
			err = d.StrTo(&r.Location)
		case "min_confidence":
			r.MinConfidence, err = d.Number()
		case "same_agent":
			r.SameAgent, err = d.Bool()
		case "k":
			r.K, err = d.Int()
		case "hops":
			r.Hops, err = d.Int()
		case "budget":
			r.Budget, err = d.Int()
		case "as_of":
			err = mplex.Opt(&d, &r.AsOf, d.Time)
		case "format":
			err = d.StrTo(&r.Format)
		case "strategy":
			err = d.StrTo(&r.Strategy)
		case "tenant":
			err = d.StrTo(&r.Tenant)
		case "project":
			err = d.StrTo(&r.Project)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
	if err == nil {
		err = d.Done()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: malformed msgpack: %v", ErrInvalid, err)
	}
	// The JSON cannot carry these; a request must be one it could.
	if math.IsNaN(r.MinConfidence) || math.IsInf(r.MinConfidence, 0) {
		return nil, fmt.Errorf("%w: min_confidence %v outside [0,1]", ErrInvalid, r.MinConfidence)
	}
	for i, x := range r.Vector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%w: vector[%d] is %v", ErrInvalid, i, x)
		}
	}
	return &r, nil
}

// AppendMsgpack appends r as a msgpack request to b: the fields its
// JSON would hold, each number in its shortest exact form.
func (r *Request) AppendMsgpack(b []byte) []byte {
	w := mplex.Writer{B: b}
	w.Object(func() {
		w.OptField("query", r.Query)
		w.Vector("vector", r.Vector)
		w.OptField("session_id", r.SessionID)
		w.Strs("goals", r.Goals)
		w.Strs("tools", r.Tools)
		w.Strs("entities", r.Entities)
		w.OptField("agent", r.Agent)
		w.Strs("roles", r.Roles)
		if tw := r.TimeWindow; tw != nil {
			w.Key("time_window")
			w.Object(func() {
				if !tw.From.IsZero() {
					w.Key("from")
					w.Time(tw.From)
				}
				if !tw.To.IsZero() {
					w.Key("to")
					w.Time(tw.To)
				}
			})
		}
		w.OptField("location", r.Location)
		if r.MinConfidence != 0 {
			w.Key("min_confidence")
			w.Number(r.MinConfidence)
		}
		if r.SameAgent {
			w.Key("same_agent")
			w.B = msgp.AppendBool(w.B, true)
		}
		for _, f := range []struct {
			k string
			v int
		}{{"k", r.K}, {"hops", r.Hops}, {"budget", r.Budget}} {
			if f.v != 0 {
				w.Key(f.k)
				w.B = msgp.AppendInt(w.B, f.v)
			}
		}
		if r.AsOf != nil {
			w.Key("as_of")
			w.Time(*r.AsOf)
		}
		w.OptField("format", r.Format)
		w.OptField("strategy", r.Strategy)
		w.OptField("tenant", r.Tenant)
		w.OptField("project", r.Project)
	})
	return w.B
}
