package planner

import (
	"time"

	"github.com/ctxgraph/ctxgraph/rlds/jsonlex"
)

// decodeRequestFast decodes the plain JSON a client writes (see
// jsonlex) into a Request; ok false sends b to encoding/json, which
// decodes it the same way or names the error. A request's vector, 384
// numbers as text, made encoding/json's scanner and reflection about
// 100 µs of every request; the differential test
// (request_fast_test.go) holds the two to the same results.
func decodeRequestFast(b []byte) (*Request, bool) {
	lex := jsonlex.New(b)
	l := &lex
	r := &Request{}
	var mask uint32
	ok := l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "query":
			r.Query, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 0)
		case "vector":
			r.Vector, ok = l.Float32s()
			return ok && jsonlex.Seen(&mask, 1)
		case "session_id":
			r.SessionID, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "goals":
			r.Goals, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 3)
		case "tools":
			r.Tools, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 4)
		case "entities":
			r.Entities, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 5)
		case "agent":
			r.Agent, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 6)
		case "roles":
			r.Roles, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 7)
		case "time_window":
			r.TimeWindow = &TimeWindow{}
			return timeWindowFast(l, r.TimeWindow) && jsonlex.Seen(&mask, 8)
		case "location":
			r.Location, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 9)
		case "min_confidence":
			r.MinConfidence, ok = l.Float(64)
			return ok && jsonlex.Seen(&mask, 10)
		case "same_agent":
			r.SameAgent, ok = l.Bool()
			return ok && jsonlex.Seen(&mask, 11)
		case "k":
			r.K, ok = l.Int()
			return ok && jsonlex.Seen(&mask, 12)
		case "hops":
			r.Hops, ok = l.Int()
			return ok && jsonlex.Seen(&mask, 13)
		case "budget":
			r.Budget, ok = l.Int()
			return ok && jsonlex.Seen(&mask, 14)
		case "as_of":
			r.AsOf = new(time.Time)
			return l.Time(r.AsOf) && jsonlex.Seen(&mask, 15)
		case "format":
			r.Format, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 16)
		case "strategy":
			r.Strategy, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 17)
		case "tenant":
			r.Tenant, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 18)
		case "project":
			r.Project, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 19)
		}
		return false // unknown (or differently cased): encoding/json says
	})
	if !ok || !l.AtEnd() {
		return nil, false
	}
	return r, true
}

func timeWindowFast(l *jsonlex.Lexer, w *TimeWindow) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		switch string(key) {
		case "from":
			return l.Time(&w.From) && jsonlex.Seen(&mask, 0)
		case "to":
			return l.Time(&w.To) && jsonlex.Seen(&mask, 1)
		}
		return false
	})
}
