package arrowexport

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// Field metadata keys of the steps table's feature columns.
const (
	// MetaFeature is the feature's RLDS name: "observation/state",
	// "action" (a flat action), "action/world_vector".
	MetaFeature = "ctxgraph.feature"
	// MetaDType is the feature's dtype (float32, int64, image, ...).
	MetaDType = "ctxgraph.dtype"
	// MetaShape is the feature's shape as JSON ([7], [3,3], [] for a
	// scalar), when it is the same for the whole export.
	MetaShape = "ctxgraph.shape"
)

// The steps table's fixed columns, in order; feature columns go between
// timestamp and reward.
var (
	stepHead = []string{"episode_id", "agent", "step_index", "timestamp"}
	stepTail = []string{"reward", "discount", "is_first", "is_last", "is_terminal", "language_instruction",
		"context_node_ids", "context_node_confidence", "context_node_salience",
		"context_edge_ids", "context_edge_confidence", "context_edge_salience"}
)

// featureSpec is one observation or action feature as the whole export
// sees it.
type featureSpec struct {
	group string // "observation" or "action"
	key   string // below the group; "" for a flat tensor
	dtype rlds.DType
	shape []int // nil unless every episode agrees
	fixed bool  // shape agreed: a fixed_size_list of size elements
	size  int
}

// ColumnName is the column of a feature: group, then the key with "/"
// as ".": observation.state, action, action.world_vector.
func ColumnName(group, key string) string {
	if key == "" {
		return group
	}
	return group + "." + strings.ReplaceAll(key, "/", ".")
}

func (f *featureSpec) numeric() bool {
	switch f.dtype {
	case rlds.Image, rlds.Bytes, rlds.String:
		return false
	}
	return true
}

// elemType is the Arrow type of one element of f.
func (f *featureSpec) elemType() arrow.DataType {
	switch f.dtype {
	case rlds.Float32:
		return arrow.PrimitiveTypes.Float32
	case rlds.Int64:
		return arrow.PrimitiveTypes.Int64
	case rlds.Int32:
		return arrow.PrimitiveTypes.Int32
	case rlds.Uint8:
		return arrow.PrimitiveTypes.Uint8
	case rlds.Bool:
		return arrow.FixedWidthTypes.Boolean
	case rlds.String:
		return arrow.BinaryTypes.String
	}
	return arrow.PrimitiveTypes.Float64
}

func (f *featureSpec) field() arrow.Field {
	var t arrow.DataType
	switch {
	case f.dtype == rlds.Image || f.dtype == rlds.Bytes:
		t = arrow.BinaryTypes.Binary
	case f.fixed && f.numeric():
		t = arrow.FixedSizeListOf(int32(f.size), f.elemType())
	default:
		t = arrow.ListOf(f.elemType())
	}
	keys := []string{MetaFeature, MetaDType}
	vals := []string{rlds.FeatureName(f.group, f.key), string(f.dtype)}
	if f.fixed {
		js, _ := json.Marshal(f.shape)
		if f.shape == nil {
			js = []byte("[]")
		}
		keys, vals = append(keys, MetaShape), append(vals, string(js))
	}
	return arrow.Field{Name: ColumnName(f.group, f.key), Type: t, Nullable: true, Metadata: arrow.NewMetadata(keys, vals)}
}

// parseSignature splits an episode's feature signature (rlds: dtype then
// the shape as JSON, "float32[7]", "image null") into its parts.
func parseSignature(sig string) (rlds.DType, []int, error) {
	if dt, ok := strings.CutSuffix(sig, "null"); ok {
		return rlds.DType(dt), nil, nil
	}
	i := strings.IndexByte(sig, '[')
	if i < 0 {
		return "", nil, fmt.Errorf("feature signature %q", sig)
	}
	var shape []int
	if err := json.Unmarshal([]byte(sig[i:]), &shape); err != nil {
		return "", nil, fmt.Errorf("feature signature %q: %w", sig, err)
	}
	return rlds.DType(sig[:i]), shape, nil
}

// featureSet merges the feature signatures of the exported episodes.
type featureSet struct {
	specs map[string]*featureSpec // by RLDS name
}

func (fs *featureSet) add(ep *particle.Episode) error {
	if fs.specs == nil {
		fs.specs = map[string]*featureSpec{}
	}
	for name, sig := range ep.Features {
		dt, shape, err := parseSignature(sig)
		if err != nil {
			return fmt.Errorf("episode %s: %w", ep.ID, err)
		}
		group, key, _ := strings.Cut(name, "/")
		size := 1
		for _, d := range shape {
			size *= d
		}
		s, ok := fs.specs[name]
		if !ok {
			fs.specs[name] = &featureSpec{group: group, key: key, dtype: dt, shape: shape, fixed: true, size: size}
			continue
		}
		if s.dtype != dt {
			switch {
			case s.numeric() && (&featureSpec{dtype: dt}).numeric():
				s.dtype = rlds.Float64 // numbers of two dtypes: the one that holds both
			case !s.numeric() && dt != rlds.String && s.dtype != rlds.String:
				s.dtype = rlds.Bytes // images and bytes: binary
			default:
				return fmt.Errorf("episode %s: feature %s is %s, but %s in another episode", ep.ID, name, dt, s.dtype)
			}
		}
		if !slices.Equal(s.shape, shape) {
			s.fixed, s.shape = false, nil
		}
	}
	return nil
}

// sorted lists the features: observation before action, then by name.
func (fs *featureSet) sorted() []*featureSpec {
	out := make([]*featureSpec, 0, len(fs.specs))
	for _, s := range fs.specs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *featureSpec) int {
		if a.group != b.group {
			if a.group == "observation" {
				return -1
			}
			if b.group == "observation" {
				return 1
			}
			return strings.Compare(a.group, b.group)
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// stepsSchema is the schema of a steps export with these features.
func stepsSchema(specs []*featureSpec, meta arrow.Metadata) *arrow.Schema {
	f64List := arrow.ListOf(arrow.PrimitiveTypes.Float64)
	fields := []arrow.Field{
		{Name: "episode_id", Type: arrow.BinaryTypes.String},
		{Name: "agent", Type: arrow.BinaryTypes.String},
		{Name: "step_index", Type: arrow.PrimitiveTypes.Int64},
		{Name: "timestamp", Type: timestampType, Nullable: true},
	}
	for _, s := range specs {
		fields = append(fields, s.field())
	}
	fields = append(fields,
		arrow.Field{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
		arrow.Field{Name: "discount", Type: arrow.PrimitiveTypes.Float64},
		arrow.Field{Name: "is_first", Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: "is_last", Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: "is_terminal", Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: "language_instruction", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "context_node_ids", Type: stringList},
		arrow.Field{Name: "context_node_confidence", Type: f64List},
		arrow.Field{Name: "context_node_salience", Type: f64List},
		arrow.Field{Name: "context_edge_ids", Type: stringList},
		arrow.Field{Name: "context_edge_confidence", Type: f64List},
		arrow.Field{Name: "context_edge_salience", Type: f64List},
	)
	return arrow.NewSchema(fields, &meta)
}

// ctxEdge is an edge observed at a step, as the step's context columns
// show it.
type ctxEdge struct {
	id, src, dst string
	conf, sal    float64
}

// ctxNode is a node of a step's context.
type ctxNode struct {
	id        string
	conf, sal float64
}

// stepContext is the graph context of one step.
type stepContext struct {
	edges []ctxEdge
	nodes []ctxNode
}

// featureCol is a feature column's builders.
type featureCol struct {
	spec *featureSpec
	lb   array.Builder // *FixedSizeListBuilder, *ListBuilder or *BinaryBuilder
	vb   array.Builder // the list's value builder
}

// stepBuilder builds record batches of the steps table.
type stepBuilder struct {
	schema *arrow.Schema
	rb     *array.RecordBuilder
	feats  []featureCol
	index  [2]map[string]int // by group (0 observation, 1 action), key -> feats index
	filled []bool

	epID, agent, instr *array.StringBuilder
	stepIdx            *array.Int64Builder
	ts                 *array.TimestampBuilder
	reward, discount   *array.Float64Builder
	first, last, term  *array.BooleanBuilder
	// The six context columns are two lists (nodes, edges) of three
	// parallel values each, built at flush from these: one offset per
	// step for each, instead of six list appends.
	nodes, edges ctxList
	mem          memory.Allocator

	bytes int // payload bytes in the current batch, roughly
	f32   []float32
	f64   []float64
	i64   []int64
	blob  []byte
}

// ctxList accumulates one batch of a list<utf8> column and two parallel
// list<float64> columns.
type ctxList struct {
	offsets []int32
	ids     *array.StringBuilder
	a, b    []float64
}

func (l *ctxList) reset(mem memory.Allocator) {
	l.offsets = append(make([]int32, 0, cap(l.offsets)), 0)
	l.ids = array.NewStringBuilder(mem)
	l.a, l.b = make([]float64, 0, cap(l.a)), make([]float64, 0, cap(l.b))
}

func (l *ctxList) add(id string, a, b float64) {
	l.ids.Append(id)
	l.a, l.b = append(l.a, a), append(l.b, b)
}

func (l *ctxList) endRow() { l.offsets = append(l.offsets, int32(len(l.a))) }

// arrays makes the three list arrays of the batch, sharing one offsets
// buffer, and starts the next batch.
func (l *ctxList) arrays(mem memory.Allocator) [3]arrow.Array {
	n := len(l.offsets) - 1
	offs := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(l.offsets))
	ids := l.ids.NewArray()
	defer ids.Release()
	floats := func(v []float64) arrow.Array {
		return array.NewFloat64Data(array.NewData(arrow.PrimitiveTypes.Float64, len(v),
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(v))}, nil, 0, 0))
	}
	a, b := floats(l.a), floats(l.b)
	defer a.Release()
	defer b.Release()
	var out [3]arrow.Array
	for i, child := range []arrow.Array{ids, a, b} {
		d := array.NewData(arrow.ListOf(child.DataType()), n, []*memory.Buffer{nil, offs}, []arrow.ArrayData{child.Data()}, 0, 0)
		out[i] = array.MakeFromData(d)
		d.Release()
	}
	l.ids.Release()
	l.reset(mem)
	return out
}

func newStepBuilder(mem memory.Allocator, specs []*featureSpec, meta arrow.Metadata) *stepBuilder {
	s := stepsSchema(specs, meta)
	// The record builder builds every column but the six context lists.
	head := arrow.NewSchema(s.Fields()[:len(s.Fields())-6], nil)
	rb := array.NewRecordBuilder(mem, head)
	b := &stepBuilder{schema: s, rb: rb, index: [2]map[string]int{{}, {}}, filled: make([]bool, len(specs)), mem: mem}
	b.nodes.reset(mem)
	b.edges.reset(mem)
	col := func(name string) array.Builder { return rb.Field(s.FieldIndices(name)[0]) }
	b.epID, b.agent = col("episode_id").(*array.StringBuilder), col("agent").(*array.StringBuilder)
	b.stepIdx, b.ts = col("step_index").(*array.Int64Builder), col("timestamp").(*array.TimestampBuilder)
	b.reward, b.discount = col("reward").(*array.Float64Builder), col("discount").(*array.Float64Builder)
	b.first, b.last, b.term = col("is_first").(*array.BooleanBuilder), col("is_last").(*array.BooleanBuilder), col("is_terminal").(*array.BooleanBuilder)
	b.instr = col("language_instruction").(*array.StringBuilder)
	for i, sp := range specs {
		lb := rb.Field(len(stepHead) + i)
		fc := featureCol{spec: sp, lb: lb}
		switch l := lb.(type) {
		case *array.FixedSizeListBuilder:
			fc.vb = l.ValueBuilder()
		case *array.ListBuilder:
			fc.vb = l.ValueBuilder()
		}
		b.feats = append(b.feats, fc)
		g := 0
		if sp.group == "action" {
			g = 1
		}
		b.index[g][sp.key] = i
	}
	return b
}

func (b *stepBuilder) len() int { return b.epID.Len() }

// reserve makes room for rows more rows, so that a batch does not grow
// its buffers step by step.
func (b *stepBuilder) reserve(rows int) {
	b.rb.Reserve(rows)
	b.epID.ReserveData(rows * 16)
	b.agent.ReserveData(rows * 8)
	for _, fc := range b.feats {
		if fc.vb != nil && fc.spec.fixed {
			fc.vb.Reserve(rows * fc.spec.size)
		}
	}
}

func (b *stepBuilder) release() {
	b.rb.Release()
	b.nodes.ids.Release()
	b.edges.ids.Release()
}

// newRecord ends the batch: the record builder's columns and the six
// context lists.
func (b *stepBuilder) newRecord() arrow.Record {
	base := b.rb.NewRecord()
	defer base.Release()
	nodes, edges := b.nodes.arrays(b.mem), b.edges.arrays(b.mem)
	cols := append(slices.Clone(base.Columns()), nodes[0], nodes[1], nodes[2], edges[0], edges[1], edges[2])
	rec := array.NewRecord(b.schema, cols, base.NumRows())
	for _, a := range append(nodes[:], edges[:]...) {
		a.Release()
	}
	return rec
}

// add appends one step. blobs resolves image references.
func (b *stepBuilder) add(ep *particle.Episode, v *rlds.StepView, sc *stepContext, blobs func(dst []byte, ref string) ([]byte, error)) error {
	b.epID.Append(ep.ID)
	b.agent.Append(ep.Agent)
	b.stepIdx.Append(int64(v.Index))
	appendTime(b.ts, v.Timestamp)
	clear(b.filled)
	for g, fs := range [2][]rlds.FeatureView{v.Observation, v.Action} {
		for i := range fs {
			j, ok := b.index[g][string(fs[i].Name)]
			if !ok {
				continue // not in the episode's signature: cannot happen for stored steps
			}
			if err := b.addFeature(&b.feats[j], &fs[i], blobs); err != nil {
				return fmt.Errorf("step %d %s: %w", v.Index, b.feats[j].spec.key, err)
			}
			b.filled[j] = true
		}
	}
	for j, ok := range b.filled {
		if !ok {
			b.feats[j].lb.AppendNull()
		}
	}
	b.reward.Append(v.Reward)
	b.discount.Append(v.Discount)
	b.first.Append(v.IsFirst)
	b.last.Append(v.IsLast)
	b.term.Append(v.IsTerminal)
	if len(v.Instruction) > 0 {
		b.instr.BinaryBuilder.Append(v.Instruction)
	} else {
		b.instr.AppendNull()
	}
	b.addContext(sc)
	b.bytes += 64 + len(v.Instruction)
	return nil
}

func (b *stepBuilder) addContext(sc *stepContext) {
	if sc != nil {
		for _, n := range sc.nodes {
			b.nodes.add(n.id, n.conf, n.sal)
		}
		for _, e := range sc.edges {
			b.edges.add(e.id, e.conf, e.sal)
		}
		b.bytes += 48 * (len(sc.nodes) + len(sc.edges))
	}
	b.nodes.endRow()
	b.edges.endRow()
}

func (b *stepBuilder) addFeature(fc *featureCol, f *rlds.FeatureView, blobs func([]byte, string) ([]byte, error)) error {
	sp := fc.spec
	switch lb := fc.lb.(type) {
	case *array.BinaryBuilder:
		data := f.Bytes
		if len(data) == 0 && len(f.Ref) > 0 {
			var err error
			b.blob, err = blobs(b.blob[:0], string(f.Ref))
			if err != nil {
				return err
			}
			data = b.blob
		}
		lb.Append(data)
		b.bytes += len(data)
		return nil
	case *array.FixedSizeListBuilder:
		if f.Len() != sp.size {
			lb.AppendNull()
			return nil
		}
		lb.Append(true)
	case *array.ListBuilder:
		lb.Append(true)
		if sp.dtype == rlds.String {
			sb := fc.vb.(*array.StringBuilder)
			f.Texts(func(s []byte) { sb.BinaryBuilder.Append(s); b.bytes += len(s) })
			return nil
		}
	}
	switch vb := fc.vb.(type) {
	case *array.Float32Builder:
		b.f32 = f.AppendFloat32(b.f32[:0])
		vb.AppendValues(b.f32, nil)
	case *array.Float64Builder:
		b.f64 = f.AppendFloat64(b.f64[:0])
		vb.AppendValues(b.f64, nil)
	case *array.Int64Builder:
		b.i64 = f.AppendInt64(b.i64[:0])
		vb.AppendValues(b.i64, nil)
	case *array.Int32Builder:
		for i := 0; i < f.Len(); i++ {
			vb.Append(int32(f.Float64(i)))
		}
	case *array.Uint8Builder:
		for i := 0; i < f.Len(); i++ {
			vb.Append(uint8(f.Float64(i)))
		}
	case *array.BooleanBuilder:
		for i := 0; i < f.Len(); i++ {
			vb.Append(f.Float64(i) != 0)
		}
	}
	b.bytes += 8 * f.Len()
	return nil
}

// StepRow is one row of the steps table read back.
type StepRow struct {
	EpisodeID string
	Agent     string
	// Step holds the step's index, timestamp, features (images as their
	// encoded bytes, numbers widened to float64), reward, discount,
	// flags and language instruction.
	Step rlds.Step
	// Context is the graph context columns.
	NodeIDs        []string
	NodeConfidence []float64
	NodeSalience   []float64
	EdgeIDs        []string
	EdgeConfidence []float64
	EdgeSalience   []float64
}

// DecodeSteps reads a record batch of the steps table back into rows.
func DecodeSteps(rec arrow.Record) ([]StepRow, error) {
	s := rec.Schema()
	col := func(name string) (arrow.Array, error) {
		idx := s.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: no column %s", ErrSchema, name)
		}
		return rec.Column(idx[0]), nil
	}
	var errs []string
	cols := map[string]arrow.Array{}
	for _, name := range append(slices.Clone(stepHead), stepTail...) {
		a, err := col(name)
		if err != nil {
			errs = append(errs, name)
			continue
		}
		cols[name] = a
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: missing columns %v", ErrSchema, errs)
	}
	out := make([]StepRow, rec.NumRows())
	ep, agent := cols["episode_id"].(*array.String), cols["agent"].(*array.String)
	idx, ts := cols["step_index"].(*array.Int64), cols["timestamp"].(*array.Timestamp)
	reward, discount := cols["reward"].(*array.Float64), cols["discount"].(*array.Float64)
	first, last, term := cols["is_first"].(*array.Boolean), cols["is_last"].(*array.Boolean), cols["is_terminal"].(*array.Boolean)
	instr := cols["language_instruction"].(*array.String)
	for i := range out {
		r := &out[i]
		r.EpisodeID, r.Agent = ep.Value(i), agent.Value(i)
		r.Step = rlds.Step{Index: int(idx.Value(i)), Timestamp: timeAt(ts, i), Reward: reward.Value(i), Discount: discount.Value(i),
			IsFirst: first.Value(i), IsLast: last.Value(i), IsTerminal: term.Value(i), LanguageInstruction: optString(instr, i)}
		r.NodeIDs = listStrings(cols["context_node_ids"].(*array.List), i)
		r.NodeConfidence = listFloats(cols["context_node_confidence"].(*array.List), i)
		r.NodeSalience = listFloats(cols["context_node_salience"].(*array.List), i)
		r.EdgeIDs = listStrings(cols["context_edge_ids"].(*array.List), i)
		r.EdgeConfidence = listFloats(cols["context_edge_confidence"].(*array.List), i)
		r.EdgeSalience = listFloats(cols["context_edge_salience"].(*array.List), i)
	}
	for j, f := range s.Fields() {
		name, ok := f.Metadata.GetValue(MetaFeature)
		if !ok {
			continue
		}
		dtype, _ := f.Metadata.GetValue(MetaDType)
		var shape []int
		if js, ok := f.Metadata.GetValue(MetaShape); ok {
			if err := json.Unmarshal([]byte(js), &shape); err != nil {
				return nil, fmt.Errorf("%w: column %s shape %q", ErrSchema, f.Name, js)
			}
			if len(shape) == 0 {
				shape = nil
			}
		}
		group, key, _ := strings.Cut(name, "/")
		a := rec.Column(j)
		for i := range out {
			t, ok, err := tensorAt(a, i, rlds.DType(dtype), shape)
			if err != nil {
				return nil, fmt.Errorf("column %s row %d: %w", f.Name, i, err)
			}
			if !ok {
				continue
			}
			st := &out[i].Step
			fs := &st.Observation
			if group == "action" {
				fs = &st.Action
			}
			if *fs == nil {
				*fs = rlds.Features{}
			}
			(*fs)[key] = t
		}
	}
	return out, nil
}

func listFloats(l *array.List, i int) []float64 {
	lo, hi := l.ValueOffsets(i)
	if lo == hi {
		return nil
	}
	return slices.Clone(l.ListValues().(*array.Float64).Float64Values()[lo:hi])
}

// tensorAt reads row i of a feature column as a tensor; ok is false for
// null.
func tensorAt(a arrow.Array, i int, dtype rlds.DType, shape []int) (rlds.Tensor, bool, error) {
	if a.IsNull(i) {
		return rlds.Tensor{}, false, nil
	}
	t := rlds.Tensor{DType: dtype, Shape: shape}
	var vals arrow.Array
	var lo, hi int64
	switch l := a.(type) {
	case *array.Binary:
		t.Bytes = slices.Clone(l.Value(i))
		t.Encoding = rlds.ImageEncoding(t.Bytes)
		return t, true, nil
	case *array.FixedSizeList:
		lo, hi = l.ValueOffsets(i)
		vals = l.ListValues()
	case *array.List:
		lo, hi = l.ValueOffsets(i)
		vals = l.ListValues()
	default:
		return t, false, fmt.Errorf("%w: feature column of type %s", ErrSchema, a.DataType())
	}
	for j := int(lo); j < int(hi); j++ {
		switch v := vals.(type) {
		case *array.Float32:
			t.Data = append(t.Data, float64(v.Value(j)))
		case *array.Float64:
			t.Data = append(t.Data, v.Value(j))
		case *array.Int64:
			t.Data = append(t.Data, float64(v.Value(j)))
		case *array.Int32:
			t.Data = append(t.Data, float64(v.Value(j)))
		case *array.Uint8:
			t.Data = append(t.Data, float64(v.Value(j)))
		case *array.Boolean:
			t.Data = append(t.Data, b2f(v.Value(j)))
		case *array.String:
			t.Text = append(t.Text, v.Value(j))
		default:
			return t, false, fmt.Errorf("%w: feature element of type %s", ErrSchema, vals.DataType())
		}
	}
	return t, true, nil
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// schemaMeta is the metadata every exported schema carries.
func schemaMeta(t Table, o *Options) arrow.Metadata {
	f := o.Filter
	keys := []string{"ctxgraph.table", "ctxgraph.schema_version", "ctxgraph.exported_at", "ctxgraph.namespace"}
	vals := []string{string(t), strconv.Itoa(SchemaVersion), o.Now.Format(time.RFC3339Nano), f.Namespace}
	if len(f.Principal.Roles) > 0 {
		keys, vals = append(keys, "ctxgraph.roles"), append(vals, strings.Join(f.Principal.Roles, ","))
	}
	return arrow.NewMetadata(keys, vals)
}

// SchemaVersion is the version of the table schemas this package
// writes; it changes whenever a column changes.
const SchemaVersion = 1
