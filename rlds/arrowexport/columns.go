package arrowexport

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// A column is one field of a record table and the two directions
// between a Go value and its Arrow array: put appends v's value to the
// column's builder, get reads row i of the column back into v. Writing
// a table and reading it back share one definition, so they cannot
// drift apart.
type column[T any] struct {
	field arrow.Field
	put   func(b array.Builder, v *T)
	get   func(a arrow.Array, i int, v *T) error
}

// timestampType is every time column's type: nanoseconds since the Unix
// epoch, UTC. The zero time is written as null.
var timestampType = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}

var stringList = arrow.ListOf(arrow.BinaryTypes.String)

func strCol[T any](name string, f func(*T) *string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String},
		put:   func(b array.Builder, v *T) { b.(*array.StringBuilder).Append(*f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = a.(*array.String).Value(i)
			return nil
		},
	}
}

// optStrCol writes "" as null.
func optStrCol[T any](name string, f func(*T) *string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true},
		put: func(b array.Builder, v *T) {
			if s := *f(v); s != "" {
				b.(*array.StringBuilder).Append(s)
			} else {
				b.AppendNull()
			}
		},
		get: func(a arrow.Array, i int, v *T) error {
			if a.IsValid(i) {
				*f(v) = a.(*array.String).Value(i)
			}
			return nil
		},
	}
}

// strListCol writes nil as an empty list and reads an empty list as nil.
func strListCol[T any](name string, f func(*T) *[]string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: stringList},
		put:   func(b array.Builder, v *T) { appendStrings(b.(*array.ListBuilder), *f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = listStrings(a.(*array.List), i)
			return nil
		},
	}
}

func appendStrings(lb *array.ListBuilder, ss []string) {
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StringBuilder)
	for _, s := range ss {
		sb.Append(s)
	}
}

func listStrings(l *array.List, i int) []string {
	if l.IsNull(i) {
		return nil
	}
	lo, hi := l.ValueOffsets(i)
	if lo == hi {
		return nil
	}
	vals := l.ListValues().(*array.String)
	out := make([]string, 0, hi-lo)
	for j := lo; j < hi; j++ {
		out = append(out, vals.Value(int(j)))
	}
	return out
}

func f64Col[T any](name string, f func(*T) *float64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64},
		put:   func(b array.Builder, v *T) { b.(*array.Float64Builder).Append(*f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = a.(*array.Float64).Value(i)
			return nil
		},
	}
}

// optF64Col writes a nil pointer as null.
func optF64Col[T any](name string, f func(*T) **float64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		put: func(b array.Builder, v *T) {
			if p := *f(v); p != nil {
				b.(*array.Float64Builder).Append(*p)
			} else {
				b.AppendNull()
			}
		},
		get: func(a arrow.Array, i int, v *T) error {
			if a.IsValid(i) {
				x := a.(*array.Float64).Value(i)
				*f(v) = &x
			}
			return nil
		},
	}
}

// optBoolCol writes a nil pointer as null.
func optBoolCol[T any](name string, f func(*T) **bool) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		put: func(b array.Builder, v *T) {
			if p := *f(v); p != nil {
				b.(*array.BooleanBuilder).Append(*p)
			} else {
				b.AppendNull()
			}
		},
		get: func(a arrow.Array, i int, v *T) error {
			if a.IsValid(i) {
				x := a.(*array.Boolean).Value(i)
				*f(v) = &x
			}
			return nil
		},
	}
}

func boolCol[T any](name string, f func(*T) *bool) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.FixedWidthTypes.Boolean},
		put:   func(b array.Builder, v *T) { b.(*array.BooleanBuilder).Append(*f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = a.(*array.Boolean).Value(i)
			return nil
		},
	}
}

func intCol[T any](name string, f func(*T) *int) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64},
		put:   func(b array.Builder, v *T) { b.(*array.Int64Builder).Append(int64(*f(v))) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = int(a.(*array.Int64).Value(i))
			return nil
		},
	}
}

func u64Col[T any](name string, f func(*T) *uint64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64},
		put:   func(b array.Builder, v *T) { b.(*array.Uint64Builder).Append(*f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = a.(*array.Uint64).Value(i)
			return nil
		},
	}
}

func timeCol[T any](name string, f func(*T) *time.Time) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: timestampType, Nullable: true},
		put:   func(b array.Builder, v *T) { appendTime(b.(*array.TimestampBuilder), *f(v)) },
		get: func(a arrow.Array, i int, v *T) error {
			*f(v) = timeAt(a.(*array.Timestamp), i)
			return nil
		},
	}
}

func appendTime(b *array.TimestampBuilder, t time.Time) {
	if t.IsZero() {
		b.AppendNull()
		return
	}
	b.Append(arrow.Timestamp(t.UnixNano()))
}

func timeAt(a *array.Timestamp, i int) time.Time {
	if a.IsNull(i) {
		return time.Time{}
	}
	return time.Unix(0, int64(a.Value(i))).UTC()
}

// embeddingType is fixed_size_list<float32>[dim] when every embedding of
// the export has dim elements, list<float32> otherwise (dim 0).
func embeddingType(dim int) arrow.DataType {
	if dim > 0 {
		return arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32)
	}
	return arrow.ListOf(arrow.PrimitiveTypes.Float32)
}

// embCol writes an empty embedding as null.
func embCol[T any](name string, dim int, f func(*T) *[]float32) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: embeddingType(dim), Nullable: true},
		put: func(b array.Builder, v *T) {
			e := *f(v)
			switch lb := b.(type) {
			case *array.FixedSizeListBuilder:
				if len(e) != dim {
					lb.AppendNull()
					return
				}
				lb.Append(true)
				lb.ValueBuilder().(*array.Float32Builder).AppendValues(e, nil)
			case *array.ListBuilder:
				if len(e) == 0 {
					lb.AppendNull()
					return
				}
				lb.Append(true)
				lb.ValueBuilder().(*array.Float32Builder).AppendValues(e, nil)
			}
		},
		get: func(a arrow.Array, i int, v *T) error {
			if a.IsNull(i) {
				return nil
			}
			var vals []float32
			switch l := a.(type) {
			case *array.FixedSizeList:
				lo, hi := l.ValueOffsets(i)
				vals = l.ListValues().(*array.Float32).Float32Values()[lo:hi]
			case *array.List:
				lo, hi := l.ValueOffsets(i)
				vals = l.ListValues().(*array.Float32).Float32Values()[lo:hi]
			default:
				return fmt.Errorf("%w: embedding column %s is %s", ErrSchema, name, a.DataType())
			}
			*f(v) = append([]float32(nil), vals...)
			return nil
		},
	}
}

var stringMap = arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)

// mapCol writes a string map, keys sorted, an empty map as null.
func mapCol[T any](name string, f func(*T) *map[string]string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: stringMap, Nullable: true},
		put: func(b array.Builder, v *T) {
			m := *f(v)
			mb := b.(*array.MapBuilder)
			if len(m) == 0 {
				mb.AppendNull()
				return
			}
			mb.Append(true)
			kb, ib := mb.KeyBuilder().(*array.StringBuilder), mb.ItemBuilder().(*array.StringBuilder)
			for _, k := range sortedKeys(m) {
				kb.Append(k)
				ib.Append(m[k])
			}
		},
		get: func(a arrow.Array, i int, v *T) error {
			m := a.(*array.Map)
			if m.IsNull(i) {
				return nil
			}
			lo, hi := m.ValueOffsets(i)
			keys, items := m.Keys().(*array.String), m.Items().(*array.String)
			out := make(map[string]string, hi-lo)
			for j := lo; j < hi; j++ {
				out[keys.Value(int(j))] = items.Value(int(j))
			}
			*f(v) = out
			return nil
		},
	}
}

// jsonCol writes a map as its JSON text, nil as null.
func jsonCol[T any](name string, f func(*T) *map[string]any) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{"ctxgraph.encoding"}, []string{"json"})},
		put: func(b array.Builder, v *T) {
			m := *f(v)
			if m == nil {
				b.AppendNull()
				return
			}
			js, err := json.Marshal(m)
			if err != nil {
				js = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
			}
			b.(*array.StringBuilder).BinaryBuilder.Append(js)
		},
		get: func(a arrow.Array, i int, v *T) error {
			if a.IsNull(i) {
				return nil
			}
			return json.Unmarshal([]byte(a.(*array.String).Value(i)), f(v))
		},
	}
}

// rows builds record batches of T, one column per field.
type rows[T any] struct {
	cols   []column[T]
	schema *arrow.Schema
	rb     *array.RecordBuilder
}

func newRows[T any](mem memory.Allocator, cols []column[T], meta arrow.Metadata) *rows[T] {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	s := arrow.NewSchema(fields, &meta)
	return &rows[T]{cols: cols, schema: s, rb: array.NewRecordBuilder(mem, s)}
}

func (r *rows[T]) add(v *T) {
	for i, c := range r.cols {
		c.put(r.rb.Field(i), v)
	}
}

func (r *rows[T]) len() int { return r.rb.Field(0).Len() }

func (r *rows[T]) release() { r.rb.Release() }

// decodeRows reads every row of rec back with cols, checking that rec
// has the columns cols describe.
func decodeRows[T any](cols []column[T], rec arrow.Record) ([]T, error) {
	if int(rec.NumCols()) != len(cols) {
		return nil, fmt.Errorf("%w: %d columns, want %d", ErrSchema, rec.NumCols(), len(cols))
	}
	for i, c := range cols {
		f := rec.Schema().Field(i)
		if f.Name != c.field.Name || !arrow.TypeEqual(f.Type, c.field.Type) {
			return nil, fmt.Errorf("%w: column %d is %s %s, want %s %s", ErrSchema, i, f.Name, f.Type, c.field.Name, c.field.Type)
		}
	}
	out := make([]T, rec.NumRows())
	for i, c := range cols {
		a := rec.Column(i)
		for j := range out {
			if err := c.get(a, j, &out[j]); err != nil {
				return nil, fmt.Errorf("column %s row %d: %w", c.field.Name, j, err)
			}
		}
	}
	return out, nil
}
