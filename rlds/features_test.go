package rlds

import (
	"fmt"
	"strings"
	"testing"
)

func mustSchema(t testing.TB, rel string) *Schema {
	t.Helper()
	s, err := ReadSchema(samplePath(rel))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leafString is a compact form of a leaf for table comparisons.
func leafString(l Leaf) string {
	step := "episode"
	if l.PerStep {
		step = "step"
	}
	return fmt.Sprintf("%s %s %s %v %s %s", l.Path, l.Kind, l.DType, l.Shape, step, l.Encoding)
}

func TestParseSchemaBridgeDataset(t *testing.T) {
	s := mustSchema(t, "bridge_dataset/1.0.0/features.json")
	want := []string{
		"episode_metadata/episode_id scalar int32 [] episode none",
		"episode_metadata/file_path text string [] episode ",
		"episode_metadata/has_image_0 scalar bool [] episode none",
		"episode_metadata/has_image_1 scalar bool [] episode none",
		"episode_metadata/has_image_2 scalar bool [] episode none",
		"episode_metadata/has_image_3 scalar bool [] episode none",
		"episode_metadata/has_language scalar bool [] episode none",
		"steps/action tensor float32 [7] step none",
		"steps/discount scalar float32 [] step none",
		"steps/is_first scalar bool [] step none",
		"steps/is_last scalar bool [] step none",
		"steps/is_terminal scalar bool [] step none",
		"steps/language_embedding tensor float32 [512] step none",
		"steps/language_instruction text string [] step ",
		"steps/observation/image_0 image uint8 [64 64 3] step jpeg",
		"steps/observation/image_1 image uint8 [64 64 3] step jpeg",
		"steps/observation/image_2 image uint8 [64 64 3] step jpeg",
		"steps/observation/image_3 image uint8 [64 64 3] step jpeg",
		"steps/observation/state tensor float32 [7] step none",
		"steps/reward scalar float32 [] step none",
	}
	var got []string
	for _, l := range s.Leaves {
		got = append(got, leafString(l))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("leaves:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l, ok := s.Leaf("steps/observation/image_0"); !ok || l.TensorDType() != Image {
		t.Errorf("image leaf %+v, tensor dtype %s", l, l.TensorDType())
	}
	if len(s.StepLeaves()) != 13 || s.Inferred {
		t.Errorf("%d step leaves (want 13), inferred %v", len(s.StepLeaves()), s.Inferred)
	}
}

func TestParseSchemaOXE(t *testing.T) {
	// Counts from an independent Python walk of each features.json.
	tests := []struct {
		rel            string
		leaves, stepLs int
		// leaves that must be present, as leafString gives them
		want []string
	}{
		{"bridge/1.0.0/features.json", 13, 12, []string{
			"episode_id tensor string [] episode none",
			"steps/action/world_vector tensor float32 [3] step none",
			"steps/action/open_gripper tensor bool [] step none",
			"steps/action/terminate_episode tensor float32 [] step none",
			"steps/observation/image image uint8 [480 640 3] step png",
			"steps/observation/natural_language_instruction tensor string [] step none",
		}},
		{"_oxe-metadata/bridge/0.1.0/features.json", 12, 12, []string{
			"steps/action/rotation_delta tensor float32 [3] step none",
			"steps/observation/state tensor float32 [7] step none",
		}},
		{"_oxe-metadata/fractal20220817_data/0.1.0/features.json", 41, 24, []string{
			"steps/observation/workspace_bounds tensor float32 [3 3] step none",
			"steps/observation/orientation_box tensor float32 [2 3] step none",
			"steps/observation/image image uint8 [256 320 3] step jpeg",
			"steps/action/terminate_episode tensor int32 [3] step none",
			"attributes/collection_mode tensor int64 [] episode none",
			"attributes/location_name tensor string [] episode none",
			"aspects/success tensor bool [] episode none",
		}},
		{"_oxe-metadata/kuka/0.1.0/features.json", 19, 18, []string{
			"steps/observation/clip_function_input/workspace_bounds tensor float32 [3 3] step zlib",
			"steps/observation/clip_function_input/base_pose_tool_reached tensor float32 [7] step zlib",
			"steps/observation/height_to_bottom tensor float32 [1] step zlib",
			"steps/observation/gripper_closed tensor float32 [1] step zlib",
			"steps/observation/task_id tensor float32 [1] step zlib",
			"steps/observation/image image uint8 [512 640 3] step jpeg",
			"success tensor bool [] episode none",
		}},
		{"_oxe-metadata/taco_play/0.1.0/features.json", 16, 16, []string{
			"steps/observation/depth_static tensor float32 [150 200] step none",
			"steps/observation/depth_gripper tensor float32 [84 84] step none",
			"steps/observation/rgb_static image uint8 [150 200 3] step png",
			"steps/observation/structured_language_instruction tensor string [] step none",
			"steps/action/terminate_episode tensor float32 [] step none",
		}},
		{"_oxe-metadata/jaco_play/0.1.0/features.json", 14, 14, []string{
			"steps/observation/image_wrist image uint8 [224 224 3] step png",
			"steps/observation/joint_pos tensor float32 [8] step none",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			s := mustSchema(t, tc.rel)
			if len(s.Leaves) != tc.leaves || len(s.StepLeaves()) != tc.stepLs {
				t.Errorf("%d leaves, %d per step; want %d, %d", len(s.Leaves), len(s.StepLeaves()), tc.leaves, tc.stepLs)
			}
			have := map[string]bool{}
			for _, l := range s.Leaves {
				have[leafString(l)] = true
				if l.Kind == LeafUnknown {
					t.Errorf("leaf %s has an unknown class %s", l.Path, l.Class)
				}
			}
			for _, w := range tc.want {
				if !have[w] {
					t.Errorf("missing leaf %q", w)
				}
			}
		})
	}
	zlibs := 0
	for _, l := range mustSchema(t, "_oxe-metadata/kuka/0.1.0/features.json").Leaves {
		if l.Encoding == EncodingZlib {
			zlibs++
		}
	}
	if zlibs != 5 {
		t.Errorf("kuka has %d zlib leaves, want 5", zlibs)
	}
}

func TestParseSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"not json", `{`},
		{"root leaf", `{"tensor":{"shape":{},"dtype":"float32","encoding":"none"}}`},
		{"bad dimension", `{"featuresDict":{"features":{"a":{"tensor":{"shape":{"dimensions":["x"]},"dtype":"float32"}}}}}`},
		{"no dtype", `{"featuresDict":{"features":{"a":{"tensor":{"shape":{}}}}}}`},
		{"bad encoding", `{"featuresDict":{"features":{"a":{"tensor":{"shape":{},"dtype":"float32","encoding":"lz4"}}}}}`},
		{"zlib string", `{"featuresDict":{"features":{"a":{"tensor":{"shape":{},"dtype":"string","encoding":"zlib"}}}}}`},
		{"sequence without feature", `{"featuresDict":{"features":{"steps":{"sequence":{"length":"-1"}}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseSchema([]byte(tc.in)); err == nil {
				t.Fatal("want an error")
			}
		})
	}
	// An unknown feature class becomes an unknown leaf, decoded by inference.
	s, err := ParseSchema([]byte(`{"featuresDict":{"features":{"v":{"pythonClassName":"x.Video","video":{}},"l":{"classLabel":{"numClasses":"3"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Leaf("v"); l.Kind != LeafUnknown {
		t.Errorf("v: %+v", l)
	}
	if l, _ := s.Leaf("l"); l.Kind != LeafLabel || l.TensorDType() != Int64 {
		t.Errorf("l: %+v", l)
	}
}

func TestParseDatasetInfo(t *testing.T) {
	type split struct {
		name           string
		shards         int
		examples, size int64
	}
	// From an independent Python read of each dataset_info.json.
	tests := []struct {
		rel, name, version, format string
		splits                     []split
	}{
		{"bridge_dataset/1.0.0/dataset_info.json", "bridge_dataset", "1.0.0", "tfrecord",
			[]split{{"train", 1, 25, 3474742}, {"val", 1, 25, 3474742}}},
		{"bridge/1.0.0/dataset_info.json", "bridge", "0.0.1", "tfrecord",
			[]split{{"train", 1, 1, 9712}}},
		{"_oxe-metadata/bridge/0.1.0/dataset_info.json", "bridge", "0.1.0", "array_record",
			[]split{{"train", 1024, 25460, 365981955835}, {"test", 512, 3475, 50084717377}}},
		{"_oxe-metadata/fractal20220817_data/0.1.0/dataset_info.json", "fractal20220817_data", "0.1.0", "array_record",
			[]split{{"train", 1024, 87212, 119590609800}}},
		{"_oxe-metadata/jaco_play/0.1.0/dataset_info.json", "jaco_play", "0.1.0", "array_record",
			[]split{{"train", 128, 976, 8917111901}, {"test", 8, 109, 1003817525}}},
		{"_oxe-metadata/kuka/0.1.0/dataset_info.json", "kuka", "0.1.0", "array_record",
			[]split{{"train", 1024, 580392, 837312255081}}},
		{"_oxe-metadata/taco_play/0.1.0/dataset_info.json", "taco_play", "0.1.0", "array_record",
			[]split{{"train", 512, 3242, 46149708256}, {"test", 64, 361, 5139215692}}},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			d, err := ReadDatasetInfo(samplePath(tc.rel))
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != tc.name || d.Version != tc.version || d.FileFormat != tc.format {
				t.Errorf("got %s %s %s, want %s %s %s", d.Name, d.Version, d.FileFormat, tc.name, tc.version, tc.format)
			}
			if len(d.Splits) != len(tc.splits) {
				t.Fatalf("%d splits, want %d", len(d.Splits), len(tc.splits))
			}
			for i, w := range tc.splits {
				s := d.Splits[i]
				if s.Name != w.name || len(s.ShardLengths) != w.shards || s.NumExamples() != w.examples || s.NumBytes != w.size {
					t.Errorf("split %d: %s %d shards %d examples %d bytes, want %+v", i, s.Name, len(s.ShardLengths), s.NumExamples(), s.NumBytes, w)
				}
				if s.FilepathTemplate != "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}" {
					t.Errorf("template %q", s.FilepathTemplate)
				}
			}
			if _, ok := d.Split(tc.splits[0].name); !ok {
				t.Errorf("Split(%q) not found", tc.splits[0].name)
			}
		})
	}
}
