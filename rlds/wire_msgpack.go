package rlds

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/rlds/mplex"
)

// The msgpack wire format: the JSON message (Message) with its objects
// as MessagePack maps under the same keys, for controllers that send at
// a fleet's rate. A step's vectors then travel as numbers instead of
// text, and decoding one takes a fraction of parsing its JSON
// (BenchmarkDecodeFleetStep). Any MessagePack library writes it; the
// daemon tells it from JSON by its first byte (IsMsgpack), so both
// formats share the subjects, the message ids and every check:
//
//   - Every object of the JSON is a map with string keys; a key the JSON
//     does not know is refused, as is a key given twice. nil stands for
//     an absent value, as null does in the JSON.
//   - Numbers are any MessagePack integer or float (a tensor's data, an
//     embedding, reward, confidence); integers (index, steps, shape,
//     record) are integers.
//   - Times are MessagePack timestamps (extension -1) or RFC 3339
//     strings.
//   - A tensor is a map (dtype, shape, data, text, bytes, encoding, ref;
//     bytes a bin or a string), or as in the JSON's short forms an array
//     of numbers (a float32 vector), nested arrays, a number, a bool or a
//     string. A features value that is an array is one flat tensor.
//   - Metadata maps hold any values; their numbers are kept as float64,
//     as the JSON's are.
//   - Strings with invalid UTF-8 read with each bad byte replaced by
//     U+FFFD, as encoding/json reads the JSON's.
//
// Message.AppendMsgpack writes this format: each number as the shortest
// MessagePack value that holds it exactly. The reading and writing of
// the MessagePack forms is rlds/mplex's, shared with the CMS spans and
// the planner's requests. TestMsgpackFromPython checks messages that
// Python's msgpack writes.

// IsMsgpack reports whether b is in the msgpack wire format: it starts
// with a MessagePack map, which no JSON text does.
func IsMsgpack(b []byte) bool { return mplex.IsMap(b) }

// mpDecoder reads a msgpack wire message.
type mpDecoder struct{ mplex.Reader }

// decodeMsgpack parses a msgpack wire message, without validating it.
func decodeMsgpack(b []byte) (*Message, error) {
	d := &mpDecoder{mplex.Reader{B: b}}
	m := &Message{}
	err := d.Object(func(key string) error {
		switch key {
		case "kind":
			s, err := d.Str()
			m.Kind = Kind(s)
			return err
		case "agent":
			return d.StrTo(&m.Agent)
		case "episode_id":
			return d.StrTo(&m.EpisodeID)
		case "tenant":
			return d.StrTo(&m.Tenant)
		case "project":
			return d.StrTo(&m.Project)
		case "start":
			return mplex.OptInto(&d.Reader, &m.Start, d.start)
		case "step":
			return mplex.OptInto(&d.Reader, &m.Step, d.step)
		case "end":
			return mplex.OptInto(&d.Reader, &m.End, d.end)
		case "steps":
			return d.steps(&m.Steps)
		}
		return mplex.ErrUnknownKey
	})
	if err == nil {
		err = d.Done()
	}
	if errors.Is(err, mplex.ErrNonFinite) {
		err = fmt.Errorf("%w: %w", ErrNonFinite, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: msgpack: %w", ErrMalformed, err)
	}
	return m, nil
}

func (d *mpDecoder) start(s *EpisodeStart) error {
	return d.Object(func(key string) (err error) {
		switch key {
		case "start_time":
			s.StartTime, err = d.Time()
		case "location":
			err = d.StrTo(&s.Location)
		case "language_instruction":
			err = d.StrTo(&s.LanguageInstruction)
		case "metadata":
			s.Metadata, err = d.Metadata()
		case "source":
			err = mplex.OptInto(&d.Reader, &s.Source, d.source)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) source(s *Source) error {
	return d.Object(func(key string) (err error) {
		var n int
		switch key {
		case "dataset":
			err = d.StrTo(&s.Dataset)
		case "version":
			err = d.StrTo(&s.Version)
		case "split":
			err = d.StrTo(&s.Split)
		case "shard":
			err = d.StrTo(&s.Shard)
		case "record":
			n, err = d.Int()
			s.Record = int64(n)
		case "offset":
			n, err = d.Int()
			s.Offset = int64(n)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) step(s *Step) error {
	return d.Object(func(key string) (err error) {
		switch key {
		case "index":
			s.Index, err = d.Int()
		case "timestamp":
			s.Timestamp, err = d.Time()
		case "observation":
			s.Observation, err = d.features()
		case "action":
			s.Action, err = d.features()
		case "reward":
			s.Reward, err = d.Number()
		case "discount":
			s.Discount, err = d.Number()
		case "is_first":
			s.IsFirst, err = d.Bool()
		case "is_last":
			s.IsLast, err = d.Bool()
		case "is_terminal":
			s.IsTerminal, err = d.Bool()
		case "language_instruction":
			err = d.StrTo(&s.LanguageInstruction)
		case "metadata":
			s.Metadata, err = d.Metadata()
		case "annotations":
			err = mplex.OptInto(&d.Reader, &s.Annotations, d.annotations)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

// steps reads a steps message's array of steps (nil stays nil, as the
// JSON's null does).
func (d *mpDecoder) steps(out *[]Step) error {
	n, err := d.Array()
	if err != nil || n < 0 {
		return err
	}
	if n > MaxStepsPerMessage {
		return fmt.Errorf("%d steps, more than %d", n, MaxStepsPerMessage)
	}
	*out = make([]Step, n)
	for i := range *out {
		if err := d.step(&(*out)[i]); err != nil {
			return fmt.Errorf("%d: %w", i, err)
		}
	}
	return nil
}

func (d *mpDecoder) end(e *EpisodeEnd) error {
	return d.Object(func(key string) (err error) {
		switch key {
		case "end_time":
			e.EndTime, err = d.Time()
		case "success":
			err = mplex.Opt(&d.Reader, &e.Success, d.Bool)
		case "reward_sum":
			err = mplex.Opt(&d.Reader, &e.RewardSum, d.Number)
		case "steps":
			e.Steps, err = d.Int()
		case "metadata":
			e.Metadata, err = d.Metadata()
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) annotations(a *Annotations) error {
	return d.Object(func(key string) (err error) {
		switch key {
		case "entities":
			a.Entities, err = d.Strs()
		case "tool":
			err = d.StrTo(&a.Tool)
		case "goal":
			err = d.StrTo(&a.Goal)
		case "intent":
			err = d.StrTo(&a.Intent)
		case "events":
			var n int
			if n, err = d.Array(); err != nil || n < 0 {
				return err
			}
			a.Events = make([]Event, n)
			for i := range a.Events {
				if err := d.event(&a.Events[i]); err != nil {
					return fmt.Errorf("%d: %w", i, err)
				}
			}
		case "location":
			err = d.StrTo(&a.Location)
		case "scene_tags":
			a.SceneTags, err = d.Strs()
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) event(e *Event) error {
	return d.Object(func(key string) (err error) {
		switch key {
		case "subject":
			err = d.StrTo(&e.Subject)
		case "predicate":
			err = d.StrTo(&e.Predicate)
		case "object":
			err = d.StrTo(&e.Object)
		case "edge_type":
			err = d.StrTo(&e.EdgeType)
		case "value":
			err = d.StrTo(&e.Value)
		case "confidence":
			err = mplex.Opt(&d.Reader, &e.Confidence, d.Number)
		case "allow_roles":
			e.AllowRoles, err = d.Strs()
		case "deny_roles":
			e.DenyRoles, err = d.Strs()
		case "audience":
			e.Audience, err = d.Strs()
		case "embedding":
			e.Embedding, err = d.Vector()
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
}

// features reads a map of tensors, or an array (one flat tensor).
func (d *mpDecoder) features() (Features, error) {
	if d.Null() {
		return nil, nil
	}
	if d.Type() == msgp.ArrayType {
		t, err := d.tensor()
		return Features{"": t}, err
	}
	f := Features{}
	err := d.Object(func(key string) error {
		if _, dup := f[key]; dup {
			return errors.New("given twice")
		}
		t, err := d.tensor()
		f[strings.Clone(key)] = t
		return err
	})
	return f, err
}

// tensor reads a tensor in its full form (a map) or one of the JSON's
// short forms.
func (d *mpDecoder) tensor() (Tensor, error) {
	var t Tensor
	switch typ := d.Type(); typ {
	case msgp.MapType:
	case msgp.ArrayType:
		v, err := d.Value(0)
		if err != nil {
			return t, err
		}
		if flat, ok := flatNumbers(v.([]any)); ok {
			t = Tensor{DType: Float32, Shape: []int{len(flat)}, Data: flat}
		} else {
			data, shape, err := flatten(v, nil, 0)
			if err != nil {
				return t, err
			}
			t = Tensor{DType: Float32, Shape: shape, Data: data}
		}
		return t, t.Validate()
	case msgp.StrType:
		s, err := d.Str()
		return Tensor{DType: String, Text: []string{s}}, err
	case msgp.BoolType:
		v, err := d.Bool()
		return Tensor{DType: Bool, Data: []float64{b2f(v)}}, err
	case msgp.IntType, msgp.UintType, msgp.Float32Type, msgp.Float64Type:
		v, err := d.Number()
		if err != nil {
			return t, err
		}
		t = Tensor{DType: Float32, Data: []float64{v}}
		return t, t.Validate()
	default:
		return t, fmt.Errorf("tensor: want a map, array, number, bool or string, got %v", typ)
	}
	err := d.Object(func(key string) (err error) {
		switch key {
		case "dtype":
			var s string
			s, err = d.Str()
			t.DType = DType(s)
		case "shape":
			t.Shape, err = d.Ints()
		case "data":
			t.Data, err = d.Numbers()
		case "text":
			t.Text, err = d.Strs()
		case "bytes":
			t.Bytes, err = d.Bytes()
		case "encoding":
			err = d.StrTo(&t.Encoding)
		case "ref":
			err = d.StrTo(&t.Ref)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
	if err != nil {
		return t, err
	}
	if t.DType == "" {
		t.DType = Float32
	}
	return t, t.Validate()
}

// flatNumbers returns v's numbers if it holds numbers only.
func flatNumbers(v []any) ([]float64, bool) {
	out := make([]float64, len(v))
	for i, e := range v {
		f, ok := e.(float64)
		if !ok {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// AppendMsgpack appends m in the msgpack wire format to b, with the
// fields the JSON would hold (those it omits when empty omitted here
// too).
func (m *Message) AppendMsgpack(b []byte) ([]byte, error) {
	w := mpWriter{Writer: mplex.Writer{B: b}}
	w.Object(func() {
		w.Field("kind", string(m.Kind))
		w.Field("agent", m.Agent)
		w.Field("episode_id", m.EpisodeID)
		w.OptField("tenant", m.Tenant)
		w.OptField("project", m.Project)
		if s := m.Start; s != nil {
			w.Key("start")
			w.Object(func() {
				w.Key("start_time")
				w.Time(s.StartTime)
				w.OptField("location", s.Location)
				w.OptField("language_instruction", s.LanguageInstruction)
				w.metadata(s.Metadata)
				if src := s.Source; src != nil {
					w.Key("source")
					w.Object(func() {
						w.Field("dataset", src.Dataset)
						w.OptField("version", src.Version)
						w.OptField("split", src.Split)
						w.OptField("shard", src.Shard)
						w.Key("record")
						w.B = msgp.AppendInt64(w.B, src.Record)
						if src.Offset != 0 {
							w.Key("offset")
							w.B = msgp.AppendInt64(w.B, src.Offset)
						}
					})
				}
			})
		}
		if s := m.Step; s != nil {
			w.Key("step")
			w.step(s)
		}
		if m.Steps != nil {
			w.Key("steps")
			w.B = msgp.AppendArrayHeader(w.B, uint32(len(m.Steps)))
			for i := range m.Steps {
				w.step(&m.Steps[i])
			}
		}
		if e := m.End; e != nil {
			w.Key("end")
			w.Object(func() {
				w.Key("end_time")
				w.Time(e.EndTime)
				if e.Success != nil {
					w.Key("success")
					w.B = msgp.AppendBool(w.B, *e.Success)
				}
				if e.RewardSum != nil {
					w.Key("reward_sum")
					w.Number(*e.RewardSum)
				}
				w.Key("steps")
				w.B = msgp.AppendInt(w.B, e.Steps)
				w.metadata(e.Metadata)
			})
		}
	})
	return w.B, w.err
}

// mpWriter writes the msgpack wire format.
type mpWriter struct {
	mplex.Writer
	err error
}

func (w *mpWriter) metadata(md map[string]any) {
	if len(md) == 0 {
		return
	}
	w.Key("metadata")
	var err error
	if w.B, err = msgp.AppendIntf(w.B, md); err != nil && w.err == nil {
		w.err = fmt.Errorf("metadata: %w", err)
	}
}

func (w *mpWriter) step(s *Step) {
	w.Object(func() {
		w.Key("index")
		w.B = msgp.AppendInt(w.B, s.Index)
		w.Key("timestamp")
		w.Time(s.Timestamp)
		w.features("observation", s.Observation)
		w.features("action", s.Action)
		w.Key("reward")
		w.Number(s.Reward)
		w.Key("discount")
		w.Number(s.Discount)
		for _, f := range []struct {
			k string
			v bool
		}{{"is_first", s.IsFirst}, {"is_last", s.IsLast}, {"is_terminal", s.IsTerminal}} {
			w.Key(f.k)
			w.B = msgp.AppendBool(w.B, f.v)
		}
		w.OptField("language_instruction", s.LanguageInstruction)
		w.metadata(s.Metadata)
		if a := s.Annotations; a != nil {
			w.Key("annotations")
			w.annotations(a)
		}
	})
}

func (w *mpWriter) annotations(a *Annotations) {
	w.Object(func() {
		w.Strs("entities", a.Entities)
		w.OptField("tool", a.Tool)
		w.OptField("goal", a.Goal)
		w.OptField("intent", a.Intent)
		if len(a.Events) > 0 {
			w.Key("events")
			w.B = msgp.AppendArrayHeader(w.B, uint32(len(a.Events)))
			for i := range a.Events {
				w.event(&a.Events[i])
			}
		}
		w.OptField("location", a.Location)
		w.Strs("scene_tags", a.SceneTags)
	})
}

func (w *mpWriter) event(e *Event) {
	w.Object(func() {
		w.Field("subject", e.Subject)
		w.Field("predicate", e.Predicate)
		w.Field("object", e.Object)
		w.OptField("edge_type", e.EdgeType)
		w.OptField("value", e.Value)
		if e.Confidence != nil {
			w.Key("confidence")
			w.Number(*e.Confidence)
		}
		w.Strs("allow_roles", e.AllowRoles)
		w.Strs("deny_roles", e.DenyRoles)
		w.Strs("audience", e.Audience)
		w.Vector("embedding", e.Embedding)
	})
}

func (w *mpWriter) features(k string, f Features) {
	if len(f) == 0 {
		return
	}
	w.Key(k)
	w.Object(func() {
		for name, t := range f {
			w.Key(name)
			w.tensor(t)
		}
	})
}

func (w *mpWriter) tensor(t Tensor) {
	w.Object(func() {
		w.Field("dtype", string(t.DType))
		if len(t.Shape) > 0 {
			w.Key("shape")
			w.B = msgp.AppendArrayHeader(w.B, uint32(len(t.Shape)))
			for _, n := range t.Shape {
				w.B = msgp.AppendInt(w.B, n)
			}
		}
		if len(t.Data) > 0 {
			w.Key("data")
			w.B = msgp.AppendArrayHeader(w.B, uint32(len(t.Data)))
			for _, v := range t.Data {
				w.Number(v)
			}
		}
		w.Strs("text", t.Text)
		if len(t.Bytes) > 0 {
			w.Key("bytes")
			w.B = msgp.AppendBytes(w.B, t.Bytes)
		}
		w.OptField("encoding", t.Encoding)
		w.OptField("ref", t.Ref)
	})
}
