package arrowexport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // decode JPEG frames for image statistics
	_ "image/png"  // and PNG frames
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// LeRobotVersion is the LeRobot dataset format the LeRobot writer
// produces.
const LeRobotVersion = "v2.1"

// LeRobotWriter turns a steps export into a directory in the LeRobot
// dataset layout, one Parquet file per episode:
//
//	meta/info.json              format, fps, counts, path templates, features
//	meta/episodes.jsonl         {"episode_index","tasks","length", "ctxgraph_episode_id","agent"}
//	meta/tasks.jsonl            {"task_index","task"}: the language instructions
//	meta/episodes_stats.jsonl   per-episode min/max/mean/std/count of every feature
//	meta/stats.json             the same over the whole dataset
//	data/chunk-NNN/episode_NNNNNN.parquet
//
// Each frame has observation.state (every fixed-shape numeric observation
// feature, concatenated in column order, float32), observation.images.<name>
// (each image feature, as LeRobot's image struct {bytes, path} holding the
// encoded bytes the image came in), action (every fixed-shape numeric
// action feature, concatenated, float32), timestamp (frame_index/fps,
// float32 seconds, as LeRobot's loader checks), frame_index, episode_index,
// index (over the dataset), task_index, next.reward and next.done. The
// recorded wall-clock times stay in the steps table.
//
// Rows must arrive grouped by episode, as a steps export writes them;
// the writer holds one episode at a time.
type LeRobotWriter struct {
	// Dir is the dataset root; it is created if missing.
	Dir string
	// FPS is the frame rate; 0 estimates it from the first episode's
	// median step interval (10 when there is none).
	FPS float64
	// ChunkSize is how many episodes go in one chunk directory. Default
	// 1000.
	ChunkSize int

	in       *arrow.Schema
	state    []int // input columns concatenated into observation.state
	action   []int
	images   []int
	names    map[string][]string // feature names for info.json
	out      *arrow.Schema
	cur      *leEpisode
	episodes int
	frames   int64
	tasks    map[string]int
	taskList []string
	agents   map[string]bool
	epMeta   []byte // episodes.jsonl
	statsLog []byte // episodes_stats.jsonl
	total    map[string]*featStats
	imgShape map[string][]int
}

// leFrame is one buffered frame of the current episode.
type leEpisode struct {
	id, agent string
	ts        []time.Time
	state     []float32
	action    []float32
	images    [][][]byte // per image feature, per frame
	reward    []float32
	done      []bool
	task      []int
}

// Begin checks the input is a steps table and plans the output columns.
func (w *LeRobotWriter) Begin(s *arrow.Schema) error {
	if t, _ := s.Metadata().GetValue("ctxgraph.table"); t != string(TableSteps) {
		return fmt.Errorf("%w: the lerobot layout holds steps, not %q", ErrInvalid, t)
	}
	if w.ChunkSize <= 0 {
		w.ChunkSize = 1000
	}
	w.in, w.names = s, map[string][]string{}
	w.tasks, w.agents, w.total, w.imgShape = map[string]int{}, map[string]bool{}, map[string]*featStats{}, map[string][]int{}
	for i, f := range s.Fields() {
		feat, ok := f.Metadata.GetValue(MetaFeature)
		if !ok {
			continue
		}
		group, key, _ := strings.Cut(feat, "/")
		dtype, _ := f.Metadata.GetValue(MetaDType)
		if dtype == "image" {
			w.images = append(w.images, i)
			continue
		}
		fl, ok := f.Type.(*arrow.FixedSizeListType)
		if !ok || dtype == "string" {
			continue // variable shapes have no place in a fixed LeRobot feature
		}
		name := "observation.state"
		if group == "action" {
			name = "action"
			w.action = append(w.action, i)
		} else {
			w.state = append(w.state, i)
		}
		if key == "" {
			key = group
		}
		for j := 0; j < int(fl.Len()); j++ {
			if fl.Len() == 1 {
				w.names[name] = append(w.names[name], key)
			} else {
				w.names[name] = append(w.names[name], fmt.Sprintf("%s_%d", key, j))
			}
		}
	}
	w.out = w.schema()
	return os.MkdirAll(filepath.Join(w.Dir, "meta"), 0o755)
}

// imageColumn is the output column of input image column i.
func (w *LeRobotWriter) imageColumn(i int) string {
	feat, _ := w.in.Field(i).Metadata.GetValue(MetaFeature)
	_, key, _ := strings.Cut(feat, "/")
	return "observation.images." + strings.ReplaceAll(key, "/", ".")
}

// leImageType is LeRobot's (Hugging Face datasets') image struct.
var leImageType = arrow.StructOf(
	arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
	arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
)

// vectorType is a LeRobot feature of n float32s: a scalar when n is 1
// (shape [1] is a Value), else a fixed-size list (a Sequence of length n).
func vectorType(n int) arrow.DataType {
	if n == 1 {
		return arrow.PrimitiveTypes.Float32
	}
	return arrow.FixedSizeListOf(int32(n), arrow.PrimitiveTypes.Float32)
}

func (w *LeRobotWriter) schema() *arrow.Schema {
	var fields []arrow.Field
	if n := len(w.names["observation.state"]); n > 0 {
		// Nullable: pqarrow loses the values of a required fixed-size list.
		fields = append(fields, arrow.Field{Name: "observation.state", Type: vectorType(n), Nullable: true})
	}
	for _, i := range w.images {
		fields = append(fields, arrow.Field{Name: w.imageColumn(i), Type: leImageType, Nullable: true})
	}
	if n := len(w.names["action"]); n > 0 {
		fields = append(fields, arrow.Field{Name: "action", Type: vectorType(n), Nullable: true})
	}
	fields = append(fields,
		arrow.Field{Name: "timestamp", Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: "frame_index", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "episode_index", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "index", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "task_index", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "next.reward", Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: "next.done", Type: arrow.FixedWidthTypes.Boolean},
	)
	return arrow.NewSchema(fields, nil)
}

// Write buffers the batch's frames, writing each episode as it ends.
func (w *LeRobotWriter) Write(rec arrow.Record) error {
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	epID, agent := col("episode_id").(*array.String), col("agent").(*array.String)
	ts := col("timestamp").(*array.Timestamp)
	reward, last, term := col("reward").(*array.Float64), col("is_last").(*array.Boolean), col("is_terminal").(*array.Boolean)
	instr := col("language_instruction").(*array.String)
	for i := 0; i < int(rec.NumRows()); i++ {
		if w.cur == nil || w.cur.id != epID.Value(i) {
			if err := w.flush(); err != nil {
				return err
			}
			w.cur = &leEpisode{id: epID.Value(i), agent: agent.Value(i), images: make([][][]byte, len(w.images))}
		}
		e := w.cur
		e.ts = append(e.ts, timeAt(ts, i))
		for _, c := range w.state {
			e.state = appendFloat32s(e.state, rec.Column(c), i)
		}
		for _, c := range w.action {
			e.action = appendFloat32s(e.action, rec.Column(c), i)
		}
		for k, c := range w.images {
			var b []byte
			if a := rec.Column(c).(*array.Binary); a.IsValid(i) {
				b = slices.Clone(a.Value(i))
			}
			e.images[k] = append(e.images[k], b)
		}
		e.reward = append(e.reward, float32(reward.Value(i)))
		e.done = append(e.done, last.Value(i) || term.Value(i))
		task := optString(instr, i)
		idx, ok := w.tasks[task]
		if !ok {
			idx = len(w.taskList)
			w.tasks[task] = idx
			w.taskList = append(w.taskList, task)
		}
		e.task = append(e.task, idx)
	}
	return nil
}

// appendFloat32s appends row i of a fixed-size-list column as float32s
// (its nulls as NaN).
func appendFloat32s(dst []float32, a arrow.Array, i int) []float32 {
	l := a.(*array.FixedSizeList)
	lo, hi := l.ValueOffsets(i)
	vals := l.ListValues()
	for j := int(lo); j < int(hi); j++ {
		if l.IsNull(i) || vals.IsNull(j) {
			dst = append(dst, float32(math.NaN()))
			continue
		}
		switch v := vals.(type) {
		case *array.Float32:
			dst = append(dst, v.Value(j))
		case *array.Float64:
			dst = append(dst, float32(v.Value(j)))
		case *array.Int64:
			dst = append(dst, float32(v.Value(j)))
		case *array.Int32:
			dst = append(dst, float32(v.Value(j)))
		case *array.Uint8:
			dst = append(dst, float32(v.Value(j)))
		case *array.Boolean:
			dst = append(dst, float32(b2f(v.Value(j))))
		}
	}
	return dst
}

// estimateFPS is the frame rate of the median step interval, rounded.
func estimateFPS(ts []time.Time) float64 {
	var d []float64
	for i := 1; i < len(ts); i++ {
		if !ts[i].IsZero() && !ts[i-1].IsZero() && ts[i].After(ts[i-1]) {
			d = append(d, ts[i].Sub(ts[i-1]).Seconds())
		}
	}
	if len(d) == 0 {
		return 10
	}
	sort.Float64s(d)
	return max(1, math.Round(1/d[len(d)/2]))
}

// flush writes the buffered episode.
func (w *LeRobotWriter) flush() error {
	e := w.cur
	if e == nil || len(e.ts) == 0 {
		return nil
	}
	w.cur = nil
	if w.FPS <= 0 {
		w.FPS = estimateFPS(e.ts)
	}
	n := len(e.ts)
	idx := w.episodes
	rb := array.NewRecordBuilder(memory.DefaultAllocator, w.out)
	defer rb.Release()
	stats := map[string]*featStats{}
	field := 0
	next := func() array.Builder { b := rb.Field(field); field++; return b }
	vector := func(name string, vals []float32) {
		width := len(w.names[name])
		if width == 0 {
			return
		}
		b := next()
		st := newFeatStats(width)
		for i := 0; i < n; i++ {
			row := vals[i*width : (i+1)*width]
			st.add(row)
			if fb, ok := b.(*array.Float32Builder); ok {
				fb.Append(row[0])
				continue
			}
			fl := b.(*array.FixedSizeListBuilder)
			fl.Append(true)
			fl.ValueBuilder().(*array.Float32Builder).AppendValues(row, nil)
		}
		stats[name] = st
	}
	vector("observation.state", e.state)
	for k, c := range w.images {
		name := w.imageColumn(c)
		sb := next().(*array.StructBuilder)
		bb, pb := sb.FieldBuilder(0).(*array.BinaryBuilder), sb.FieldBuilder(1).(*array.StringBuilder)
		st := newFeatStats(3)
		for i, img := range e.images[k] {
			if img == nil {
				sb.AppendNull()
				continue
			}
			sb.Append(true)
			bb.Append(img)
			pb.Append(fmt.Sprintf("frame_%06d.%s", i, cmpOr(rlds.ImageEncoding(img), "bin")))
			if i < 100 || i%10 == 0 { // sampled, as LeRobot samples frames for image statistics
				w.imageStats(name, img, st)
			}
		}
		if st.count > 0 {
			stats[name] = st
		}
	}
	vector("action", e.action)
	scalars := map[string]*featStats{}
	for _, name := range []string{"timestamp", "frame_index", "episode_index", "index", "task_index", "next.reward", "next.done"} {
		scalars[name] = newFeatStats(1)
		stats[name] = scalars[name]
	}
	tsb, fib, eib, ib, tib := next().(*array.Float32Builder), next().(*array.Int64Builder), next().(*array.Int64Builder), next().(*array.Int64Builder), next().(*array.Int64Builder)
	rwb, dnb := next().(*array.Float32Builder), next().(*array.BooleanBuilder)
	for i := 0; i < n; i++ {
		t := float32(float64(i) / w.FPS)
		tsb.Append(t)
		fib.Append(int64(i))
		eib.Append(int64(idx))
		ib.Append(w.frames + int64(i))
		tib.Append(int64(e.task[i]))
		rwb.Append(e.reward[i])
		dnb.Append(e.done[i])
		for name, v := range map[string]float32{"timestamp": t, "frame_index": float32(i), "episode_index": float32(idx),
			"index": float32(w.frames + int64(i)), "task_index": float32(e.task[i]), "next.reward": e.reward[i], "next.done": float32(b2f(e.done[i]))} {
			scalars[name].add([]float32{v})
		}
	}
	rec := rb.NewRecord()
	defer rec.Release()
	path := filepath.Join(w.Dir, fmt.Sprintf("data/chunk-%03d/episode_%06d.parquet", idx/w.ChunkSize, idx))
	if err := writeParquetFile(path, rec, w.hfMeta()); err != nil {
		return err
	}
	var tasks []string
	for _, t := range e.task {
		if !slices.Contains(tasks, w.taskList[t]) {
			tasks = append(tasks, w.taskList[t])
		}
	}
	line, _ := json.Marshal(map[string]any{"episode_index": idx, "tasks": tasks, "length": n, "ctxgraph_episode_id": e.id, "agent": e.agent})
	w.epMeta = append(append(w.epMeta, line...), '\n')
	line, _ = json.Marshal(map[string]any{"episode_index": idx, "stats": statsJSON(stats)})
	w.statsLog = append(append(w.statsLog, line...), '\n')
	for name, st := range stats {
		if w.total[name] == nil {
			w.total[name] = newFeatStats(len(st.min))
		}
		w.total[name].merge(st)
	}
	w.agents[e.agent] = true
	w.episodes++
	w.frames += int64(n)
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// imageStats adds one frame's per-channel values, in [0,1], to st, and
// remembers the feature's shape (height, width, channels).
func (w *LeRobotWriter) imageStats(name string, b []byte, st *featStats) {
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return
	}
	r := img.Bounds()
	if w.imgShape[name] == nil {
		w.imgShape[name] = []int{r.Dy(), r.Dx(), 3}
	}
	// Per-channel min, max, mean and std over the frame's pixels,
	// folded in as one observation per pixel.
	px := make([]float32, 3)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			px[0], px[1], px[2] = float32(cr)/0xffff, float32(cg)/0xffff, float32(cb)/0xffff
			st.add(px)
		}
	}
}

// writeParquetFile writes one record as a zstd Parquet file.
func writeParquetFile(path string, rec arrow.Record, meta arrow.Metadata) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	s := arrow.NewSchema(rec.Schema().Fields(), &meta)
	pw, err := pqarrow.NewFileWriter(s, f, ParquetProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.Close()
		return err
	}
	rec = array.NewRecord(s, rec.Columns(), rec.NumRows())
	defer rec.Release()
	return errors.Join(pw.Write(rec), pw.Close()) // Close closes f
}

// features is info.json's feature table.
func (w *LeRobotWriter) features() map[string]any {
	feats := map[string]any{}
	vec := func(name string) {
		if n := len(w.names[name]); n > 0 {
			feats[name] = map[string]any{"dtype": "float32", "shape": []int{n}, "names": w.names[name]}
		}
	}
	vec("observation.state")
	vec("action")
	for _, c := range w.images {
		name := w.imageColumn(c)
		shape := w.imgShape[name]
		if shape == nil {
			shape = []int{0, 0, 3}
		}
		feats[name] = map[string]any{"dtype": "image", "shape": shape, "names": []string{"height", "width", "channel"}}
	}
	for name, dt := range map[string]string{"timestamp": "float32", "frame_index": "int64", "episode_index": "int64",
		"index": "int64", "task_index": "int64", "next.reward": "float32", "next.done": "bool"} {
		feats[name] = map[string]any{"dtype": dt, "shape": []int{1}, "names": nil}
	}
	return feats
}

// hfMeta is the Hugging Face datasets feature description that LeRobot's
// loader finds in each Parquet file's metadata.
func (w *LeRobotWriter) hfMeta() arrow.Metadata {
	hf := map[string]any{}
	for _, f := range w.out.Fields() {
		switch t := f.Type.(type) {
		case *arrow.FixedSizeListType:
			hf[f.Name] = map[string]any{"_type": "Sequence", "length": t.Len(), "feature": map[string]any{"_type": "Value", "dtype": "float32"}}
		case *arrow.StructType:
			hf[f.Name] = map[string]any{"_type": "Image"}
		default:
			dt := map[string]string{"float": "float32", "int64": "int64", "bool": "bool"}[f.Type.Name()]
			hf[f.Name] = map[string]any{"_type": "Value", "dtype": cmpOr(dt, f.Type.Name())}
		}
	}
	js, _ := json.Marshal(map[string]any{"info": map[string]any{"features": hf}})
	return arrow.NewMetadata([]string{"huggingface"}, []string{string(js)})
}

// Close writes the last episode and the metadata files.
func (w *LeRobotWriter) Close() error {
	if w.in == nil {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	fps := w.FPS
	if fps <= 0 {
		fps = 10
	}
	var robot any
	if len(w.agents) == 1 {
		for a := range w.agents {
			robot = a
		}
	}
	info := map[string]any{
		"codebase_version": LeRobotVersion, "robot_type": robot,
		"total_episodes": w.episodes, "total_frames": w.frames, "total_tasks": len(w.taskList),
		"total_videos": 0, "total_chunks": (w.episodes + w.ChunkSize - 1) / w.ChunkSize, "chunks_size": w.ChunkSize,
		"fps": fps, "splits": map[string]string{"train": fmt.Sprintf("0:%d", w.episodes)},
		"data_path":  "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
		"video_path": nil, "features": w.features(),
	}
	var tasks []byte
	for i, t := range w.taskList {
		line, _ := json.Marshal(map[string]any{"task_index": i, "task": t})
		tasks = append(append(tasks, line...), '\n')
	}
	infoJS, _ := json.MarshalIndent(info, "", "    ")
	statsJS, _ := json.MarshalIndent(statsJSON(w.total), "", "    ")
	var errs []error
	for name, b := range map[string][]byte{"info.json": infoJS, "episodes.jsonl": w.epMeta, "tasks.jsonl": tasks,
		"episodes_stats.jsonl": w.statsLog, "stats.json": statsJS} {
		errs = append(errs, os.WriteFile(filepath.Join(w.Dir, "meta", name), b, 0o644))
	}
	return errors.Join(errs...)
}

// featStats accumulates per-dimension min, max, mean and variance
// (Welford) of a feature.
type featStats struct {
	min, max, mean, m2 []float64
	count              int64
}

func newFeatStats(n int) *featStats {
	s := &featStats{min: make([]float64, n), max: make([]float64, n), mean: make([]float64, n), m2: make([]float64, n)}
	for i := range s.min {
		s.min[i], s.max[i] = math.Inf(1), math.Inf(-1)
	}
	return s
}

func (s *featStats) add(v []float32) {
	s.count++
	for i, x32 := range v {
		x := float64(x32)
		s.min[i], s.max[i] = min(s.min[i], x), max(s.max[i], x)
		d := x - s.mean[i]
		s.mean[i] += d / float64(s.count)
		s.m2[i] += d * (x - s.mean[i])
	}
}

// merge folds o into s (Chan et al.'s parallel variance).
func (s *featStats) merge(o *featStats) {
	if o.count == 0 {
		return
	}
	n := s.count + o.count
	for i := range s.mean {
		d := o.mean[i] - s.mean[i]
		s.m2[i] += o.m2[i] + d*d*float64(s.count)*float64(o.count)/float64(n)
		s.mean[i] += d * float64(o.count) / float64(n)
		s.min[i], s.max[i] = min(s.min[i], o.min[i]), max(s.max[i], o.max[i])
	}
	s.count = n
}

// statsJSON is LeRobot's stats layout: per feature min, max, mean, std
// and count; image features per channel, shaped (3,1,1).
func statsJSON(m map[string]*featStats) map[string]any {
	out := map[string]any{}
	for name, s := range m {
		std := make([]float64, len(s.m2))
		for i := range std {
			if s.count > 0 {
				std[i] = math.Sqrt(s.m2[i] / float64(s.count))
			}
		}
		shape := func(v []float64) any {
			if !strings.HasPrefix(name, "observation.images.") {
				return v
			}
			out := make([][][]float64, len(v))
			for i, x := range v {
				out[i] = [][]float64{{x}}
			}
			return out
		}
		out[name] = map[string]any{"min": shape(s.min), "max": shape(s.max), "mean": shape(s.mean), "std": shape(std), "count": []int64{s.count}}
	}
	return out
}
