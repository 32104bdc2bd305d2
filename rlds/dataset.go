package rlds

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// EpisodeNamespace is the UUID namespace of imported episode IDs:
// uuid.NewSHA1(uuid.NameSpaceURL, "https://github.com/ctxgraph/ctxgraph/rlds/episode").
// It is fixed forever; changing it changes every imported episode's ID.
var EpisodeNamespace = uuid.MustParse("4921690f-0527-5589-b7ec-35c9de37fcf0")

// EpisodeID is the stable ID of the episode stored as record (0-based)
// of shard in split of version of dataset: a name-based (SHA-1) UUID, so
// that re-importing the same record yields the same ID.
func EpisodeID(dataset, version, split, shard string, record int64) string {
	name := strings.Join([]string{dataset, version, split, shard, strconv.FormatInt(record, 10)}, "\x00")
	return uuid.NewSHA1(EpisodeNamespace, []byte(name)).String()
}

// DefaultMaxSteps is the most steps an episode may have unless
// DatasetOptions.MaxSteps says otherwise. Real RLDS episodes have at
// most a few thousand.
const DefaultMaxSteps = 1 << 17

// DatasetOptions configures OpenDatasetOptions. The zero value reads
// Dir with the defaults.
type DatasetOptions struct {
	// Dir is a TFDS dataset folder: the version folder holding
	// features.json, dataset_info.json and the *.tfrecord-* shards, or its
	// parent (the highest version inside is read).
	Dir string
	// Files lists shards to read instead of those found in Dir. Metadata
	// is looked for next to the first file unless Dir is set.
	Files []string
	// Name and Version override the dataset's identity, which otherwise
	// comes from the folder names (bridge_dataset/1.0.0), then
	// dataset_info.json, then the shard file names.
	Name, Version string
	// Splits restricts reading to these splits. Empty reads all.
	Splits []string
	// SkipBad makes Episodes report records that cannot be read or
	// decoded to OnError and carry on with the next record. Default false:
	// the first bad record ends Episodes with its error.
	SkipBad bool
	// OnError receives each record SkipBad steps over, as a
	// *RecordError. Nil logs them at Warn.
	OnError func(error)
	// MaxRecordSize bounds a TFRecord payload. Zero means
	// DefaultMaxRecordSize.
	MaxRecordSize int64
	// MaxSteps bounds the steps of one episode, so that a damaged record
	// cannot claim millions. Zero means DefaultMaxSteps.
	MaxSteps int
	// Logger receives warnings (an inferred schema, skipped records). Nil
	// means slog.Default(), so that a missing features.json is never
	// silent.
	Logger *slog.Logger
}

// Shard is one TFRecord file of a dataset.
type Shard struct {
	Path  string
	Split string
	// Index and Count come from the file name's NNNNN-of-NNNNN; -1 when
	// it has none.
	Index, Count int
}

// Dataset is an RLDS dataset in TFDS's TFRecord layout, read one episode
// (one tf.train.Example) at a time.
type Dataset struct {
	// Name and Version are the dataset's identity: what Episode.Source
	// and episode IDs use.
	Name, Version string
	// Dir is the folder metadata was read from.
	Dir string
	// Info is dataset_info.json, nil if there is none. Its Version may
	// differ from Version.
	Info *DatasetInfo
	// Schema is features.json flattened, or inferred from the first
	// record (Schema.Inferred) when there is none.
	Schema *Schema
	// Shards in reading order: by split, then shard index.
	Shards []Shard

	// SkipBad, OnError, MaxRecordSize and MaxSteps start as in
	// DatasetOptions and may be changed between calls to Episodes.
	SkipBad       bool
	OnError       func(error)
	MaxRecordSize int64
	MaxSteps      int

	log *slog.Logger
}

// OpenDataset opens the TFDS dataset in dir with default options.
func OpenDataset(dir string) (*Dataset, error) {
	return OpenDatasetOptions(DatasetOptions{Dir: dir})
}

// OpenFiles opens the given TFRecord shards as one dataset, with
// features.json and dataset_info.json from the first file's folder when
// they are there.
func OpenFiles(paths ...string) (*Dataset, error) {
	return OpenDatasetOptions(DatasetOptions{Files: paths})
}

var (
	versionDirRe = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	// <name>-<split>.tfrecord[-NNNNN-of-NNNNN]
	shardNameRe = regexp.MustCompile(`^(.+)-([^-]+)\.tfrecord(?:-(\d+)-of-(\d+))?$`)
)

// OpenDatasetOptions opens a dataset as o says. It reads the metadata
// and, when there is no features.json, the first record; episodes are
// read by Episodes.
func OpenDatasetOptions(o DatasetOptions) (*Dataset, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &Dataset{SkipBad: o.SkipBad, OnError: o.OnError, MaxRecordSize: o.MaxRecordSize, MaxSteps: o.MaxSteps, log: log}
	if o.Dir == "" && len(o.Files) == 0 {
		return nil, errors.New("rlds: open dataset: no folder or files given")
	}
	dir := o.Dir
	if dir != "" {
		var err error
		if dir, err = resolveVersionDir(dir); err != nil {
			return nil, fmt.Errorf("rlds: open dataset: %w", err)
		}
	} else {
		dir = filepath.Dir(o.Files[0])
	}
	d.Dir = dir

	if p := filepath.Join(dir, "dataset_info.json"); fileExists(p) {
		info, err := ReadDatasetInfo(p)
		if err != nil {
			return nil, fmt.Errorf("rlds: open dataset: %w", err)
		}
		d.Info = info
	}
	if p := filepath.Join(dir, "features.json"); fileExists(p) {
		s, err := ReadSchema(p)
		if err != nil {
			return nil, fmt.Errorf("rlds: open dataset: %w", err)
		}
		d.Schema = s
	}

	files := o.Files
	if len(files) == 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("rlds: open dataset: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() && shardNameRe.MatchString(e.Name()) {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	var prefix string
	for _, p := range files {
		sh := Shard{Path: p, Index: -1, Count: -1}
		if m := shardNameRe.FindStringSubmatch(filepath.Base(p)); m != nil {
			if prefix == "" {
				prefix = m[1]
			}
			sh.Split = m[2]
			if m[3] != "" {
				sh.Index, _ = strconv.Atoi(m[3])
				sh.Count, _ = strconv.Atoi(m[4])
			}
		}
		if len(o.Splits) > 0 && !contains(o.Splits, sh.Split) {
			continue
		}
		d.Shards = append(d.Shards, sh)
	}
	d.sortShards()

	d.Name, d.Version = o.Name, o.Version
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("rlds: open dataset: %w", err)
	}
	base := filepath.Base(abs)
	parent := filepath.Base(filepath.Dir(abs))
	isVersionDir := versionDirRe.MatchString(base)
	if d.Name == "" {
		switch {
		case isVersionDir && parent != string(filepath.Separator) && parent != ".":
			d.Name = parent
		case d.Info != nil && d.Info.Name != "":
			d.Name = d.Info.Name
		case prefix != "":
			d.Name = prefix
		default:
			d.Name = base
		}
	}
	if d.Version == "" {
		switch {
		case isVersionDir:
			d.Version = base
		case d.Info != nil:
			d.Version = d.Info.Version
		}
	}

	if len(d.Shards) == 0 {
		if d.Info != nil && d.Info.FileFormat != "" && d.Info.FileFormat != "tfrecord" {
			return nil, fmt.Errorf("rlds: open dataset %s: dataset_info.json says its shards are %s, and this reader reads only tfrecord", dir, d.Info.FileFormat)
		}
		if len(o.Splits) > 0 {
			return nil, fmt.Errorf("rlds: open dataset %s: no shards of split %s", dir, strings.Join(o.Splits, ", "))
		}
		return nil, fmt.Errorf("rlds: open dataset %s: no <name>-<split>.tfrecord-NNNNN-of-NNNNN shards found", dir)
	}
	if d.Schema == nil {
		if err := d.inferSchema(); err != nil {
			return nil, fmt.Errorf("rlds: open dataset %s: %w", dir, err)
		}
		d.log.Warn("rlds: no features.json; shapes and dtypes inferred from the first record",
			"dataset", d.Name, "dir", dir, "features", len(d.Schema.Leaves))
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// resolveVersionDir returns dir if it holds a dataset, else its highest
// version subfolder that does.
func resolveVersionDir(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var versions []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() && (name == "features.json" || name == "dataset_info.json" || shardNameRe.MatchString(name)) {
			return dir, nil
		}
		if e.IsDir() && versionDirRe.MatchString(name) {
			versions = append(versions, name)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("%s holds no dataset (no features.json, dataset_info.json, shards or version folders)", dir)
	}
	sort.Slice(versions, func(i, j int) bool { return versionLess(versions[i], versions[j]) })
	return filepath.Join(dir, versions[len(versions)-1]), nil
}

func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

func (d *Dataset) sortShards() {
	order := map[string]int{}
	if d.Info != nil {
		for i, s := range d.Info.Splits {
			order[s.Name] = i + 1
		}
	}
	rank := func(split string) int {
		if r, ok := order[split]; ok {
			return r
		}
		return len(order) + 1
	}
	sort.SliceStable(d.Shards, func(i, j int) bool {
		a, b := d.Shards[i], d.Shards[j]
		if ra, rb := rank(a.Split), rank(b.Split); ra != rb {
			return ra < rb
		}
		if a.Split != b.Split {
			return a.Split < b.Split
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Path < b.Path
	})
}

// Splits lists the splits of the dataset's shards, in reading order.
func (d *Dataset) Splits() []string {
	var out []string
	for _, s := range d.Shards {
		if len(out) == 0 || out[len(out)-1] != s.Split {
			out = append(out, s.Split)
		}
	}
	return out
}

// inferSchema builds a schema from the first record of the dataset.
func (d *Dataset) inferSchema() error {
	for _, sh := range d.Shards {
		err := d.inferSchemaFrom(sh)
		if err != io.EOF {
			return err
		}
	}
	return errors.New("no features.json, and no shard holds a record to infer one from")
}

// inferSchemaFrom infers the schema from the first record of sh, or
// returns io.EOF if it has none.
func (d *Dataset) inferSchemaFrom(sh Shard) error {
	f, err := os.Open(sh.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := NewTFRecordReader(f, sh.Path)
	r.MaxRecordSize = d.MaxRecordSize
	b, err := r.Next()
	if err != nil {
		return err
	}
	ex, err := ParseExample(b)
	if err != nil {
		return &RecordError{File: sh.Path, Offset: r.Offset(), Record: r.Record(), Err: err}
	}
	s, err := InferSchema(ex)
	if err != nil {
		return &RecordError{File: sh.Path, Offset: r.Offset(), Record: r.Record(), Err: err}
	}
	d.Schema = s
	return nil
}

// InferSchema guesses a schema from one episode's Example: the number of
// steps T is len(steps/is_first) (or of another per-step flag, the
// reward or discount, or an image or text feature), and every steps/
// feature holds T items of len/T values. Byte features whose values
// start with JPEG or PNG magic are images, other byte features text;
// floats are float32, int64s int64, the is_* flags bool. An item of one
// value is a scalar.
func InferSchema(ex Example) (*Schema, error) {
	t, err := stepCount(ex, nil)
	if err != nil {
		return nil, err
	}
	leaves := make([]Leaf, 0, len(ex))
	for _, key := range sortedKeys(ex) {
		l, err := inferLeaf(key, ex[key], t)
		if err != nil {
			return nil, err
		}
		leaves = append(leaves, l)
	}
	s := newSchema(leaves)
	s.Inferred = true
	return s, nil
}

func sortedKeys(ex Example) []string {
	keys := make([]string, 0, len(ex))
	for k := range ex {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isFlag(key string) bool {
	switch key {
	case "steps/is_first", "steps/is_last", "steps/is_terminal":
		return true
	}
	return false
}

func inferLeaf(key string, f Feature, t int) (Leaf, error) {
	l := Leaf{Path: key, PerStep: strings.HasPrefix(key, "steps/"), Kind: LeafTensor, Encoding: EncodingNone, Class: "inferred"}
	items := 1
	if l.PerStep {
		items = t
	}
	n := f.Len()
	per := n
	if items > 0 {
		if n%items != 0 {
			return l, fmt.Errorf("%w: feature %q holds %d values, not a multiple of %d steps", ErrShape, key, n, items)
		}
		per = n / items
	} else if n > 0 {
		return l, fmt.Errorf("%w: feature %q holds %d values in an episode of 0 steps", ErrShape, key, n)
	}
	if per != 1 {
		l.Shape = []int{per}
	}
	switch f.Kind {
	case FeatureBytes:
		if enc := bytesImageEncoding(f.Bytes); enc != "" {
			l.Kind, l.DType, l.Encoding = LeafImage, Uint8, enc
			if per != 1 {
				return l, fmt.Errorf("%w: feature %q holds %d images per step", ErrShape, key, per)
			}
			l.Shape = nil
		} else {
			l.Kind, l.DType, l.Encoding = LeafText, String, ""
		}
	case FeatureFloat:
		l.DType = Float32
	case FeatureInt64:
		l.DType = Int64
		if isFlag(key) {
			l.DType = Bool
		}
	default:
		l.Kind, l.DType = LeafUnknown, ""
	}
	if l.Kind == LeafTensor && per == 1 {
		l.Kind = LeafScalar
	}
	return l, nil
}

// bytesImageEncoding is the encoding of the first non-empty value with
// image magic, "" if none has.
func bytesImageEncoding(vals [][]byte) string {
	for _, v := range vals {
		if len(v) == 0 {
			continue
		}
		return ImageEncoding(v)
	}
	return ""
}

// ImageEncoding names an encoded image's format from its magic bytes:
// "jpeg" (FF D8 FF), "png" (89 50 4E 47), or "" when it is neither.
func ImageEncoding(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return EncodingJPEG
	case len(b) >= 4 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G':
		return EncodingPNG
	}
	return ""
}

// stepCount is T, the number of steps an episode's Example holds.
func stepCount(ex Example, s *Schema) (int, error) {
	for _, k := range []string{"steps/is_first", "steps/is_last", "steps/is_terminal", "steps/reward", "steps/discount"} {
		f, ok := ex[k]
		if !ok {
			continue
		}
		if l, ok := s.Leaf(k); ok && l.NumElements() != 1 {
			continue
		}
		return f.Len(), nil
	}
	var stepKeys []string
	for k := range ex {
		if strings.HasPrefix(k, "steps/") {
			stepKeys = append(stepKeys, k)
		}
	}
	if len(stepKeys) == 0 {
		return 0, nil
	}
	sort.Strings(stepKeys)
	for _, k := range stepKeys {
		f := ex[k]
		l, ok := s.Leaf(k)
		if !ok {
			continue
		}
		if n := itemLen(l); n > 0 {
			if f.Len()%n != 0 {
				return 0, fmt.Errorf("%w: feature %q holds %d values, not a multiple of its %d per step", ErrShape, k, f.Len(), n)
			}
			return f.Len() / n, nil
		}
	}
	for _, k := range stepKeys {
		if f := ex[k]; f.Kind == FeatureBytes && bytesImageEncoding(f.Bytes) != "" {
			return f.Len(), nil
		}
	}
	return 0, fmt.Errorf("%w: cannot tell the number of steps: no steps/is_first and no feature of known size per step", ErrShape)
}

// itemLen is how many list values one item of l takes in an Example,
// -1 if unknown.
func itemLen(l Leaf) int {
	if l.Kind == LeafImage || (l.Encoding != "" && l.Encoding != EncodingNone && l.Kind != LeafText) {
		return 1
	}
	return l.NumElements()
}

// decoder turns Examples into Episodes. It is not safe for concurrent
// use; Episodes makes one per call.
type decoder struct {
	d   *Dataset
	zr  io.ReadCloser
	br  bytes.Reader
	raw []byte
}

// Episodes calls fn with each episode of the dataset in order, one
// record at a time, until the shards end, fn returns an error or ctx is
// done. fn owns the episode it is given. A record that cannot be read or
// decoded ends Episodes with a *RecordError naming its file, index and
// offset, unless SkipBad is set: then it goes to OnError and the next
// record follows.
func (d *Dataset) Episodes(ctx context.Context, fn func(*Episode) error) error {
	dec := &decoder{d: d}
	rd := &TFRecordReader{}
	for _, sh := range d.Shards {
		if err := dec.readShard(ctx, sh, rd, fn); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dataset) report(err error) {
	if d.OnError != nil {
		d.OnError(err)
		return
	}
	d.log.Warn("rlds: skipping bad record", "dataset", d.Name, "err", err)
}

func (dec *decoder) readShard(ctx context.Context, sh Shard, rd *TFRecordReader, fn func(*Episode) error) error {
	d := dec.d
	f, err := os.Open(sh.Path)
	if err != nil {
		return fmt.Errorf("rlds: %w", err)
	}
	defer f.Close()
	rd.Reset(f, sh.Path)
	rd.MaxRecordSize = d.MaxRecordSize
	rd.SkipCorrupt = d.SkipBad
	rd.OnCorrupt = func(e *RecordError) { d.report(e) }
	shard := filepath.Base(sh.Path)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		src := &Source{Dataset: d.Name, Version: d.Version, Split: sh.Split, Shard: shard, Record: rd.Record(), Offset: rd.Offset()}
		ep, err := dec.decodeRecord(b, src)
		if err != nil {
			re := &RecordError{File: sh.Path, Offset: rd.Offset(), Record: rd.Record(), Err: err}
			if d.SkipBad {
				d.report(re)
				continue
			}
			return re
		}
		if err := fn(ep); err != nil {
			return err
		}
	}
}

// DecodeEpisode turns one record (a serialized tf.train.Example) into an
// Episode using schema s (nil infers it from the record). src names the
// record; it sets the episode's ID and Source, and its Dataset names the
// agent when the metadata does not.
func DecodeEpisode(b []byte, s *Schema, src Source) (*Episode, error) {
	dec := &decoder{d: &Dataset{Schema: s, Name: src.Dataset, Version: src.Version}}
	return dec.decodeRecord(b, &src)
}

func (dec *decoder) decodeRecord(b []byte, src *Source) (*Episode, error) {
	ex, err := ParseExample(b)
	if err != nil {
		return nil, err
	}
	return dec.decodeExample(ex, src)
}

// instructionKeys are where RLDS datasets keep a step's instruction, in
// order of preference.
var instructionKeys = []string{
	"steps/language_instruction",
	"steps/observation/natural_language_instruction",
	"steps/observation/language_instruction",
}

func (dec *decoder) decodeExample(ex Example, src *Source) (*Episode, error) {
	s := dec.d.Schema
	t, err := stepCount(ex, s)
	if err != nil {
		return nil, err
	}
	maxSteps := dec.d.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	if t > maxSteps {
		return nil, fmt.Errorf("%w: episode claims %d steps, more than the limit of %d", ErrShape, t, maxSteps)
	}
	ep := &Episode{
		ID:       EpisodeID(src.Dataset, src.Version, src.Split, src.Shard, src.Record),
		Source:   src,
		Metadata: map[string]any{},
		Steps:    make([]Step, t),
	}
	for i := range ep.Steps {
		ep.Steps[i].Index = i
		ep.Steps[i].Discount = 1
	}
	instrKey := ""
	for _, k := range instructionKeys {
		if _, ok := ex[k]; ok {
			instrKey = k
			break
		}
	}
	for _, key := range sortedKeys(ex) {
		f := ex[key]
		leaf, ok := s.Leaf(key)
		if !ok || (s != nil && s.Inferred && (leaf.Kind == LeafText || leaf.Kind == LeafImage)) {
			// Unknown to features.json, or a guess from another record:
			// take this record's own word for it.
			if leaf, err = inferLeaf(key, f, t); err != nil {
				return nil, err
			}
		}
		if !leaf.PerStep && strings.HasPrefix(key, "steps/") {
			leaf.PerStep = true
		}
		if !leaf.PerStep {
			ts, err := dec.decodeItems(key, f, leaf, 1)
			if err != nil {
				return nil, err
			}
			v := metaValue(ts[0])
			ep.Metadata[key] = v
			continue
		}
		ts, err := dec.decodeItems(key, f, leaf, t)
		if err != nil {
			return nil, err
		}
		sub := strings.TrimPrefix(key, "steps/")
		for i := range ep.Steps {
			st := &ep.Steps[i]
			tn := ts[i]
			switch {
			case sub == "is_first":
				st.IsFirst = truth(tn)
			case sub == "is_last":
				st.IsLast = truth(tn)
			case sub == "is_terminal":
				st.IsTerminal = truth(tn)
			case sub == "reward" && len(tn.Data) == 1:
				st.Reward = tn.Data[0]
			case sub == "discount" && len(tn.Data) == 1:
				st.Discount = tn.Data[0]
			case sub == "observation" || strings.HasPrefix(sub, "observation/"):
				if st.Observation == nil {
					st.Observation = Features{}
				}
				st.Observation[strings.TrimPrefix(strings.TrimPrefix(sub, "observation"), "/")] = tn
			case sub == "action" || strings.HasPrefix(sub, "action/"):
				if st.Action == nil {
					st.Action = Features{}
				}
				st.Action[strings.TrimPrefix(strings.TrimPrefix(sub, "action"), "/")] = tn
			case sub == "language_instruction" && tn.DType == String:
				// Set below from instrKey.
			default:
				if st.Metadata == nil {
					st.Metadata = map[string]any{}
				}
				st.Metadata[sub] = metaValue(tn)
			}
			if key == instrKey && tn.DType == String && len(tn.Text) > 0 {
				st.LanguageInstruction = tn.Text[0]
			}
		}
	}
	for i := range ep.Steps {
		if li := ep.Steps[i].LanguageInstruction; li != "" {
			ep.LanguageInstruction = li
			break
		}
	}
	for _, k := range []string{"success", "episode_metadata/success", "aspects/success"} {
		if v, ok := ep.Metadata[k]; ok {
			if b, ok := boolValue(v); ok {
				ep.Success = &b
				break
			}
		}
	}
	ep.Agent = agentName(ep.Metadata, dec.d.Name)
	ep.Location = locationName(ep.Metadata)
	return ep, nil
}

func truth(t Tensor) bool {
	for _, v := range t.Data {
		if v != 0 {
			return true
		}
	}
	return false
}

func boolValue(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case int64:
		return x != 0, true
	case float64:
		return x != 0, true
	}
	return false, false
}

// metaValue is a tensor as a metadata value: a plain string, bool,
// int64 or float64 for a scalar, the Tensor otherwise.
func metaValue(t Tensor) any {
	if len(t.Shape) != 0 {
		return t
	}
	switch t.DType {
	case String:
		if len(t.Text) == 1 {
			return t.Text[0]
		}
	case Bool:
		if len(t.Data) == 1 {
			return t.Data[0] != 0
		}
	case Int64, Int32, Uint8:
		if len(t.Data) == 1 {
			return int64(t.Data[0])
		}
	case Float32, Float64:
		if len(t.Data) == 1 {
			return t.Data[0]
		}
	}
	return t
}

// lastSegment is the part of a feature key after its last "/".
func lastSegment(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// metaString finds the first metadata value, by key name in order of
// names, that is a non-empty string (or a number, when numbers is set).
func metaString(md map[string]any, names []string, numbers bool) string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range names {
		for _, k := range keys {
			if lastSegment(k) != name {
				continue
			}
			switch v := md[k].(type) {
			case string:
				if strings.TrimSpace(v) != "" {
					return strings.TrimSpace(v)
				}
			case int64:
				if numbers {
					return strconv.FormatInt(v, 10)
				}
			}
		}
	}
	return ""
}

// agentName is the robot the metadata names, else the dataset, as a
// NATS-safe token of [a-z0-9_-].
func agentName(md map[string]any, dataset string) string {
	if a := SanitizeAgent(metaString(md, []string{"robot_name", "robot", "agent_name", "agent", "embodiment", "robot_id", "agent_id"}, false)); a != "" {
		return a
	}
	if a := SanitizeAgent(dataset); a != "" {
		return a
	}
	return "rlds"
}

func locationName(md map[string]any) string {
	return metaString(md, []string{"location_name", "location", "lab", "site", "building"}, true)
}

// SanitizeAgent lowercases s and maps every run of characters outside
// [a-z0-9_-] to one "_", trimming "_" from the ends, so that the result
// is a valid agent token (no dots, spaces or NATS wildcards).
func SanitizeAgent(s string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			if r == '_' {
				if under {
					continue
				}
				under = true
			} else {
				under = false
			}
			b.WriteRune(r)
		default:
			if !under {
				b.WriteByte('_')
				under = true
			}
		}
	}
	return strings.Trim(b.String(), "_")
}

func kindFor(l Leaf) (FeatureKind, bool) {
	switch {
	case l.Kind == LeafImage, l.Kind == LeafText, l.DType == String, l.Encoding == EncodingZlib, l.Encoding == EncodingBytes:
		return FeatureBytes, true
	case l.Kind == LeafLabel:
		return FeatureInt64, true
	}
	switch l.DType {
	case Float32, Float64, "float16", "bfloat16":
		return FeatureFloat, true
	case Int64, Int32, Uint8, Bool, "int8", "int16", "uint16", "uint32", "uint64":
		return FeatureInt64, true
	}
	return FeatureEmpty, false
}

// decodeItems splits feature f into items tensors (T steps, or 1 for an
// episode-level feature) as leaf l describes.
func (dec *decoder) decodeItems(key string, f Feature, l Leaf, items int) ([]Tensor, error) {
	if l.Kind == LeafUnknown {
		inferred, err := inferLeaf(key, f, items)
		if err != nil {
			return nil, err
		}
		inferred.PerStep = l.PerStep
		l = inferred
	}
	if l.Kind == LeafUnknown {
		// A feature with no list set and no schema: nothing to decode.
		out := make([]Tensor, items)
		for i := range out {
			out[i] = Tensor{DType: Float32, Shape: []int{0}}
		}
		return out, nil
	}
	want, ok := kindFor(l)
	if !ok {
		return nil, fmt.Errorf("%w: feature %q: dtype %q cannot be stored in a tf.train.Example", ErrDType, key, l.DType)
	}
	n := f.Len()
	if f.Kind != want && n > 0 {
		return nil, fmt.Errorf("%w: feature %q: features.json says %s %s, which is a %s, but the record holds a %s",
			ErrDType, key, l.DType, l.Kind, want, f.Kind)
	}
	if items == 0 {
		if n > 0 {
			return nil, fmt.Errorf("%w: feature %q holds %d values in an episode of 0 steps", ErrShape, key, n)
		}
		return nil, nil
	}
	if n%items != 0 {
		return nil, fmt.Errorf("%w: feature %q holds %d values, not a multiple of %d steps", ErrShape, key, n, items)
	}
	per := n / items
	out := make([]Tensor, items)

	switch {
	case l.Kind == LeafImage:
		if per != 1 {
			return nil, fmt.Errorf("%w: feature %q holds %d images per item, want 1", ErrShape, key, per)
		}
		total := 0
		for _, v := range f.Bytes {
			total += len(v)
		}
		buf := make([]byte, 0, total)
		var shape []int // the decoded image's shape, unknown dimensions kept as -1
		if len(l.Shape) > 0 {
			shape = append(shape, l.Shape...)
		}
		for i, v := range f.Bytes {
			start := len(buf)
			buf = append(buf, v...)
			out[i] = Tensor{DType: Image, Shape: shape, Encoding: ImageEncoding(v)}
			if len(v) > 0 {
				out[i].Bytes = buf[start:len(buf):len(buf)]
			}
		}
		return out, nil

	case l.Kind == LeafText || l.DType == String:
		if m := l.NumElements(); m >= 0 && per != m {
			return nil, fmt.Errorf("%w: feature %q holds %d strings per item, features.json says shape %v", ErrShape, key, per, l.Shape)
		}
		shape := resolveShape(l.Shape, per)
		for i := range out {
			text := make([]string, per)
			for j := range text {
				text[j] = string(f.Bytes[i*per+j])
			}
			out[i] = Tensor{DType: String, Shape: shape, Text: text}
		}
		return out, nil

	case l.Encoding == EncodingZlib || l.Encoding == EncodingBytes:
		if per != 1 {
			return nil, fmt.Errorf("%w: feature %q holds %d %s-encoded arrays per item, want 1", ErrShape, key, per, l.Encoding)
		}
		dt := l.TensorDType()
		for i, v := range f.Bytes {
			raw := v
			if l.Encoding == EncodingZlib {
				var err error
				if raw, err = dec.inflate(v, l); err != nil {
					return nil, fmt.Errorf("feature %q item %d: %w", key, i, err)
				}
			}
			data, err := decodeRaw(raw, l.DType)
			if err != nil {
				return nil, fmt.Errorf("feature %q item %d: %w", key, i, err)
			}
			if m := l.NumElements(); m >= 0 && len(data) != m {
				return nil, fmt.Errorf("%w: feature %q item %d holds %d values, features.json says shape %v", ErrShape, key, i, len(data), l.Shape)
			}
			out[i] = Tensor{DType: dt, Shape: resolveShape(l.Shape, len(data)), Data: data}
		}
		return out, nil
	}

	if m := l.NumElements(); m >= 0 && per != m {
		return nil, fmt.Errorf("%w: feature %q holds %d values per item, features.json says shape %v", ErrShape, key, per, l.Shape)
	}
	dt := l.TensorDType()
	data := make([]float64, n)
	switch f.Kind {
	case FeatureFloat:
		for i, v := range f.Floats {
			data[i] = float64(v)
		}
	case FeatureInt64:
		if dt == Bool {
			for i, v := range f.Ints {
				if v != 0 {
					data[i] = 1
				}
			}
		} else {
			for i, v := range f.Ints {
				data[i] = float64(v)
			}
		}
	}
	shape := resolveShape(l.Shape, per)
	for i := range out {
		out[i] = Tensor{DType: dt, Shape: shape, Data: data[i*per : (i+1)*per : (i+1)*per]}
	}
	return out, nil
}

// resolveShape fills one unknown (-1) dimension of shape from the item's
// value count n; with several unknown it returns [n]. The result is a
// new slice (nil for a scalar), shared by one feature's items.
func resolveShape(shape []int, n int) []int {
	if len(shape) == 0 {
		return nil
	}
	known, unknown := 1, 0
	for _, d := range shape {
		if d < 0 {
			unknown++
		} else {
			known *= d
		}
	}
	switch {
	case unknown == 0:
		return append([]int(nil), shape...)
	case unknown == 1 && known > 0 && n%known == 0:
		out := make([]int, len(shape))
		for i, d := range shape {
			if d < 0 {
				d = n / known
			}
			out[i] = d
		}
		return out
	}
	return []int{n}
}

// inflate decompresses one zlib-encoded tensor, refusing to inflate past
// the size its shape allows (or MaxRecordSize when the shape is open).
func (dec *decoder) inflate(b []byte, l Leaf) ([]byte, error) {
	limit := int64(l.NumElements()) * int64(elemWidth(l.DType))
	if l.NumElements() < 0 {
		limit = dec.d.MaxRecordSize
		if limit <= 0 {
			limit = DefaultMaxRecordSize
		}
	}
	dec.br.Reset(b)
	var err error
	if dec.zr == nil {
		dec.zr, err = zlib.NewReader(&dec.br)
	} else {
		err = dec.zr.(zlib.Resetter).Reset(&dec.br, nil)
	}
	if err != nil {
		return nil, corruptf("zlib: %v", err)
	}
	dec.raw = dec.raw[:0]
	buf := bytes.NewBuffer(dec.raw)
	m, err := buf.ReadFrom(io.LimitReader(dec.zr, limit+1))
	dec.raw = buf.Bytes()
	if err != nil {
		return nil, corruptf("zlib: %v", err)
	}
	if m > limit {
		return nil, fmt.Errorf("%w: zlib data inflates past the %d bytes of shape %v", ErrShape, limit, l.Shape)
	}
	return dec.raw, nil
}

// decodeRaw reads a little-endian array of dtype d.
func decodeRaw(b []byte, d DType) ([]float64, error) {
	w := elemWidth(d)
	if w == 0 {
		return nil, fmt.Errorf("%w: raw dtype %q", ErrDType, d)
	}
	if len(b)%w != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %s values", ErrShape, len(b), d)
	}
	out := make([]float64, len(b)/w)
	le := binary.LittleEndian
	for i := range out {
		p := b[i*w:]
		var v float64
		switch d {
		case Bool:
			if p[0] != 0 {
				v = 1
			}
		case Uint8:
			v = float64(p[0])
		case "int8":
			v = float64(int8(p[0]))
		case "int16":
			v = float64(int16(le.Uint16(p)))
		case "uint16":
			v = float64(le.Uint16(p))
		case "float16":
			v = float64(halfToFloat32(le.Uint16(p)))
		case "bfloat16":
			v = float64(math.Float32frombits(uint32(le.Uint16(p)) << 16))
		case Float32:
			v = float64(math.Float32frombits(le.Uint32(p)))
		case Int32:
			v = float64(int32(le.Uint32(p)))
		case "uint32":
			v = float64(le.Uint32(p))
		case Float64:
			v = math.Float64frombits(le.Uint64(p))
		case Int64:
			v = float64(int64(le.Uint64(p)))
		case "uint64":
			v = float64(le.Uint64(p))
		}
		out[i] = v
	}
	return out, nil
}

// halfToFloat32 converts an IEEE 754 half-precision value.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch exp {
	case 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: normalise.
		e := uint32(127 - 15 + 1)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		frac &= 0x3ff
		return math.Float32frombits(sign | e<<23 | frac<<13)
	case 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
