package arrowexport

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/ctxgraph/ctxgraph/particle"
)

// Table names what an export holds.
type Table string

// The four tables.
const (
	TableSteps    Table = "steps"
	TableEpisodes Table = "episodes"
	TableNodes    Table = "nodes"
	TableEdges    Table = "edges"
)

// Tables lists every table.
var Tables = []Table{TableSteps, TableEpisodes, TableNodes, TableEdges}

// Format names how an export is written.
type Format string

// The formats.
const (
	// FormatArrow is the Arrow IPC file format (.arrow, "Feather v2").
	FormatArrow Format = "arrow"
	// FormatArrowStream is the Arrow IPC stream format (.arrows).
	FormatArrowStream Format = "arrow-stream"
	// FormatParquet is Parquet, zstd-compressed, with the Arrow schema
	// stored so that Arrow readers get the exact types back.
	FormatParquet Format = "parquet"
	// FormatLeRobot is a directory in the LeRobot v2.1 dataset layout
	// (steps only).
	FormatLeRobot Format = "lerobot"
)

// Formats lists every format.
var Formats = []Format{FormatArrow, FormatArrowStream, FormatParquet, FormatLeRobot}

// Ext is the file extension of a single-file format.
func (f Format) Ext() string {
	switch f {
	case FormatArrowStream:
		return ".arrows"
	case FormatParquet:
		return ".parquet"
	case FormatLeRobot:
		return ""
	}
	return ".arrow"
}

// ContentType is the media type of a single-file format.
func (f Format) ContentType() string {
	switch f {
	case FormatArrowStream:
		return "application/vnd.apache.arrow.stream"
	case FormatParquet:
		return "application/vnd.apache.parquet"
	}
	return "application/vnd.apache.arrow.file"
}

// Filter selects what an export holds. The zero Filter selects every
// record of the default namespace that a principal with no roles may see.
//
// How each filter applies to each table:
//
//	           steps                 episodes            edges                          nodes
//	Agent      episode run by Agent  run by Agent        a provenance record of Agent   seen in an episode of Agent
//	Episodes   episode in the list   in the list         a provenance record in it      seen in an episode in it
//	Since/     step timestamp in     [start, end]        scope time range overlaps      updated at or after Since,
//	Until      [Since, Until]        overlaps window     the window                     created at or before Until
//	MinSalience context edges below   edges below it      decayed salience at least it   (nodes carry no salience)
//	           it are left out       left out of edges
//	Principal  context edges and     edges and nodes     Guard.VisibleEdge              Guard.VisibleNode
//	           nodes it may not see  lists filtered
//	           are left out
type Filter struct {
	// Namespace is the tenant/project; empty means the default.
	Namespace string
	Agent     string
	Episodes  []string
	// Since and Until bound time; a zero bound is open.
	Since, Until time.Time
	// MinSalience applies to salience decayed to the export time.
	MinSalience float64
	// Principal is who exports: a record the principal may not see is
	// never exported, nor referenced by a record that is.
	Principal particle.Principal
}

// Options configures an export.
type Options struct {
	Table  Table
	Filter Filter
	// BatchRows is the most rows of one record batch. Default 4096.
	BatchRows int
	// BatchBytes ends a batch early once its rows hold about this many
	// bytes (images make steps large). Default 64 MiB. Memory is bounded
	// by a few batches whatever the store's size.
	BatchBytes int
	// Now is the export time, at which salience is decayed. Default:
	// the time the export starts.
	Now time.Time
	// Alloc allocates the batches' buffers. Default memory.DefaultAllocator.
	Alloc memory.Allocator
	// OnSchema, if set, is called once before the first batch with the
	// schema and an upper bound of the rows to come (-1 if unknown).
	OnSchema func(schema *arrow.Schema, estimatedRows int64) error
}

// defaults fills unset options.
func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = 4096
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 64 << 20
	}
	if o.Now.IsZero() {
		o.Now = time.Now().UTC()
	}
	if o.Alloc == nil {
		o.Alloc = memory.DefaultAllocator
	}
	if o.Filter.Namespace == "" {
		o.Filter.Namespace = particle.DefaultNamespace
	}
}

// validate reports every problem with o.
func (o *Options) validate() error {
	var errs []error
	if !slices.Contains(Tables, o.Table) {
		errs = append(errs, fmt.Errorf("unknown table %q (want steps, episodes, nodes or edges)", o.Table))
	}
	f := o.Filter
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		errs = append(errs, fmt.Errorf("until %s is before since %s", f.Until.Format(time.RFC3339), f.Since.Format(time.RFC3339)))
	}
	if f.MinSalience < 0 || f.MinSalience > 1 || f.MinSalience != f.MinSalience {
		errs = append(errs, fmt.Errorf("min salience %v is outside [0,1]", f.MinSalience))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Query encodes o's table and filter as the query of GET /v1/export
// (without the principal's roles, which the caller adds as "role").
func (o Options) Query() url.Values {
	q := url.Values{}
	q.Set("table", string(o.Table))
	f := o.Filter
	if f.Agent != "" {
		q.Set("agent", f.Agent)
	}
	for _, e := range f.Episodes {
		q.Add("episode", e)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.Format(time.RFC3339Nano))
	}
	if f.MinSalience != 0 {
		q.Set("min_salience", strconv.FormatFloat(f.MinSalience, 'g', -1, 64))
	}
	for _, r := range f.Principal.Roles {
		q.Add("role", r)
	}
	if o.BatchRows != 0 {
		q.Set("batch_rows", strconv.Itoa(o.BatchRows))
	}
	return q
}

// ParseQuery is the inverse of [Options.Query]: the table and filter of
// a GET /v1/export query. It does not read tenant, project or the
// principal: the caller sets Namespace and Principal from who asks.
func ParseQuery(q url.Values) (Options, error) {
	var o Options
	var errs []error
	o.Table = Table(q.Get("table"))
	if o.Table == "" {
		o.Table = TableSteps
	}
	o.Filter.Agent = q.Get("agent")
	o.Filter.Episodes = q["episode"]
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &o.Filter.Since}, {"until", &o.Filter.Until}} {
		if s := q.Get(t.name); s != "" {
			v, err := ParseTime(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
			}
			*t.dst = v
		}
	}
	if s := q.Get("min_salience"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("min_salience %q is not a number", s))
		}
		o.Filter.MinSalience = v
	}
	if s := q.Get("batch_rows"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 1<<20 {
			errs = append(errs, fmt.Errorf("batch_rows %q is not in [1, 1048576]", s))
		}
		o.BatchRows = v
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return o, o.validate()
}

// ParseTime reads an RFC 3339 time, a date (2006-01-02, UTC) or a
// duration before now ("24h" is a day ago).
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date or a duration before now", s)
}
