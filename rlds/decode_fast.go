package rlds

import "encoding/base64"

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
	l := &lexer{b: b}
	m := &Message{}
	var mask uint32
	ok := l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "kind":
			var s string
			s, ok = l.str()
			m.Kind = Kind(s)
			return ok && seen(&mask, 0)
		case "agent":
			m.Agent, ok = l.str()
			return ok && seen(&mask, 1)
		case "episode_id":
			m.EpisodeID, ok = l.str()
			return ok && seen(&mask, 2)
		case "tenant":
			m.Tenant, ok = l.str()
			return ok && seen(&mask, 3)
		case "project":
			m.Project, ok = l.str()
			return ok && seen(&mask, 4)
		case "start":
			m.Start = &EpisodeStart{}
			return l.start(m.Start) && seen(&mask, 5)
		case "step":
			m.Step = &Step{}
			return l.step(m.Step) && seen(&mask, 6)
		case "end":
			m.End = &EpisodeEnd{}
			return l.end(m.End) && seen(&mask, 7)
		}
		return false
	})
	if !ok || l.peek() != 0 {
		return nil, false
	}
	return m, true
}

func (l *lexer) start(s *EpisodeStart) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "start_time":
			return l.time(&s.StartTime) && seen(&mask, 0)
		case "location":
			s.Location, ok = l.str()
			return ok && seen(&mask, 1)
		case "language_instruction":
			s.LanguageInstruction, ok = l.str()
			return ok && seen(&mask, 2)
		case "metadata":
			return l.metadata(&s.Metadata) && seen(&mask, 3)
		case "source":
			s.Source = &Source{}
			return l.source(s.Source) && seen(&mask, 4)
		}
		return false
	})
}

func (l *lexer) source(s *Source) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		var n int
		switch string(key) {
		case "dataset":
			s.Dataset, ok = l.str()
			return ok && seen(&mask, 0)
		case "version":
			s.Version, ok = l.str()
			return ok && seen(&mask, 1)
		case "split":
			s.Split, ok = l.str()
			return ok && seen(&mask, 2)
		case "shard":
			s.Shard, ok = l.str()
			return ok && seen(&mask, 3)
		case "record":
			n, ok = l.int()
			s.Record = int64(n)
			return ok && seen(&mask, 4)
		case "offset":
			n, ok = l.int()
			s.Offset = int64(n)
			return ok && seen(&mask, 5)
		}
		return false
	})
}

func (l *lexer) step(s *Step) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "index":
			s.Index, ok = l.int()
			return ok && seen(&mask, 0)
		case "timestamp":
			return l.time(&s.Timestamp) && seen(&mask, 1)
		case "observation":
			s.Observation, ok = l.features()
			return ok && seen(&mask, 2)
		case "action":
			s.Action, ok = l.features()
			return ok && seen(&mask, 3)
		case "reward":
			s.Reward, ok = l.float(64)
			return ok && seen(&mask, 4)
		case "discount":
			s.Discount, ok = l.float(64)
			return ok && seen(&mask, 5)
		case "is_first":
			s.IsFirst, ok = l.boolean()
			return ok && seen(&mask, 6)
		case "is_last":
			s.IsLast, ok = l.boolean()
			return ok && seen(&mask, 7)
		case "is_terminal":
			s.IsTerminal, ok = l.boolean()
			return ok && seen(&mask, 8)
		case "language_instruction":
			s.LanguageInstruction, ok = l.str()
			return ok && seen(&mask, 9)
		case "metadata":
			return l.metadata(&s.Metadata) && seen(&mask, 10)
		case "annotations":
			s.Annotations = &Annotations{}
			return l.annotations(s.Annotations) && seen(&mask, 11)
		}
		return false
	})
}

func (l *lexer) end(e *EpisodeEnd) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "end_time":
			return l.time(&e.EndTime) && seen(&mask, 0)
		case "success":
			var v bool
			v, ok = l.boolean()
			e.Success = &v
			return ok && seen(&mask, 1)
		case "reward_sum":
			var v float64
			v, ok = l.float(64)
			e.RewardSum = &v
			return ok && seen(&mask, 2)
		case "steps":
			e.Steps, ok = l.int()
			return ok && seen(&mask, 3)
		case "metadata":
			return l.metadata(&e.Metadata) && seen(&mask, 4)
		}
		return false
	})
}

// metadata leaves free-form maps to encoding/json; a null does not come
// here (encoding/json would leave the field as it is).
func (l *lexer) metadata(m *map[string]any) bool {
	return l.peek() == '{' && l.unmarshal(m)
}

func (l *lexer) annotations(a *Annotations) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "entities":
			a.Entities, ok = l.strings()
			return ok && seen(&mask, 0)
		case "tool":
			a.Tool, ok = l.str()
			return ok && seen(&mask, 1)
		case "goal":
			a.Goal, ok = l.str()
			return ok && seen(&mask, 2)
		case "intent":
			a.Intent, ok = l.str()
			return ok && seen(&mask, 3)
		case "events":
			a.Events = []Event{}
			return seen(&mask, 4) && l.array(func() bool {
				a.Events = append(a.Events, Event{})
				return l.event(&a.Events[len(a.Events)-1])
			})
		case "location":
			a.Location, ok = l.str()
			return ok && seen(&mask, 5)
		case "scene_tags":
			a.SceneTags, ok = l.strings()
			return ok && seen(&mask, 6)
		}
		return false
	})
}

func (l *lexer) event(e *Event) bool {
	var mask uint32
	return l.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "subject":
			e.Subject, ok = l.str()
			return ok && seen(&mask, 0)
		case "predicate":
			e.Predicate, ok = l.str()
			return ok && seen(&mask, 1)
		case "object":
			e.Object, ok = l.str()
			return ok && seen(&mask, 2)
		case "edge_type":
			e.EdgeType, ok = l.str()
			return ok && seen(&mask, 3)
		case "value":
			e.Value, ok = l.str()
			return ok && seen(&mask, 4)
		case "confidence":
			var v float64
			v, ok = l.float(64)
			e.Confidence = &v
			return ok && seen(&mask, 5)
		case "allow_roles":
			e.AllowRoles, ok = l.strings()
			return ok && seen(&mask, 6)
		case "deny_roles":
			e.DenyRoles, ok = l.strings()
			return ok && seen(&mask, 7)
		case "audience":
			e.Audience, ok = l.strings()
			return ok && seen(&mask, 8)
		case "embedding":
			e.Embedding, ok = l.float32s()
			return ok && seen(&mask, 9)
		}
		return false
	})
}

// features reads Features: an object of tensors, or a flat array of
// numbers (the one tensor of a flat feature).
func (l *lexer) features() (Features, bool) {
	if l.peek() == '[' {
		t, ok := l.tensor()
		return Features{"": t}, ok
	}
	f := Features{}
	ok := l.object(func(key []byte) bool {
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
	switch l.peek() {
	case '[':
		data, ok := l.float64s()
		t = Tensor{DType: Float32, Shape: []int{len(data)}, Data: data}
		return t, ok && t.Validate() == nil
	case '{':
	default:
		return t, false
	}
	var mask uint32
	ok := l.object(func(key []byte) bool {
		var ok bool
		var s string
		switch string(key) {
		case "dtype":
			s, ok = l.str()
			t.DType = DType(s)
			return ok && seen(&mask, 0)
		case "shape":
			t.Shape, ok = l.ints()
			return ok && seen(&mask, 1)
		case "data":
			t.Data, ok = l.float64s()
			return ok && seen(&mask, 2)
		case "text":
			t.Text, ok = l.strings()
			return ok && seen(&mask, 3)
		case "bytes":
			var b []byte
			b, ok = l.strBytes()
			if !ok {
				return false
			}
			t.Bytes = make([]byte, base64.StdEncoding.DecodedLen(len(b)))
			n, err := base64.StdEncoding.Decode(t.Bytes, b)
			t.Bytes = t.Bytes[:n]
			return err == nil && seen(&mask, 4)
		case "encoding":
			t.Encoding, ok = l.str()
			return ok && seen(&mask, 5)
		case "ref":
			t.Ref, ok = l.str()
			return ok && seen(&mask, 6)
		}
		return false
	})
	if t.DType == "" {
		t.DType = Float32
	}
	return t, ok && t.Validate() == nil
}
