package rlds

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Stored steps start with a format byte.
//
// Format 1 is the wire JSON with image and byte tensors replaced by blob
// references. It is still read, never written.
//
// Format 2 is binary, so that an export decodes a million steps a
// second. Integers are unsigned varints (uv) unless sized; sized numbers
// are little-endian; a string or byte run is uv length + bytes:
//
//	u8 2 | uv index | u8 flags (1 is_first, 2 is_last, 4 is_terminal,
//	     8 has timestamp, 16 has extra)
//	[timestamp: i64 unix seconds | u32 nanoseconds]
//	f64 reward | f64 discount | str language_instruction
//	observation: uv count | count × feature (sorted by name)
//	action:      uv count | count × feature (sorted by name)
//	[extra: str JSON {"metadata":...,"annotations":...}]
//
//	feature: str name | u8 dtype code (0: str dtype follows) |
//	         uv ndim | ndim × uv dim |
//	         u8 element width (0: the dtype's own, 1: float64) | uv n | n × element |
//	         uv ntext | ntext × str | str bytes | str encoding | str ref
//
// Elements are stored in the dtype's own width (float32 4 bytes, int32 4,
// int64 8, uint8 and bool 1) when every value of the tensor converts
// exactly, else as float64, so decoding gives back exactly the Data that
// was encoded.
const (
	stepFormatV1 byte = 1
	stepFormatV2 byte = 2
)

const (
	flagFirst byte = 1 << iota
	flagLast
	flagTerminal
	flagTime
	flagExtra
)

const (
	elemNative  byte = 0
	elemFloat64 byte = 1
)

// dtypeCodes are the dtype codes of format 2: index + 1.
var dtypeCodes = []DType{Float32, Float64, Int64, Int32, Uint8, Bool, String, Image, Bytes}

// stepExtra is the JSON tail of a format 2 step.
type stepExtra struct {
	Metadata    map[string]any `json:"metadata,omitempty"`
	Annotations *Annotations   `json:"annotations,omitempty"`
}

// EncodeStep encodes a step for storage (format 2).
func EncodeStep(s *Step) ([]byte, error) {
	if s.Index < 0 {
		return nil, fmt.Errorf("encode step %d: negative index", s.Index)
	}
	js, err := stepExtraJSON(s)
	if err != nil {
		return nil, err
	}
	// Sized once: the fixed part, the features, the JSON tail.
	size := 64 + len(s.LanguageInstruction) + len(js) + featuresSize(s.Observation) + featuresSize(s.Action)
	return appendStep(make([]byte, 0, size), s, js), nil
}

// featuresSize bounds the encoded size of f.
func featuresSize(f Features) int {
	n := binary.MaxVarintLen64
	for k, t := range f {
		n += 8*binary.MaxVarintLen64 + len(k) + len(t.DType) + binary.MaxVarintLen64*len(t.Shape) + 8*len(t.Data) +
			len(t.Bytes) + len(t.Encoding) + len(t.Ref)
		for _, s := range t.Text {
			n += binary.MaxVarintLen64 + len(s)
		}
	}
	return n
}

// stepExtraJSON is the JSON tail of s, nil when it has none.
func stepExtraJSON(s *Step) ([]byte, error) {
	if s.Metadata == nil && s.Annotations == nil {
		return nil, nil
	}
	if s.Metadata == nil {
		if js, ok := annotationsJSON(s.Annotations); ok {
			return js, nil
		}
	}
	js, err := json.Marshal(stepExtra{Metadata: s.Metadata, Annotations: s.Annotations})
	if err != nil {
		return nil, fmt.Errorf("encode step %d: %w", s.Index, err)
	}
	return js, nil
}

// AppendStep appends the storage encoding of s (format 2) to dst.
func AppendStep(dst []byte, s *Step) ([]byte, error) {
	if s.Index < 0 {
		return nil, fmt.Errorf("encode step %d: negative index", s.Index)
	}
	js, err := stepExtraJSON(s)
	if err != nil {
		return nil, err
	}
	return appendStep(dst, s, js), nil
}

// appendStep appends s with its JSON tail js (from stepExtraJSON).
func appendStep(dst []byte, s *Step, js []byte) []byte {
	b := append(dst, stepFormatV2)
	b = binary.AppendUvarint(b, uint64(s.Index))
	var flags byte
	for _, f := range []struct {
		on   bool
		flag byte
	}{{s.IsFirst, flagFirst}, {s.IsLast, flagLast}, {s.IsTerminal, flagTerminal}, {!s.Timestamp.IsZero(), flagTime},
		{s.Metadata != nil || s.Annotations != nil, flagExtra}} {
		if f.on {
			flags |= f.flag
		}
	}
	b = append(b, flags)
	if flags&flagTime != 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Timestamp.Unix()))
		b = binary.LittleEndian.AppendUint32(b, uint32(s.Timestamp.Nanosecond()))
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Reward))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Discount))
	b = appendStr(b, s.LanguageInstruction)
	b = appendFeatures(b, s.Observation)
	b = appendFeatures(b, s.Action)
	if flags&flagExtra != 0 {
		b = binary.AppendUvarint(b, uint64(len(js)))
		b = append(b, js...)
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFeatures(b []byte, f Features) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendTensor(appendStr(b, k), f[k])
	}
	return b
}

func appendTensor(b []byte, t Tensor) []byte {
	code := byte(slices.Index(dtypeCodes, t.DType) + 1)
	b = append(b, code)
	if code == 0 {
		b = appendStr(b, string(t.DType))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Shape)))
	for _, d := range t.Shape {
		b = binary.AppendUvarint(b, uint64(d))
	}
	width := elemFloat64
	if nativeExact(t.DType, t.Data) {
		width = elemNative
	}
	b = append(b, width)
	b = binary.AppendUvarint(b, uint64(len(t.Data)))
	for _, x := range t.Data {
		if width == elemFloat64 {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			continue
		}
		switch t.DType {
		case Float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
		case Int64:
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(x)))
		case Int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(x)))
		case Uint8, Bool:
			b = append(b, byte(x))
		default:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(t.Text)))
	for _, s := range t.Text {
		b = appendStr(b, s)
	}
	b = appendStr(b, string(t.Bytes))
	b = appendStr(b, t.Encoding)
	return appendStr(b, t.Ref)
}

// nativeExact reports whether every value of data converts to dtype and
// back unchanged.
func nativeExact(dt DType, data []float64) bool {
	for _, x := range data {
		var ok bool
		switch dt {
		case Float32:
			ok = float64(float32(x)) == x
		case Int64:
			ok = x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63
		case Int32:
			ok = x == math.Trunc(x) && x >= math.MinInt32 && x <= math.MaxInt32
		case Uint8:
			ok = x == math.Trunc(x) && x >= 0 && x <= 255
		case Bool:
			ok = x == 0 || x == 1
		default:
			ok = true // float64 and the non-numeric dtypes store float64
		}
		if !ok {
			return false
		}
	}
	return true
}

// elemSize is the stored width of one element of dt.
func elemSize(dt DType, width byte) int {
	if width == elemFloat64 {
		return 8
	}
	switch dt {
	case Float32, Int32:
		return 4
	case Uint8, Bool:
		return 1
	default:
		return 8
	}
}

// DecodeStep decodes a stored step of either format.
func DecodeStep(b []byte) (*Step, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty step", ErrCorrupt)
	}
	switch b[0] {
	case stepFormatV1:
		var s Step
		if err := json.Unmarshal(b[1:], &s); err != nil {
			return nil, fmt.Errorf("%w: step: %v", ErrCorrupt, err)
		}
		return &s, nil
	case stepFormatV2:
		var v StepView
		if err := v.parseV2(b); err != nil {
			return nil, err
		}
		return v.Step()
	}
	return nil, fmt.Errorf("%w: step format %d", ErrCorrupt, b[0])
}

// StepView is a stored step parsed in place: its byte slices point into
// the encoding (or a scratch copy), so parsing allocates nothing once
// the view has grown to the step's size. Everything in it is valid until
// the next Parse, and no longer than the encoding it was parsed from.
// It is how an exporter reads steps without building a [Step].
type StepView struct {
	Index       int
	Timestamp   time.Time
	Reward      float64
	Discount    float64
	IsFirst     bool
	IsLast      bool
	IsTerminal  bool
	Instruction []byte
	Observation []FeatureView
	Action      []FeatureView
	// Extra is the JSON {"metadata":...,"annotations":...}, or nil.
	Extra []byte

	dims    []int
	scratch []byte
}

// FeatureView is one feature of a [StepView].
type FeatureView struct {
	// Name is the key below observation or action ("" for a flat tensor).
	Name     []byte
	DType    DType
	Shape    []int
	Bytes    []byte
	Encoding []byte
	Ref      []byte

	width byte
	n     int
	data  []byte
	ntext int
	text  []byte
}

// Len is the number of numeric elements.
func (f *FeatureView) Len() int { return f.n }

// Float64 is element i as a float64.
func (f *FeatureView) Float64(i int) float64 {
	if f.width == elemFloat64 {
		return math.Float64frombits(binary.LittleEndian.Uint64(f.data[8*i:]))
	}
	switch f.DType {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(f.data[4*i:])))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(f.data[8*i:])))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(f.data[4*i:])))
	case Uint8, Bool:
		return float64(f.data[i])
	default:
		return math.Float64frombits(binary.LittleEndian.Uint64(f.data[8*i:]))
	}
}

// AppendFloat32 appends the elements as float32.
func (f *FeatureView) AppendFloat32(dst []float32) []float32 {
	if f.width == elemNative && f.DType == Float32 {
		for i := 0; i < f.n; i++ {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(f.data[4*i:])))
		}
		return dst
	}
	for i := 0; i < f.n; i++ {
		dst = append(dst, float32(f.Float64(i)))
	}
	return dst
}

// AppendFloat64 appends the elements as float64.
func (f *FeatureView) AppendFloat64(dst []float64) []float64 {
	for i := 0; i < f.n; i++ {
		dst = append(dst, f.Float64(i))
	}
	return dst
}

// AppendInt64 appends the elements as int64 (truncating).
func (f *FeatureView) AppendInt64(dst []int64) []int64 {
	if f.width == elemNative && f.DType == Int64 {
		for i := 0; i < f.n; i++ {
			dst = append(dst, int64(binary.LittleEndian.Uint64(f.data[8*i:])))
		}
		return dst
	}
	for i := 0; i < f.n; i++ {
		dst = append(dst, int64(f.Float64(i)))
	}
	return dst
}

// Texts calls fn with each string of a string tensor; s is borrowed.
func (f *FeatureView) Texts(fn func(s []byte)) {
	r := reader{b: f.text}
	for i := 0; i < f.ntext; i++ {
		fn(r.bytes())
	}
}

// Tensor copies the feature out as a Tensor.
func (f *FeatureView) Tensor() Tensor {
	t := Tensor{DType: f.DType, Encoding: string(f.Encoding), Ref: string(f.Ref)}
	if len(f.Shape) > 0 {
		t.Shape = slices.Clone(f.Shape)
	}
	if f.n > 0 {
		t.Data = f.AppendFloat64(make([]float64, 0, f.n))
	}
	if f.ntext > 0 {
		t.Text = make([]string, 0, f.ntext)
		f.Texts(func(s []byte) { t.Text = append(t.Text, string(s)) })
	}
	if len(f.Bytes) > 0 {
		t.Bytes = slices.Clone(f.Bytes)
	}
	return t
}

// Step copies the view out as a Step.
func (v *StepView) Step() (*Step, error) {
	s := &Step{
		Index: v.Index, Timestamp: v.Timestamp, Reward: v.Reward, Discount: v.Discount,
		IsFirst: v.IsFirst, IsLast: v.IsLast, IsTerminal: v.IsTerminal,
		LanguageInstruction: string(v.Instruction),
		Observation:         features(v.Observation), Action: features(v.Action),
	}
	if v.Extra != nil {
		var x stepExtra
		if err := json.Unmarshal(v.Extra, &x); err != nil {
			return nil, fmt.Errorf("%w: step %d extra: %v", ErrCorrupt, v.Index, err)
		}
		s.Metadata, s.Annotations = x.Metadata, x.Annotations
	}
	return s, nil
}

func features(fs []FeatureView) Features {
	if len(fs) == 0 {
		return nil
	}
	out := make(Features, len(fs))
	for i := range fs {
		out[string(fs[i].Name)] = fs[i].Tensor()
	}
	return out
}

// Parse parses a stored step of either format into v. A format 1 (JSON)
// step is converted through a scratch buffer that v owns.
func (v *StepView) Parse(b []byte) error {
	if len(b) > 0 && b[0] == stepFormatV1 {
		s, err := DecodeStep(b)
		if err != nil {
			return err
		}
		v.scratch, err = AppendStep(v.scratch[:0], s)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		b = v.scratch
	}
	return v.parseV2(b)
}

func (v *StepView) parseV2(b []byte) error {
	if len(b) == 0 || b[0] != stepFormatV2 {
		return fmt.Errorf("%w: step format", ErrCorrupt)
	}
	r := reader{b: b[1:]}
	v.Index = int(r.uvarint())
	flags := r.byte()
	v.IsFirst, v.IsLast, v.IsTerminal = flags&flagFirst != 0, flags&flagLast != 0, flags&flagTerminal != 0
	v.Timestamp = time.Time{}
	if flags&flagTime != 0 {
		sec, nsec := int64(r.u64()), r.u32()
		v.Timestamp = time.Unix(sec, int64(nsec)).UTC()
	}
	v.Reward = math.Float64frombits(r.u64())
	v.Discount = math.Float64frombits(r.u64())
	v.Instruction = r.bytes()
	v.dims = v.dims[:0]
	v.Observation = v.parseFeatures(&r, v.Observation[:0])
	v.Action = v.parseFeatures(&r, v.Action[:0])
	v.Extra = nil
	if flags&flagExtra != 0 {
		v.Extra = r.bytes()
	}
	if err := r.check(); err != nil {
		return fmt.Errorf("%w: step: %v", ErrCorrupt, err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: step: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	return nil
}

func (v *StepView) parseFeatures(r *reader, out []FeatureView) []FeatureView {
	n := r.count(2)
	for i := 0; i < n && r.bad == ""; i++ {
		var f FeatureView
		f.Name = r.bytes()
		code := int(r.byte())
		switch {
		case code == 0:
			f.DType = DType(r.bytes())
		case code <= len(dtypeCodes):
			f.DType = dtypeCodes[code-1]
		default:
			r.fail("unknown dtype code")
		}
		nd := r.count(1)
		start := len(v.dims)
		for j := 0; j < nd; j++ {
			v.dims = append(v.dims, int(r.uvarint()))
		}
		if nd > 0 {
			f.Shape = v.dims[start:len(v.dims):len(v.dims)]
		}
		f.width = r.byte()
		if f.width > elemFloat64 {
			r.fail("unknown element width")
		}
		sz := elemSize(f.DType, f.width)
		f.n = r.count(sz)
		f.data = r.take(f.n * sz)
		f.ntext = r.count(1)
		rest := r.b
		for j := 0; j < f.ntext; j++ {
			r.bytes()
		}
		f.text = rest[:len(rest)-len(r.b)]
		f.Bytes = r.bytes()
		f.Encoding = r.bytes()
		f.Ref = r.bytes()
		out = append(out, f)
	}
	return out
}

// reader consumes a format 2 encoding; the first error sticks and makes
// every later read return zero values. Its methods are small enough to
// inline; failing is out of line.
type reader struct {
	b   []byte
	bad string // the first failure, "" while none
	err error  // the first failure, for errors.Is; set by check
}

// fail records the first failure and consumes everything.
func (r *reader) fail(msg string) {
	if r.bad == "" {
		r.bad = msg
	}
	r.b = nil
}

// check turns a recorded failure into r.err.
func (r *reader) check() error {
	if r.bad != "" && r.err == nil {
		r.err = errors.New(r.bad)
	}
	return r.err
}

func (r *reader) take(n int) []byte {
	if uint(n) > uint(len(r.b)) {
		r.fail("truncated")
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return x
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if len(r.b) > 0 && r.b[0] < 0x80 { // one byte: most counts and lengths
		x := uint64(r.b[0])
		r.b = r.b[1:]
		return x
	}
	return r.uvarintLong()
}

func (r *reader) uvarintLong() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

// count reads a count of items of at least min (>= 1) bytes each,
// refusing one that the remaining bytes cannot hold.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)) || n*uint64(min) > uint64(len(r.b)) {
		r.fail("count exceeds the bytes left")
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	if len(r.b) > 0 && r.b[0] == 0 { // empty: most refs, encodings and byte runs
		r.b = r.b[1:]
		return nil
	}
	return r.take(r.count(1))
}

// annotationsJSON writes what json.Marshal writes of
// stepExtra{Annotations: an}, without reflection, for the annotations
// ingest sees: names in printable ASCII that JSON (escaping HTML) keeps
// as they are, finite confidences, no event vectors. Anything else
// reports false, for json.Marshal.
func annotationsJSON(an *Annotations) ([]byte, bool) {
	w := jsonWriter{b: make([]byte, 0, 128+32*len(an.Entities)+160*len(an.Events)), ok: true}
	w.b = append(w.b, `{"annotations":{`...)
	n := 0
	if len(an.Entities) > 0 {
		w.strsField(&n, "entities", an.Entities)
	}
	w.strField(&n, "tool", an.Tool)
	w.strField(&n, "goal", an.Goal)
	w.strField(&n, "intent", an.Intent)
	if len(an.Events) > 0 {
		w.key(&n, "events")
		w.b = append(w.b, '[')
		for i := range an.Events {
			ev := &an.Events[i]
			if len(ev.Embedding) > 0 {
				return nil, false
			}
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			m := 0
			w.key(&m, "subject")
			w.str(ev.Subject)
			w.key(&m, "predicate")
			w.str(ev.Predicate)
			w.key(&m, "object")
			w.str(ev.Object)
			w.strField(&m, "edge_type", ev.EdgeType)
			w.strField(&m, "value", ev.Value)
			if ev.Confidence != nil {
				// encoding/json's own number form (and its refusal of
				// NaN and infinities).
				js, err := json.Marshal(*ev.Confidence)
				if err != nil {
					return nil, false
				}
				w.key(&m, "confidence")
				w.b = append(w.b, js...)
			}
			w.strsField(&m, "allow_roles", ev.AllowRoles)
			w.strsField(&m, "deny_roles", ev.DenyRoles)
			w.strsField(&m, "audience", ev.Audience)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.strField(&n, "location", an.Location)
	w.strsField(&n, "scene_tags", an.SceneTags)
	w.b = append(w.b, '}', '}')
	return w.b, w.ok
}

// jsonWriter appends JSON; ok turns false at a value it does not write
// as encoding/json would.
type jsonWriter struct {
	b  []byte
	ok bool
}

// key writes the name of an object's field, after a comma unless it is
// the object's first (*n counts the fields written).
func (w *jsonWriter) key(n *int, name string) {
	if *n > 0 {
		w.b = append(w.b, ',')
	}
	*n++
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

// strField and strsField write an omitempty field.
func (w *jsonWriter) strField(n *int, name, s string) {
	if s != "" {
		w.key(n, name)
		w.str(s)
	}
}

func (w *jsonWriter) strsField(n *int, name string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.key(n, name)
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// str writes s quoted; only printable ASCII that needs no escape (nor
// HTML escaping: <, >, &).
func (w *jsonWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.ok = false
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}
