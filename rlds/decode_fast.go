package rlds

import (
	"encoding/base64"

	"github.com/ctxgraph/ctxgraph/rlds/jsonlex"
)

// lexer is the wire messages' JSON lexer, with the readers of their
// parts.
type lexer struct{ jsonlex.Lexer }

// The fast decoder of wire messages. encoding/json spends most of a
// step's decoding on reflection and on the event embeddings (384 numbers
// as text each); this reads the same fields directly. It takes only the
// plain form that senders write (see lexer); for anything else
// DecodeMessage falls back to encoding/json, so results and error
// messages stay exactly those of encoding/json. The differential test
// (decode_fast_test.go) holds the two to the same results.

// decodeFast decodes b into a Message, ok false when b needs
// encoding/json. It does not validate the message.
func decodeFast(b []byte) (*Message, bool) {
	l := &lexer{jsonlex.New(b)}
	m := &Message{}
	var mask uint32
	ok := l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "kind":
			var s string
			s, ok = l.Str()
			m.Kind = Kind(s)
			return ok && jsonlex.Seen(&mask, 0)
		case "agent":
			m.Agent, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 1)
		case "episode_id":
			m.EpisodeID, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "tenant":
			m.Tenant, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 3)
		case "project":
			m.Project, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 4)
		case "start":
			m.Start = &EpisodeStart{}
			return l.start(m.Start) && jsonlex.Seen(&mask, 5)
		case "step":
			m.Step = &Step{}
			return l.step(m.Step) && jsonlex.Seen(&mask, 6)
		case "end":
			m.End = &EpisodeEnd{}
			return l.end(m.End) && jsonlex.Seen(&mask, 7)
		case "steps":
			m.Steps = []Step{}
			return jsonlex.Seen(&mask, 8) && l.Array(func() bool {
				m.Steps = append(m.Steps, Step{})
				return l.step(&m.Steps[len(m.Steps)-1])
			})
		}
		return false
	})
	if !ok || !l.AtEnd() {
		return nil, false
	}
	return m, true
}

func (l *lexer) start(s *EpisodeStart) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "start_time":
			return l.Time(&s.StartTime) && jsonlex.Seen(&mask, 0)
		case "location":
			s.Location, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 1)
		case "language_instruction":
			s.LanguageInstruction, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "metadata":
			return l.metadata(&s.Metadata) && jsonlex.Seen(&mask, 3)
		case "source":
			s.Source = &Source{}
			return l.source(s.Source) && jsonlex.Seen(&mask, 4)
		}
		return false
	})
}

func (l *lexer) source(s *Source) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		var n int
		switch string(key) {
		case "dataset":
			s.Dataset, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 0)
		case "version":
			s.Version, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 1)
		case "split":
			s.Split, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "shard":
			s.Shard, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 3)
		case "record":
			n, ok = l.Int()
			s.Record = int64(n)
			return ok && jsonlex.Seen(&mask, 4)
		case "offset":
			n, ok = l.Int()
			s.Offset = int64(n)
			return ok && jsonlex.Seen(&mask, 5)
		}
		return false
	})
}

func (l *lexer) step(s *Step) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "index":
			s.Index, ok = l.Int()
			return ok && jsonlex.Seen(&mask, 0)
		case "timestamp":
			return l.Time(&s.Timestamp) && jsonlex.Seen(&mask, 1)
		case "observation":
			s.Observation, ok = l.features()
			return ok && jsonlex.Seen(&mask, 2)
		case "action":
			s.Action, ok = l.features()
			return ok && jsonlex.Seen(&mask, 3)
		case "reward":
			s.Reward, ok = l.Float(64)
			return ok && jsonlex.Seen(&mask, 4)
		case "discount":
			s.Discount, ok = l.Float(64)
			return ok && jsonlex.Seen(&mask, 5)
		case "is_first":
			s.IsFirst, ok = l.Bool()
			return ok && jsonlex.Seen(&mask, 6)
		case "is_last":
			s.IsLast, ok = l.Bool()
			return ok && jsonlex.Seen(&mask, 7)
		case "is_terminal":
			s.IsTerminal, ok = l.Bool()
			return ok && jsonlex.Seen(&mask, 8)
		case "language_instruction":
			s.LanguageInstruction, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 9)
		case "metadata":
			return l.metadata(&s.Metadata) && jsonlex.Seen(&mask, 10)
		case "annotations":
			s.Annotations = &Annotations{}
			return l.annotations(s.Annotations) && jsonlex.Seen(&mask, 11)
		}
		return false
	})
}

func (l *lexer) end(e *EpisodeEnd) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "end_time":
			return l.Time(&e.EndTime) && jsonlex.Seen(&mask, 0)
		case "success":
			var v bool
			v, ok = l.Bool()
			e.Success = &v
			return ok && jsonlex.Seen(&mask, 1)
		case "reward_sum":
			var v float64
			v, ok = l.Float(64)
			e.RewardSum = &v
			return ok && jsonlex.Seen(&mask, 2)
		case "steps":
			e.Steps, ok = l.Int()
			return ok && jsonlex.Seen(&mask, 3)
		case "metadata":
			return l.metadata(&e.Metadata) && jsonlex.Seen(&mask, 4)
		}
		return false
	})
}

// metadata leaves free-form maps to encoding/json; a null does not come
// here (encoding/json would leave the field as it is).
func (l *lexer) metadata(m *map[string]any) bool {
	return l.Peek() == '{' && l.Unmarshal(m)
}

func (l *lexer) annotations(a *Annotations) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "entities":
			a.Entities, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 0)
		case "tool":
			a.Tool, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 1)
		case "goal":
			a.Goal, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "intent":
			a.Intent, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 3)
		case "events":
			a.Events = []Event{}
			return jsonlex.Seen(&mask, 4) && l.Array(func() bool {
				a.Events = append(a.Events, Event{})
				return l.event(&a.Events[len(a.Events)-1])
			})
		case "location":
			a.Location, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 5)
		case "scene_tags":
			a.SceneTags, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 6)
		}
		return false
	})
}

func (l *lexer) event(e *Event) bool {
	var mask uint32
	return l.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "subject":
			e.Subject, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 0)
		case "predicate":
			e.Predicate, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 1)
		case "object":
			e.Object, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 2)
		case "edge_type":
			e.EdgeType, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 3)
		case "value":
			e.Value, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 4)
		case "confidence":
			var v float64
			v, ok = l.Float(64)
			e.Confidence = &v
			return ok && jsonlex.Seen(&mask, 5)
		case "allow_roles":
			e.AllowRoles, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 6)
		case "deny_roles":
			e.DenyRoles, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 7)
		case "audience":
			e.Audience, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 8)
		case "embedding":
			e.Embedding, ok = l.Float32s()
			return ok && jsonlex.Seen(&mask, 9)
		}
		return false
	})
}

// features reads Features: an object of tensors, or a flat array of
// numbers (the one tensor of a flat feature).
func (l *lexer) features() (Features, bool) {
	if l.Peek() == '[' {
		t, ok := l.tensor()
		return Features{"": t}, ok
	}
	f := Features{}
	ok := l.Object(func(key []byte) bool {
		name := string(key)
		if _, dup := f[name]; dup {
			return false
		}
		t, ok := l.tensor()
		f[name] = t
		return ok
	})
	return f, ok
}

// tensor reads the full object form of a tensor or a flat array of
// numbers, as Tensor.UnmarshalJSON does them; other forms are left to
// encoding/json.
func (l *lexer) tensor() (Tensor, bool) {
	var t Tensor
	switch l.Peek() {
	case '[':
		data, ok := l.Float64s()
		t = Tensor{DType: Float32, Shape: []int{len(data)}, Data: data}
		return t, ok && t.Validate() == nil
	case '{':
	default:
		return t, false
	}
	var mask uint32
	ok := l.Object(func(key []byte) bool {
		var ok bool
		var s string
		switch string(key) {
		case "dtype":
			s, ok = l.Str()
			t.DType = DType(s)
			return ok && jsonlex.Seen(&mask, 0)
		case "shape":
			t.Shape, ok = l.Ints()
			return ok && jsonlex.Seen(&mask, 1)
		case "data":
			t.Data, ok = l.Float64s()
			return ok && jsonlex.Seen(&mask, 2)
		case "text":
			t.Text, ok = l.Strings()
			return ok && jsonlex.Seen(&mask, 3)
		case "bytes":
			var b []byte
			b, ok = l.StrBytes()
			if !ok {
				return false
			}
			t.Bytes = make([]byte, base64.StdEncoding.DecodedLen(len(b)))
			n, err := base64.StdEncoding.Decode(t.Bytes, b)
			t.Bytes = t.Bytes[:n]
			return err == nil && jsonlex.Seen(&mask, 4)
		case "encoding":
			t.Encoding, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 5)
		case "ref":
			t.Ref, ok = l.Str()
			return ok && jsonlex.Seen(&mask, 6)
		}
		return false
	})
	if t.DType == "" {
		t.DType = Float32
	}
	return t, ok && t.Validate() == nil
}
