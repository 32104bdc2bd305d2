package rlds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// LeafKind is the TFDS feature class of a schema leaf.
type LeafKind string

// Leaf kinds, after the TFDS feature classes that serialise them.
const (
	LeafTensor  LeafKind = "tensor"  // features.Tensor
	LeafScalar  LeafKind = "scalar"  // features.Scalar (a shape-[] tensor)
	LeafImage   LeafKind = "image"   // features.Image: encoded bytes per item
	LeafText    LeafKind = "text"    // features.Text: one string per item
	LeafLabel   LeafKind = "label"   // features.ClassLabel: an int64
	LeafUnknown LeafKind = "unknown" // a class this reader does not know; decoded by inference
)

// Tensor encodings and image formats a Leaf can carry.
const (
	EncodingNone  = "none"  // values in a float_list or int64_list
	EncodingZlib  = "zlib"  // one zlib-deflated little-endian array per item
	EncodingBytes = "bytes" // one raw little-endian array per item
	EncodingJPEG  = "jpeg"
	EncodingPNG   = "png"
)

// Leaf is one leaf feature of a TFDS FeaturesDict, flattened.
type Leaf struct {
	// Path is the feature's full key in a tf.train.Example:
	// "steps/observation/image", "episode_metadata/file_path", "success".
	Path string   `json:"path"`
	Kind LeafKind `json:"kind"`
	// DType is the element type as features.json gives it: "float32",
	// "uint8" for an RGB image, "float32" for a bit-cast depth image,
	// "string" for text. Use [Leaf.TensorDType] for the decoded tensor.
	DType DType `json:"dtype"`
	// Shape is the shape of one item (one step's value when PerStep), -1
	// for a dimension of unknown size. Nil for a scalar.
	Shape []int `json:"shape,omitempty"`
	// PerStep marks a feature inside the steps sequence: the Example holds
	// all steps' values concatenated.
	PerStep bool `json:"per_step,omitempty"`
	// Encoding is none, zlib or bytes for tensors, jpeg or png for images
	// (TFDS's default is png), empty otherwise.
	Encoding    string `json:"encoding,omitempty"`
	Description string `json:"description,omitempty"`
	// Class is TFDS's pythonClassName, for the record.
	Class string `json:"class,omitempty"`
}

// TensorDType is the dtype a decoded item of this leaf has: Image for
// images whatever their pixel type, String for text, and the nearest of
// this package's numeric types otherwise.
func (l Leaf) TensorDType() DType {
	switch l.Kind {
	case LeafImage:
		return Image
	case LeafText:
		return String
	case LeafLabel:
		return Int64
	}
	return tensorDType(l.DType)
}

// tensorDType maps a TFDS dtype to one of this package's DTypes.
func tensorDType(d DType) DType {
	switch d {
	case Float32, Float64, Int64, Int32, Uint8, Bool, String:
		return d
	case "float16", "bfloat16":
		return Float32
	case "int8", "int16", "uint16":
		return Int32
	case "uint32", "uint64":
		return Int64
	case "object", "bytes":
		return Bytes
	}
	return d
}

// elemWidth is the byte width of one element of a raw (zlib or bytes
// encoded) tensor of dtype d, 0 if unknown.
func elemWidth(d DType) int {
	switch d {
	case Bool, Uint8, "int8":
		return 1
	case "float16", "bfloat16", "int16", "uint16":
		return 2
	case Float32, Int32, "uint32":
		return 4
	case Float64, Int64, "uint64":
		return 8
	}
	return 0
}

// NumElements is the number of values in one item, or -1 if a dimension
// is unknown.
func (l Leaf) NumElements() int {
	n := 1
	for _, d := range l.Shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

// Schema is a TFDS FeaturesDict flattened to its leaves.
type Schema struct {
	// Leaves in path order.
	Leaves []Leaf
	// Inferred is set when the schema was guessed from a record rather
	// than read from features.json.
	Inferred bool
	byPath   map[string]int
}

// Leaf returns the leaf at path.
func (s *Schema) Leaf(path string) (Leaf, bool) {
	if s == nil {
		return Leaf{}, false
	}
	i, ok := s.byPath[path]
	if !ok {
		return Leaf{}, false
	}
	return s.Leaves[i], true
}

// StepLeaves returns the per-step leaves.
func (s *Schema) StepLeaves() []Leaf {
	var out []Leaf
	for _, l := range s.Leaves {
		if l.PerStep {
			out = append(out, l)
		}
	}
	return out
}

func newSchema(leaves []Leaf) *Schema {
	sort.Slice(leaves, func(i, j int) bool { return leaves[i].Path < leaves[j].Path })
	s := &Schema{Leaves: leaves, byPath: make(map[string]int, len(leaves))}
	for i, l := range leaves {
		s.byPath[l.Path] = i
	}
	return s
}

// featureJSON is one node of TFDS's features.json (the JSON form of
// tensorflow_datasets.core.proto.feature_pb2.Feature).
type featureJSON struct {
	PythonClassName string `json:"pythonClassName"`
	Description     string `json:"description"`
	FeaturesDict    *struct {
		Features map[string]featureJSON `json:"features"`
	} `json:"featuresDict"`
	Sequence *struct {
		Feature *featureJSON `json:"feature"`
		Length  jsonInt      `json:"length"`
	} `json:"sequence"`
	Tensor *struct {
		Shape    shapeJSON `json:"shape"`
		DType    string    `json:"dtype"`
		Encoding string    `json:"encoding"`
	} `json:"tensor"`
	Image *struct {
		Shape          shapeJSON `json:"shape"`
		DType          string    `json:"dtype"`
		EncodingFormat string    `json:"encodingFormat"`
	} `json:"image"`
	Text       *struct{} `json:"text"`
	ClassLabel *struct {
		NumClasses jsonInt `json:"numClasses"`
	} `json:"classLabel"`
}

type shapeJSON struct {
	Dimensions []jsonInt `json:"dimensions"`
}

// jsonInt is an integer that protobuf's JSON mapping writes as a string
// ("7", "-1"); a plain number and null are accepted too.
type jsonInt int64

func (j *jsonInt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*j = -1
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %s", b)
	}
	*j = jsonInt(v)
	return nil
}

func (s shapeJSON) ints() []int {
	if len(s.Dimensions) == 0 {
		return nil
	}
	out := make([]int, len(s.Dimensions))
	for i, d := range s.Dimensions {
		if d < 0 {
			out[i] = -1
		} else {
			out[i] = int(d)
		}
	}
	return out
}

// ParseSchema parses a TFDS features.json into its flat leaves.
func ParseSchema(b []byte) (*Schema, error) {
	var root featureJSON
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("features.json: %w", err)
	}
	var leaves []Leaf
	if err := walkFeature(&root, "", false, nil, &leaves); err != nil {
		return nil, fmt.Errorf("features.json: %w", err)
	}
	return newSchema(leaves), nil
}

// ReadSchema reads and parses a features.json file.
func ReadSchema(path string) (*Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseSchema(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "/" + key
}

// walkFeature appends the leaves below f. perStep is set below the first
// sequence (the RLDS steps); outer holds the lengths of any deeper
// sequences, which become leading dimensions of an item.
func walkFeature(f *featureJSON, path string, perStep bool, outer []int, out *[]Leaf) error {
	class := f.PythonClassName
	leaf := Leaf{Path: path, PerStep: perStep, Description: f.Description, Class: class}
	withOuter := func(shape []int) []int {
		if len(outer) == 0 {
			return shape
		}
		return append(append([]int(nil), outer...), shape...)
	}
	switch {
	case f.FeaturesDict != nil:
		if len(f.FeaturesDict.Features) == 0 && path == "" {
			return fmt.Errorf("empty FeaturesDict")
		}
		for k, sub := range f.FeaturesDict.Features {
			if k == "" {
				return fmt.Errorf("%s: empty feature name", orRoot(path))
			}
			if err := walkFeature(&sub, joinPath(path, k), perStep, outer, out); err != nil {
				return err
			}
		}
		return nil
	case f.Sequence != nil:
		if f.Sequence.Feature == nil {
			return fmt.Errorf("%s: sequence without a feature", orRoot(path))
		}
		if !perStep {
			return walkFeature(f.Sequence.Feature, path, true, outer, out)
		}
		return walkFeature(f.Sequence.Feature, path, true, append(outer, int(max(f.Sequence.Length, -1))), out)
	case f.Tensor != nil:
		leaf.Kind = LeafTensor
		if strings.HasSuffix(class, ".Scalar") {
			leaf.Kind = LeafScalar
		}
		leaf.DType = DType(f.Tensor.DType)
		leaf.Shape = withOuter(f.Tensor.Shape.ints())
		leaf.Encoding = strings.ToLower(f.Tensor.Encoding)
		if leaf.Encoding == "" {
			leaf.Encoding = EncodingNone
		}
		switch leaf.Encoding {
		case EncodingNone, EncodingZlib, EncodingBytes:
		default:
			return fmt.Errorf("%s: unknown tensor encoding %q", path, f.Tensor.Encoding)
		}
		if leaf.DType == "" {
			return fmt.Errorf("%s: tensor without a dtype", path)
		}
		if leaf.Encoding != EncodingNone && elemWidth(leaf.DType) == 0 {
			return fmt.Errorf("%s: %s encoding of dtype %s is not supported", path, leaf.Encoding, leaf.DType)
		}
	case f.Image != nil:
		leaf.Kind = LeafImage
		leaf.DType = DType(f.Image.DType)
		if leaf.DType == "" {
			leaf.DType = Uint8
		}
		leaf.Shape = withOuter(f.Image.Shape.ints())
		leaf.Encoding = strings.ToLower(f.Image.EncodingFormat)
		if leaf.Encoding == "" {
			leaf.Encoding = EncodingPNG
		}
	case f.Text != nil:
		leaf.Kind, leaf.DType = LeafText, String
		leaf.Shape = withOuter(nil)
	case f.ClassLabel != nil:
		leaf.Kind, leaf.DType = LeafLabel, Int64
		leaf.Shape = withOuter(nil)
	default:
		leaf.Kind = LeafUnknown
	}
	if path == "" {
		return fmt.Errorf("the root is a leaf, want a FeaturesDict")
	}
	*out = append(*out, leaf)
	return nil
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// DatasetInfo is what this reader uses of TFDS's dataset_info.json.
type DatasetInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// FileFormat is tfrecord or array_record (this reader reads only
	// tfrecord). Empty means tfrecord.
	FileFormat  string      `json:"fileFormat"`
	ModuleName  string      `json:"moduleName"`
	Description string      `json:"description"`
	Splits      []SplitInfo `json:"splits"`
}

// SplitInfo describes one split's shards.
type SplitInfo struct {
	Name             string  `json:"name"`
	NumBytes         int64   `json:"numBytes"`
	ShardLengths     []int64 `json:"shardLengths"`
	FilepathTemplate string  `json:"filepathTemplate"`
}

// NumExamples is the sum of the split's shard lengths.
func (s SplitInfo) NumExamples() int64 {
	var n int64
	for _, l := range s.ShardLengths {
		n += l
	}
	return n
}

// Split returns the split called name.
func (d *DatasetInfo) Split(name string) (SplitInfo, bool) {
	for _, s := range d.Splits {
		if s.Name == name {
			return s, true
		}
	}
	return SplitInfo{}, false
}

// UnmarshalJSON reads protobuf's JSON form, where int64s are strings.
func (s *SplitInfo) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name             string    `json:"name"`
		NumBytes         jsonInt   `json:"numBytes"`
		ShardLengths     []jsonInt `json:"shardLengths"`
		FilepathTemplate string    `json:"filepathTemplate"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = SplitInfo{Name: raw.Name, NumBytes: int64(raw.NumBytes), FilepathTemplate: raw.FilepathTemplate}
	s.ShardLengths = make([]int64, len(raw.ShardLengths))
	for i, l := range raw.ShardLengths {
		if l < 0 {
			return fmt.Errorf("split %q: negative shard length %d", raw.Name, l)
		}
		s.ShardLengths[i] = int64(l)
	}
	return nil
}

// ParseDatasetInfo parses a TFDS dataset_info.json.
func ParseDatasetInfo(b []byte) (*DatasetInfo, error) {
	var d DatasetInfo
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("dataset_info.json: %w", err)
	}
	return &d, nil
}

// ReadDatasetInfo reads and parses a dataset_info.json file.
func ReadDatasetInfo(path string) (*DatasetInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseDatasetInfo(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
