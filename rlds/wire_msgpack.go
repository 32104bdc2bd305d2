package rlds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
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
//
// Message.AppendMsgpack writes this format: each number as the shortest
// MessagePack value that holds it exactly.

// IsMsgpack reports whether b is in the msgpack wire format: it starts
// with a MessagePack map, which no JSON text does.
func IsMsgpack(b []byte) bool {
	return len(b) > 0 && (b[0]&0xf0 == 0x80 || b[0] == 0xde || b[0] == 0xdf)
}

// maxMsgpackDepth bounds the nesting of a message's metadata and
// tensors, as encoding/json's own limit does for the JSON.
const maxMsgpackDepth = 64

// mpDecoder reads a msgpack wire message from b.
type mpDecoder struct{ b []byte }

// errUnknownKey marks a key the message does not have.
var errUnknownKey = errors.New("unknown field")

// decodeMsgpack parses a msgpack wire message, without validating it.
func decodeMsgpack(b []byte) (*Message, error) {
	d := &mpDecoder{b: b}
	m := &Message{}
	err := d.object(func(key string) error {
		switch key {
		case "kind":
			s, err := d.str()
			m.Kind = Kind(s)
			return err
		case "agent":
			return d.strTo(&m.Agent)
		case "episode_id":
			return d.strTo(&m.EpisodeID)
		case "tenant":
			return d.strTo(&m.Tenant)
		case "project":
			return d.strTo(&m.Project)
		case "start":
			if d.null() {
				return nil
			}
			m.Start = &EpisodeStart{}
			return d.start(m.Start)
		case "step":
			if d.null() {
				return nil
			}
			m.Step = &Step{}
			return d.step(m.Step)
		case "end":
			if d.null() {
				return nil
			}
			m.End = &EpisodeEnd{}
			return d.end(m.End)
		}
		return errUnknownKey
	})
	if err == nil && len(d.b) > 0 {
		err = errors.New("trailing data after the message")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: msgpack: %w", ErrMalformed, err)
	}
	return m, nil
}

// object reads a map, calling fn for each key with the decoder at its
// value; fn reads the value. Errors name the key. nil is an empty
// object.
func (d *mpDecoder) object(fn func(key string) error) error {
	if d.null() {
		return nil
	}
	n, rest, err := msgp.ReadMapHeaderBytes(d.b)
	if err != nil {
		return err
	}
	d.b = rest
	var seen [16]string
	for i := range int(n) {
		k, rest, err := msgp.ReadStringZC(d.b)
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		d.b = rest
		// The key's bytes, not a copy: fn only compares it or quotes it
		// (a key kept, a feature's name, is cloned).
		key := unsafe.String(unsafe.SliceData(k), len(k))
		for _, s := range seen[:min(i, len(seen))] {
			if s == key {
				return fmt.Errorf("%s: given twice", key)
			}
		}
		if i < len(seen) {
			seen[i] = key
		}
		if err := fn(key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// null consumes a nil, reporting whether there was one.
func (d *mpDecoder) null() bool {
	if len(d.b) > 0 && d.b[0] == 0xc0 {
		d.b = d.b[1:]
		return true
	}
	return false
}

// str reads a string (nil: "").
func (d *mpDecoder) str() (string, error) {
	if d.null() {
		return "", nil
	}
	s, rest, err := msgp.ReadStringBytes(d.b)
	if err != nil {
		return "", err
	}
	d.b = rest
	return s, nil
}

func (d *mpDecoder) strTo(s *string) (err error) {
	*s, err = d.str()
	return err
}

// strs reads an array of strings (nil: none).
func (d *mpDecoder) strs() ([]string, error) {
	n, err := d.array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = d.str(); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

// array reads an array's header: its length, -1 for nil.
func (d *mpDecoder) array() (int, error) {
	if d.null() {
		return -1, nil
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(d.b)
	if err != nil {
		return 0, err
	}
	if int(n) > len(rest) { // every element takes a byte at least
		return 0, msgp.ErrShortBytes
	}
	d.b = rest
	return int(n), nil
}

// number reads any MessagePack integer or float.
func (d *mpDecoder) number() (float64, error) {
	v, rest, err := readNumber(d.b)
	if err != nil {
		return 0, err
	}
	d.b = rest
	return v, nil
}

// readNumber reads a MessagePack integer or float from b: the decoding
// of vectors, inline for the common forms.
func readNumber(b []byte) (float64, []byte, error) {
	if len(b) == 0 {
		return 0, b, msgp.ErrShortBytes
	}
	switch c := b[0]; {
	case c <= 0x7f:
		return float64(c), b[1:], nil
	case c >= 0xe0:
		return float64(int8(c)), b[1:], nil
	case c == 0xca && len(b) >= 5:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b[1:]))), b[5:], nil
	case c == 0xcb && len(b) >= 9:
		return math.Float64frombits(binary.BigEndian.Uint64(b[1:])), b[9:], nil
	case c == 0xd0 && len(b) >= 2:
		return float64(int8(b[1])), b[2:], nil
	case c == 0xcc && len(b) >= 2:
		return float64(b[1]), b[2:], nil
	}
	switch msgp.NextType(b) {
	case msgp.IntType:
		i, rest, err := msgp.ReadInt64Bytes(b)
		return float64(i), rest, err
	case msgp.UintType:
		u, rest, err := msgp.ReadUint64Bytes(b)
		return float64(u), rest, err
	}
	v, rest, err := msgp.ReadFloat64Bytes(b)
	if err != nil {
		return 0, b, fmt.Errorf("want a number: %w", err)
	}
	return v, rest, nil
}

// numbers reads an array of numbers (nil: none).
func (d *mpDecoder) numbers() ([]float64, error) {
	n, err := d.array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]float64, n)
	for i := range out {
		if out[i], d.b, err = readNumber(d.b); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

// vector reads an array of numbers as float32s (nil: none).
func (d *mpDecoder) vector() ([]float32, error) {
	n, err := d.array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]float32, n)
	b := d.b
	for i := range out {
		// The forms an embedding's numbers take, inline.
		switch c := b[0]; { // array checked len(b) ≥ n - i
		case c <= 0x7f:
			out[i], b = float32(c), b[1:]
			continue
		case c >= 0xe0:
			out[i], b = float32(int8(c)), b[1:]
			continue
		case c == 0xca && len(b) >= 5:
			out[i], b = math.Float32frombits(binary.BigEndian.Uint32(b[1:])), b[5:]
			continue
		}
		var v float64
		if v, b, err = readNumber(b); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
		out[i] = float32(v)
	}
	d.b = b
	return out, nil
}

// integer reads a MessagePack integer that fits an int.
func (d *mpDecoder) integer() (int, error) {
	if msgp.NextType(d.b) == msgp.UintType {
		u, rest, err := msgp.ReadUint64Bytes(d.b)
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt {
			return 0, fmt.Errorf("%d overflows an int", u)
		}
		d.b = rest
		return int(u), nil
	}
	i, rest, err := msgp.ReadInt64Bytes(d.b)
	if err != nil {
		return 0, err
	}
	if int64(int(i)) != i {
		return 0, fmt.Errorf("%d overflows an int", i)
	}
	d.b = rest
	return int(i), nil
}

func (d *mpDecoder) integers() ([]int, error) {
	n, err := d.array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		if out[i], err = d.integer(); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

func (d *mpDecoder) boolean() (bool, error) {
	if d.null() {
		return false, nil
	}
	v, rest, err := msgp.ReadBoolBytes(d.b)
	if err != nil {
		return false, err
	}
	d.b = rest
	return v, nil
}

// time reads a MessagePack timestamp or an RFC 3339 string (nil: the
// zero time), in UTC.
func (d *mpDecoder) time() (time.Time, error) {
	if d.null() {
		return time.Time{}, nil
	}
	if msgp.NextType(d.b) == msgp.StrType {
		s, err := d.str()
		if err != nil {
			return time.Time{}, err
		}
		return time.Parse(time.RFC3339Nano, s)
	}
	t, rest, err := msgp.ReadTimeUTCBytes(d.b)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a timestamp or an RFC 3339 string: %w", err)
	}
	if y := t.Year(); y < 0 || y > 9999 { // as the JSON's RFC 3339 times
		return time.Time{}, fmt.Errorf("year %d is outside 0-9999", y)
	}
	d.b = rest
	return t, nil
}

// metadata reads a map of any values, as the JSON's: numbers float64,
// maps with string keys map[string]any, arrays []any.
func (d *mpDecoder) metadata() (map[string]any, error) {
	if d.null() {
		return nil, nil
	}
	if t := msgp.NextType(d.b); t != msgp.MapType {
		return nil, fmt.Errorf("want a map, got %v", t)
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// value reads any value as the JSON decoding would hold it; bins are
// []byte, timestamps time.Time.
func (d *mpDecoder) value(depth int) (any, error) {
	if depth > maxMsgpackDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxMsgpackDepth)
	}
	switch t := msgp.NextType(d.b); t {
	case msgp.MapType:
		n, rest, err := msgp.ReadMapHeaderBytes(d.b)
		if err != nil {
			return nil, err
		}
		if int(n) > len(rest)/2 {
			return nil, msgp.ErrShortBytes
		}
		d.b = rest
		m := make(map[string]any, n)
		for range n {
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			if m[k], err = d.value(depth + 1); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return m, nil
	case msgp.ArrayType:
		n, err := d.array()
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.value(depth + 1); err != nil {
				return nil, fmt.Errorf("%d: %w", i, err)
			}
		}
		return a, nil
	case msgp.IntType, msgp.UintType, msgp.Float32Type, msgp.Float64Type:
		v, err := d.number()
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("%w: %v", ErrNonFinite, v) // the JSON has no such numbers
		}
		return v, err
	case msgp.StrType:
		return d.str()
	case msgp.BinType:
		v, rest, err := msgp.ReadBytesBytes(d.b, nil)
		d.b = rest
		return v, err
	case msgp.BoolType:
		return d.boolean()
	case msgp.NilType:
		d.b = d.b[1:]
		return nil, nil
	case msgp.ExtensionType, msgp.TimeType:
		t, err := d.time() // the JSON's times are strings
		return t.Format(time.RFC3339Nano), err
	default:
		return nil, fmt.Errorf("unexpected %v", t)
	}
}

func (d *mpDecoder) start(s *EpisodeStart) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "start_time":
			s.StartTime, err = d.time()
		case "location":
			err = d.strTo(&s.Location)
		case "language_instruction":
			err = d.strTo(&s.LanguageInstruction)
		case "metadata":
			s.Metadata, err = d.metadata()
		case "source":
			if d.null() {
				return nil
			}
			s.Source = &Source{}
			err = d.source(s.Source)
		default:
			err = errUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) source(s *Source) error {
	return d.object(func(key string) (err error) {
		var n int
		switch key {
		case "dataset":
			err = d.strTo(&s.Dataset)
		case "version":
			err = d.strTo(&s.Version)
		case "split":
			err = d.strTo(&s.Split)
		case "shard":
			err = d.strTo(&s.Shard)
		case "record":
			n, err = d.integer()
			s.Record = int64(n)
		case "offset":
			n, err = d.integer()
			s.Offset = int64(n)
		default:
			err = errUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) step(s *Step) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "index":
			s.Index, err = d.integer()
		case "timestamp":
			s.Timestamp, err = d.time()
		case "observation":
			s.Observation, err = d.features()
		case "action":
			s.Action, err = d.features()
		case "reward":
			s.Reward, err = d.number()
		case "discount":
			s.Discount, err = d.number()
		case "is_first":
			s.IsFirst, err = d.boolean()
		case "is_last":
			s.IsLast, err = d.boolean()
		case "is_terminal":
			s.IsTerminal, err = d.boolean()
		case "language_instruction":
			err = d.strTo(&s.LanguageInstruction)
		case "metadata":
			s.Metadata, err = d.metadata()
		case "annotations":
			if d.null() {
				return nil
			}
			s.Annotations = &Annotations{}
			err = d.annotations(s.Annotations)
		default:
			err = errUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) end(e *EpisodeEnd) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "end_time":
			e.EndTime, err = d.time()
		case "success":
			if d.null() {
				return nil
			}
			var v bool
			v, err = d.boolean()
			e.Success = &v
		case "reward_sum":
			if d.null() {
				return nil
			}
			var v float64
			v, err = d.number()
			e.RewardSum = &v
		case "steps":
			e.Steps, err = d.integer()
		case "metadata":
			e.Metadata, err = d.metadata()
		default:
			err = errUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) annotations(a *Annotations) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "entities":
			a.Entities, err = d.strs()
		case "tool":
			err = d.strTo(&a.Tool)
		case "goal":
			err = d.strTo(&a.Goal)
		case "intent":
			err = d.strTo(&a.Intent)
		case "events":
			var n int
			if n, err = d.array(); err != nil || n < 0 {
				return err
			}
			a.Events = make([]Event, n)
			for i := range a.Events {
				if err := d.event(&a.Events[i]); err != nil {
					return fmt.Errorf("%d: %w", i, err)
				}
			}
		case "location":
			err = d.strTo(&a.Location)
		case "scene_tags":
			a.SceneTags, err = d.strs()
		default:
			err = errUnknownKey
		}
		return err
	})
}

func (d *mpDecoder) event(e *Event) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "subject":
			err = d.strTo(&e.Subject)
		case "predicate":
			err = d.strTo(&e.Predicate)
		case "object":
			err = d.strTo(&e.Object)
		case "edge_type":
			err = d.strTo(&e.EdgeType)
		case "value":
			err = d.strTo(&e.Value)
		case "confidence":
			if d.null() {
				return nil
			}
			var v float64
			v, err = d.number()
			e.Confidence = &v
		case "allow_roles":
			e.AllowRoles, err = d.strs()
		case "deny_roles":
			e.DenyRoles, err = d.strs()
		case "audience":
			e.Audience, err = d.strs()
		case "embedding":
			e.Embedding, err = d.vector()
		default:
			err = errUnknownKey
		}
		return err
	})
}

// features reads a map of tensors, or an array (one flat tensor).
func (d *mpDecoder) features() (Features, error) {
	if d.null() {
		return nil, nil
	}
	if msgp.NextType(d.b) == msgp.ArrayType {
		t, err := d.tensor()
		return Features{"": t}, err
	}
	f := Features{}
	err := d.object(func(key string) error {
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
	switch typ := msgp.NextType(d.b); typ {
	case msgp.MapType:
	case msgp.ArrayType:
		v, err := d.value(0)
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
		s, err := d.str()
		return Tensor{DType: String, Text: []string{s}}, err
	case msgp.BoolType:
		v, err := d.boolean()
		return Tensor{DType: Bool, Data: []float64{b2f(v)}}, err
	case msgp.IntType, msgp.UintType, msgp.Float32Type, msgp.Float64Type:
		v, err := d.number()
		if err != nil {
			return t, err
		}
		t = Tensor{DType: Float32, Data: []float64{v}}
		return t, t.Validate()
	default:
		return t, fmt.Errorf("tensor: want a map, array, number, bool or string, got %v", typ)
	}
	err := d.object(func(key string) (err error) {
		switch key {
		case "dtype":
			var s string
			s, err = d.str()
			t.DType = DType(s)
		case "shape":
			t.Shape, err = d.integers()
		case "data":
			t.Data, err = d.numbers()
		case "text":
			t.Text, err = d.strs()
		case "bytes":
			switch msgp.NextType(d.b) {
			case msgp.NilType:
				d.b = d.b[1:]
			case msgp.StrType:
				var v []byte
				v, d.b, err = msgp.ReadStringAsBytes(d.b, nil)
				t.Bytes = v
			default:
				t.Bytes, d.b, err = msgp.ReadBytesBytes(d.b, nil)
			}
		case "encoding":
			err = d.strTo(&t.Encoding)
		case "ref":
			err = d.strTo(&t.Ref)
		default:
			err = errUnknownKey
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
	w := mpWriter{b: b}
	w.object(func() {
		w.field("kind", string(m.Kind))
		w.field("agent", m.Agent)
		w.field("episode_id", m.EpisodeID)
		w.optField("tenant", m.Tenant)
		w.optField("project", m.Project)
		if s := m.Start; s != nil {
			w.key("start")
			w.object(func() {
				w.key("start_time")
				w.time(s.StartTime)
				w.optField("location", s.Location)
				w.optField("language_instruction", s.LanguageInstruction)
				w.metadata(s.Metadata)
				if src := s.Source; src != nil {
					w.key("source")
					w.object(func() {
						w.field("dataset", src.Dataset)
						w.optField("version", src.Version)
						w.optField("split", src.Split)
						w.optField("shard", src.Shard)
						w.key("record")
						w.b = msgp.AppendInt64(w.b, src.Record)
						if src.Offset != 0 {
							w.key("offset")
							w.b = msgp.AppendInt64(w.b, src.Offset)
						}
					})
				}
			})
		}
		if s := m.Step; s != nil {
			w.key("step")
			w.step(s)
		}
		if e := m.End; e != nil {
			w.key("end")
			w.object(func() {
				w.key("end_time")
				w.time(e.EndTime)
				if e.Success != nil {
					w.key("success")
					w.b = msgp.AppendBool(w.b, *e.Success)
				}
				if e.RewardSum != nil {
					w.key("reward_sum")
					w.number(*e.RewardSum)
				}
				w.key("steps")
				w.b = msgp.AppendInt(w.b, e.Steps)
				w.metadata(e.Metadata)
			})
		}
	})
	return w.b, w.err
}

// mpWriter writes the msgpack wire format. A map's header is written
// once its fields are counted: object reserves the largest header
// (map32) and fixes it up.
type mpWriter struct {
	b      []byte
	fields uint32
	err    error
}

func (w *mpWriter) object(fill func()) {
	at, outer := len(w.b), w.fields
	w.b = append(w.b, 0xdf, 0, 0, 0, 0)
	w.fields = 0
	fill()
	n := w.fields
	w.fields = outer
	if n < 16 { // a fixmap: shift the fields back over the spare bytes
		w.b[at] = 0x80 | byte(n)
		w.b = append(w.b[:at+1], w.b[at+5:]...)
		return
	}
	binary.BigEndian.PutUint32(w.b[at+1:], n)
}

func (w *mpWriter) key(k string) {
	w.b = msgp.AppendString(w.b, k)
	w.fields++
}

func (w *mpWriter) field(k, v string) {
	w.key(k)
	w.b = msgp.AppendString(w.b, v)
}

func (w *mpWriter) optField(k, v string) {
	if v != "" {
		w.field(k, v)
	}
}

func (w *mpWriter) strs(k string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.key(k)
	w.b = msgp.AppendArrayHeader(w.b, uint32(len(ss)))
	for _, s := range ss {
		w.b = msgp.AppendString(w.b, s)
	}
}

func (w *mpWriter) time(t time.Time) { w.b = msgp.AppendTimeExt(w.b, t) }

// number writes v as an integer when it is one, else as a float32 when
// that holds it exactly, else as a float64.
func (w *mpWriter) number(v float64) {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		w.b = msgp.AppendInt64(w.b, int64(v))
	case float64(float32(v)) == v:
		w.b = msgp.AppendFloat32(w.b, float32(v))
	default:
		w.b = msgp.AppendFloat64(w.b, v)
	}
}

func (w *mpWriter) metadata(md map[string]any) {
	if len(md) == 0 {
		return
	}
	w.key("metadata")
	var err error
	if w.b, err = msgp.AppendIntf(w.b, md); err != nil && w.err == nil {
		w.err = fmt.Errorf("metadata: %w", err)
	}
}

func (w *mpWriter) step(s *Step) {
	w.object(func() {
		w.key("index")
		w.b = msgp.AppendInt(w.b, s.Index)
		w.key("timestamp")
		w.time(s.Timestamp)
		w.features("observation", s.Observation)
		w.features("action", s.Action)
		w.key("reward")
		w.number(s.Reward)
		w.key("discount")
		w.number(s.Discount)
		for _, f := range []struct {
			k string
			v bool
		}{{"is_first", s.IsFirst}, {"is_last", s.IsLast}, {"is_terminal", s.IsTerminal}} {
			w.key(f.k)
			w.b = msgp.AppendBool(w.b, f.v)
		}
		w.optField("language_instruction", s.LanguageInstruction)
		w.metadata(s.Metadata)
		if a := s.Annotations; a != nil {
			w.key("annotations")
			w.annotations(a)
		}
	})
}

func (w *mpWriter) annotations(a *Annotations) {
	w.object(func() {
		w.strs("entities", a.Entities)
		w.optField("tool", a.Tool)
		w.optField("goal", a.Goal)
		w.optField("intent", a.Intent)
		if len(a.Events) > 0 {
			w.key("events")
			w.b = msgp.AppendArrayHeader(w.b, uint32(len(a.Events)))
			for i := range a.Events {
				w.event(&a.Events[i])
			}
		}
		w.optField("location", a.Location)
		w.strs("scene_tags", a.SceneTags)
	})
}

func (w *mpWriter) event(e *Event) {
	w.object(func() {
		w.field("subject", e.Subject)
		w.field("predicate", e.Predicate)
		w.field("object", e.Object)
		w.optField("edge_type", e.EdgeType)
		w.optField("value", e.Value)
		if e.Confidence != nil {
			w.key("confidence")
			w.number(*e.Confidence)
		}
		w.strs("allow_roles", e.AllowRoles)
		w.strs("deny_roles", e.DenyRoles)
		w.strs("audience", e.Audience)
		if len(e.Embedding) > 0 {
			w.key("embedding")
			w.b = msgp.AppendArrayHeader(w.b, uint32(len(e.Embedding)))
			for _, v := range e.Embedding {
				w.number(float64(v))
			}
		}
	})
}

func (w *mpWriter) features(k string, f Features) {
	if len(f) == 0 {
		return
	}
	w.key(k)
	w.object(func() {
		for name, t := range f {
			w.key(name)
			w.tensor(t)
		}
	})
}

func (w *mpWriter) tensor(t Tensor) {
	w.object(func() {
		w.field("dtype", string(t.DType))
		if len(t.Shape) > 0 {
			w.key("shape")
			w.b = msgp.AppendArrayHeader(w.b, uint32(len(t.Shape)))
			for _, n := range t.Shape {
				w.b = msgp.AppendInt(w.b, n)
			}
		}
		if len(t.Data) > 0 {
			w.key("data")
			w.b = msgp.AppendArrayHeader(w.b, uint32(len(t.Data)))
			for _, v := range t.Data {
				w.number(v)
			}
		}
		w.strs("text", t.Text)
		if len(t.Bytes) > 0 {
			w.key("bytes")
			w.b = msgp.AppendBytes(w.b, t.Bytes)
		}
		w.optField("encoding", t.Encoding)
		w.optField("ref", t.Ref)
	})
}
