package rlds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Kind names what a wire [Message] carries.
type Kind string

// The message kinds of an episode's life. A steps message carries
// several consecutive steps of one episode: a controller that steps
// faster than it needs each step seen, or an upload of a recorded
// stretch, sends them in one message and pays JetStream's costs (store,
// delivery, ack, dedupe) once for all of them.
const (
	KindEpisodeStart Kind = "episode_start"
	KindStep         Kind = "step"
	KindSteps        Kind = "steps"
	KindEpisodeEnd   Kind = "episode_end"
)

// MaxStepsPerMessage is the most steps one steps message may carry. A
// message is applied in one transaction with the rest of its batch, so
// its size is bounded like any message's (ingest.max_message_bytes);
// this bounds the count of small steps as well.
const MaxStepsPerMessage = 1024

// Message is one unit on the wire: the JSON body of one NATS message on
// ctxgraph.rlds.<agent>.<episode>, and one line of a JSONL episode file.
//
// Exactly one of Start, Step, Steps and End is set, matching Kind.
type Message struct {
	Kind      Kind   `json:"kind"`
	Agent     string `json:"agent"`
	EpisodeID string `json:"episode_id"`
	// Tenant and Project namespace the write; empty means "default".
	Tenant  string `json:"tenant,omitempty"`
	Project string `json:"project,omitempty"`

	Start *EpisodeStart `json:"start,omitempty"`
	Step  *Step         `json:"step,omitempty"`
	// Steps are a steps message's steps, in increasing index order. They
	// apply together or not at all; each is applied, and is a duplicate
	// or not, as the same step sent alone would be.
	Steps []Step      `json:"steps,omitempty"`
	End   *EpisodeEnd `json:"end,omitempty"`
}

// EpisodeStart opens an episode.
type EpisodeStart struct {
	StartTime           time.Time      `json:"start_time"`
	Location            string         `json:"location,omitempty"`
	LanguageInstruction string         `json:"language_instruction,omitempty"`
	Metadata            map[string]any `json:"metadata,omitempty"`
	// Source names the dataset record an imported episode came from.
	Source *Source `json:"source,omitempty"`
}

// Source identifies an episode inside an RLDS/TFDS dataset. Together its
// fields are unique, unlike episode_metadata/episode_id in real datasets.
type Source struct {
	Dataset string `json:"dataset"`
	Version string `json:"version,omitempty"`
	Split   string `json:"split,omitempty"`
	Shard   string `json:"shard,omitempty"`
	Record  int64  `json:"record"`
	// Offset is the byte offset of the record in its shard file.
	Offset int64 `json:"offset,omitempty"`
}

// Step is one RLDS step plus the controller's optional annotations.
type Step struct {
	Index               int            `json:"index"`
	Timestamp           time.Time      `json:"timestamp"`
	Observation         Features       `json:"observation,omitempty"`
	Action              Features       `json:"action,omitempty"`
	Reward              float64        `json:"reward"`
	Discount            float64        `json:"discount"`
	IsFirst             bool           `json:"is_first"`
	IsLast              bool           `json:"is_last"`
	IsTerminal          bool           `json:"is_terminal"`
	LanguageInstruction string         `json:"language_instruction,omitempty"`
	Metadata            map[string]any `json:"metadata,omitempty"`
	Annotations         *Annotations   `json:"annotations,omitempty"`
}

// EpisodeEnd closes an episode and reports its outcome when known.
type EpisodeEnd struct {
	EndTime   time.Time      `json:"end_time"`
	Success   *bool          `json:"success,omitempty"`
	RewardSum *float64       `json:"reward_sum,omitempty"`
	Steps     int            `json:"steps"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Annotations is what a controller knows symbolically about a step.
type Annotations struct {
	Entities  []string `json:"entities,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	Goal      string   `json:"goal,omitempty"`
	Intent    string   `json:"intent,omitempty"`
	Events    []Event  `json:"events,omitempty"`
	Location  string   `json:"location,omitempty"`
	SceneTags []string `json:"scene_tags,omitempty"`
}

// Event is a subject/predicate/object statement observed at a step.
type Event struct {
	Subject   string `json:"subject"`
	Predicate string `json:"predicate"`
	Object    string `json:"object"`
	// EdgeType is one of causal, temporal, membership, policy, tool_use,
	// assertion. Empty means assertion.
	EdgeType   string   `json:"edge_type,omitempty"`
	Value      string   `json:"value,omitempty"`
	Confidence *float64 `json:"confidence,omitempty"`
	AllowRoles []string `json:"allow_roles,omitempty"`
	DenyRoles  []string `json:"deny_roles,omitempty"`
	Audience   []string `json:"audience,omitempty"`
	// Embedding, when set, is the vector of the edge the event creates
	// (the controller's own embedding of what it saw), used instead of
	// embedding the event's text. It needs the daemon's embedding
	// dimensions and finite values, not all zero; it is stored with the
	// edge, not repeated in the step record.
	Embedding []float32 `json:"embedding,omitempty"`
}

// DType names a tensor's element type.
type DType string

// Element types that RLDS datasets use.
const (
	Float32 DType = "float32"
	Float64 DType = "float64"
	Int64   DType = "int64"
	Int32   DType = "int32"
	Uint8   DType = "uint8"
	Bool    DType = "bool"
	String  DType = "string"
	// Image is an encoded image (JPEG or PNG bytes), never decoded here.
	Image DType = "image"
	// Bytes is opaque binary data.
	Bytes DType = "bytes"
)

// Tensor is one feature value of a step. Numbers travel as float64 in
// Data whatever DType says (DType is what export writes); text in Text;
// encoded images and other binary in Bytes (base64 in JSON) or, when the
// bytes stay in their source file or the blob store, a Ref.
type Tensor struct {
	DType    DType     `json:"dtype"`
	Shape    []int     `json:"shape,omitempty"`
	Data     []float64 `json:"data,omitempty"`
	Text     []string  `json:"text,omitempty"`
	Bytes    []byte    `json:"bytes,omitempty"`
	Encoding string    `json:"encoding,omitempty"` // jpeg, png, raw
	Ref      string    `json:"ref,omitempty"`
}

// Features maps a feature name (its path below observation/ or action/,
// "" for a flat tensor) to its value.
type Features map[string]Tensor

// FeatureName is the full name of key below prefix: "action" for a flat
// action, "action/world_vector" for a nested one.
func FeatureName(prefix, key string) string {
	return string(appendFeatureName(make([]byte, 0, len(prefix)+1+len(key)), prefix, key))
}

// appendFeatureName appends FeatureName(prefix, key): a step's shape
// check builds names in scratch space.
func appendFeatureName(b []byte, prefix, key string) []byte {
	b = append(b, prefix...)
	if key != "" {
		b = append(append(b, '/'), key...)
	}
	return b
}

// UnmarshalJSON accepts the full form {"name": {"dtype":...}}, the short
// form {"name": [1,2,3]} or {"name": "text"}, and a bare array for a flat
// tensor.
func (f *Features) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*f = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var t Tensor
		if err := t.UnmarshalJSON(b); err != nil {
			return err
		}
		*f = Features{"": t}
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("features must be an object or an array: %w", err)
	}
	out := make(Features, len(raw))
	for k, v := range raw {
		var t Tensor
		if err := t.UnmarshalJSON(v); err != nil {
			return fmt.Errorf("feature %q: %w", k, err)
		}
		out[k] = t
	}
	*f = out
	return nil
}

type tensorJSON Tensor

// UnmarshalJSON accepts a full tensor object, an array of numbers (a
// float32 vector), a nested array (its shape inferred), a number, a bool
// or a string.
func (t *Tensor) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return fmt.Errorf("empty tensor")
	}
	switch b[0] {
	case '{':
		var tj tensorJSON
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tj); err != nil {
			return fmt.Errorf("tensor: %w", err)
		}
		*t = Tensor(tj)
		if t.DType == "" {
			t.DType = Float32
		}
		return t.Validate()
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Tensor{DType: String, Text: []string{s}}
		return nil
	case 't', 'f':
		var v bool
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*t = Tensor{DType: Bool, Data: []float64{b2f(v)}}
		return nil
	case '[':
		var flat []float64
		if err := json.Unmarshal(b, &flat); err == nil {
			*t = Tensor{DType: Float32, Shape: []int{len(flat)}, Data: flat}
			return t.Validate()
		}
		var v any // nested arrays, or bools
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		data, shape, err := flatten(v, nil, 0)
		if err != nil {
			return err
		}
		*t = Tensor{DType: Float32, Shape: shape, Data: data}
		return t.Validate()
	default:
		var v float64
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("tensor: want a number, array, string, bool or object: %w", err)
		}
		*t = Tensor{DType: Float32, Data: []float64{v}}
		return t.Validate()
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// flatten walks a nested JSON array, returning its values row-major and
// its shape; ragged arrays and non-numbers are errors.
func flatten(v any, data []float64, depth int) ([]float64, []int, error) {
	if depth > 8 {
		return nil, nil, fmt.Errorf("tensor nested deeper than 8")
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("tensor array holds %T, want numbers", v)
	}
	shape := []int{len(arr)}
	var inner []int
	for i, e := range arr {
		switch x := e.(type) {
		case float64:
			if inner != nil {
				return nil, nil, fmt.Errorf("ragged tensor")
			}
			data = append(data, x)
		case bool:
			data = append(data, b2f(x))
		case []any:
			var sh []int
			var err error
			data, sh, err = flatten(x, data, depth+1)
			if err != nil {
				return nil, nil, err
			}
			if i == 0 {
				inner = sh
			} else if !equalInts(inner, sh) {
				return nil, nil, fmt.Errorf("ragged tensor")
			}
		default:
			return nil, nil, fmt.Errorf("tensor array holds %T, want numbers", e)
		}
	}
	return data, append(shape, inner...), nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// NumElements is the product of Shape (1 for a scalar).
func (t Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Validate reports a tensor whose values do not fit its dtype and shape,
// or that holds NaN or infinite numbers.
func (t Tensor) Validate() error {
	switch t.DType {
	case Float32, Float64, Int64, Int32, Uint8, Bool:
		for i, v := range t.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: element %d is %v", ErrNonFinite, i, v)
			}
		}
		if len(t.Shape) > 0 && t.NumElements() != len(t.Data) {
			return fmt.Errorf("%w: shape %v holds %d values, got %d", ErrShape, t.Shape, t.NumElements(), len(t.Data))
		}
	case String:
	case Image, Bytes:
		if len(t.Data) > 0 {
			return fmt.Errorf("%w: %s tensor carries numbers", ErrDType, t.DType)
		}
	default:
		return fmt.Errorf("%w: %q", ErrDType, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("%w: negative dimension in %v", ErrShape, t.Shape)
		}
	}
	return nil
}

// Validate checks a message for the mistakes a sender can make, naming
// the field at fault.
func (m *Message) Validate() error {
	if strings.TrimSpace(m.Agent) == "" {
		return fmt.Errorf("%w: agent is required", ErrInvalid)
	}
	if strings.ContainsAny(m.Agent, ". *>\t\r\n") {
		return fmt.Errorf("%w: agent %q may not contain '.', '*', '>' or spaces", ErrInvalid, m.Agent)
	}
	if strings.TrimSpace(m.EpisodeID) == "" {
		return fmt.Errorf("%w: episode_id is required", ErrInvalid)
	}
	if strings.ContainsAny(m.EpisodeID, ". *>\t\r\n") {
		return fmt.Errorf("%w: episode_id %q may not contain '.', '*', '>' or spaces", ErrInvalid, m.EpisodeID)
	}
	if err := particle.CheckScope(m.Tenant, m.Project); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	set := 0
	for _, p := range []bool{m.Start != nil, m.Step != nil, m.Steps != nil, m.End != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("%w: exactly one of start, step, steps, end must be set", ErrInvalid)
	}
	switch m.Kind {
	case KindEpisodeStart:
		if m.Start == nil {
			return fmt.Errorf("%w: kind episode_start needs start", ErrInvalid)
		}
	case KindEpisodeEnd:
		if m.End == nil {
			return fmt.Errorf("%w: kind episode_end needs end", ErrInvalid)
		}
	case KindStep:
		if m.Step == nil {
			return fmt.Errorf("%w: kind step needs step", ErrInvalid)
		}
		return m.Step.Validate()
	case KindSteps:
		return validateSteps(m.Steps)
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, m.Kind)
	}
	return nil
}

// validateSteps checks a steps message's steps: at least one, at most
// MaxStepsPerMessage, indices increasing, each step valid. An error
// names the step at fault by its place and index.
func validateSteps(steps []Step) error {
	if len(steps) == 0 {
		return fmt.Errorf("%w: kind steps needs at least one step", ErrInvalid)
	}
	if len(steps) > MaxStepsPerMessage {
		return fmt.Errorf("%w: %d steps in one message, more than %d", ErrInvalid, len(steps), MaxStepsPerMessage)
	}
	for i := range steps {
		s := &steps[i]
		if i > 0 && s.Index <= steps[i-1].Index {
			return fmt.Errorf("%w: steps[%d] has index %d after index %d; indices must increase", ErrInvalid, i, s.Index, steps[i-1].Index)
		}
		if err := s.Validate(); err != nil {
			return fmt.Errorf("steps[%d] (index %d): %w", i, s.Index, err)
		}
	}
	return nil
}

// Validate checks a step's numbers, tensors and annotations.
func (s *Step) Validate() error {
	if s.Index < 0 {
		return fmt.Errorf("%w: step index %d is negative", ErrInvalid, s.Index)
	}
	for name, v := range map[string]float64{"reward": s.Reward, "discount": s.Discount} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: %s is %v", ErrNonFinite, name, v)
		}
	}
	for _, group := range []struct {
		prefix string
		f      Features
	}{{"observation", s.Observation}, {"action", s.Action}} {
		for k, t := range group.f {
			if err := t.Validate(); err != nil {
				return fmt.Errorf("%s: %w", FeatureName(group.prefix, k), err)
			}
		}
	}
	if a := s.Annotations; a != nil {
		for i, e := range a.Events {
			if strings.TrimSpace(e.Subject) == "" || strings.TrimSpace(e.Predicate) == "" || strings.TrimSpace(e.Object) == "" {
				return fmt.Errorf("%w: event %d needs subject, predicate and object", ErrInvalid, i)
			}
			if e.EdgeType != "" && !KnownEdgeType(e.EdgeType) {
				return fmt.Errorf("%w: event %d has unknown edge_type %q", ErrInvalid, i, e.EdgeType)
			}
			if c := e.Confidence; c != nil && (math.IsNaN(*c) || *c < 0 || *c > 1) {
				return fmt.Errorf("%w: event %d confidence %v is outside [0,1]", ErrInvalid, i, *c)
			}
			if err := checkEmbedding(e.Embedding); err != nil {
				return fmt.Errorf("event %d embedding: %w", i, err)
			}
		}
	}
	return nil
}

// NormalizeEmbeddings scales each event embedding of a step to unit
// length, in place. The graph keeps an embedding's direction only; a
// consumer that owns the decoded message (the daemon's decoders, which
// run in parallel ahead of the serial commit) normalises there, and
// applying then stores each vector without a copy. A vector that cannot
// be scaled (all zeros) is left for Validate and Apply to refuse.
func (m *Message) NormalizeEmbeddings() {
	if m.Step != nil {
		m.Step.normalizeEmbeddings()
	}
	for i := range m.Steps {
		m.Steps[i].normalizeEmbeddings()
	}
}

func (s *Step) normalizeEmbeddings() {
	if s.Annotations == nil {
		return
	}
	for i := range s.Annotations.Events {
		wave.Normalize(s.Annotations.Events[i].Embedding)
	}
}

// checkEmbedding rejects a vector with a NaN or infinite element, or
// one that is all zeros (it has no direction). Empty is fine: no vector.
func checkEmbedding(v []float32) error {
	zero := true
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: element %d is %v", ErrNonFinite, i, x)
		}
		if x != 0 {
			zero = false
		}
	}
	if len(v) > 0 && zero {
		return fmt.Errorf("%w: all %d elements are zero", ErrInvalid, len(v))
	}
	return nil
}

// KnownEdgeType reports whether t is one of the data model's edge types.
func KnownEdgeType(t string) bool {
	switch t {
	case "causal", "temporal", "membership", "policy", "tool_use", "assertion":
		return true
	}
	return false
}

// DecodeMessage parses and validates one wire message, JSON or msgpack
// (IsMsgpack, wire_msgpack.go). Unknown fields are errors so that a
// sender's typo does not pass silently. The plain JSON form senders
// write is read by the fast decoder (decode_fast.go); any other JSON by
// encoding/json, which also words the errors.
func DecodeMessage(b []byte) (*Message, error) {
	var m *Message
	var err error
	switch {
	case IsMsgpack(b):
		m, err = decodeMsgpack(b)
	default:
		var ok bool
		if m, ok = decodeFast(b); !ok {
			m, err = decodeJSON(b)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeJSON parses a wire message with encoding/json, without
// validating it.
func decodeJSON(b []byte) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Message
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the message", ErrMalformed)
	}
	return &m, nil
}

// MsgID is the JetStream Nats-Msg-Id of a message, and the id the
// daemon records it as applied under: episode/start, episode/<step
// index>, episode/<first index>-<last index> for a steps message,
// episode/end. Publishing the same id twice inside the dedupe
// window stores it once, and a message whose id is applied changes
// nothing. Outside the default namespace the id starts with the
// namespace and a dot ("tenant/project.episode/start"): an episode ID
// holds no dot, so two namespaces' episodes of one ID are different
// messages, and the default namespace's ids are what they always were.
func (m *Message) MsgID() string {
	var id string
	switch m.Kind {
	case KindEpisodeStart:
		id = m.EpisodeID + "/start"
	case KindEpisodeEnd:
		id = m.EpisodeID + "/end"
	case KindSteps:
		if len(m.Steps) == 0 {
			id = m.EpisodeID + "/steps"
		} else {
			id = m.EpisodeID + "/" + strconv.Itoa(m.Steps[0].Index) + "-" + strconv.Itoa(m.Steps[len(m.Steps)-1].Index)
		}
	default:
		if m.Step == nil {
			id = m.EpisodeID + "/step"
		} else {
			id = m.EpisodeID + "/" + strconv.Itoa(m.Step.Index)
		}
	}
	if m.Tenant == "" && m.Project == "" {
		return id
	}
	if ns := particle.Namespace(m.Tenant, m.Project); ns != particle.DefaultNamespace {
		return ns + "." + id
	}
	return id
}

// Subject is the NATS subject for m under prefix (default "ctxgraph").
func (m *Message) Subject(prefix string) string {
	return prefix + ".rlds." + m.Agent + "." + m.EpisodeID
}
