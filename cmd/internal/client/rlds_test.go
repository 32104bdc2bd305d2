package client

import (
	"slices"
	"testing"

	"github.com/ctxgraph/ctxgraph/rlds"
)

func TestEpisodeStatusComplete(t *testing.T) {
	src := &rlds.Source{Dataset: "d", Version: "1.0.0", Split: "train", Shard: "s", Record: 3}
	other := *src
	other.Record = 4
	full := EpisodeStatus{Found: true, Ended: true, Steps: 10, StoredSteps: 10, Source: src}
	tests := []struct {
		name string
		s    EpisodeStatus
		src  *rlds.Source
		want bool
	}{
		{"all there", full, src, true},
		{"no source asked", full, nil, true},
		{"not found", EpisodeStatus{}, src, false},
		{"no end", EpisodeStatus{Found: true, Steps: 10, StoredSteps: 10, Source: src}, src, false},
		{"a step missing", EpisodeStatus{Found: true, Ended: true, Steps: 10, StoredSteps: 9, Source: src}, src, false},
		{"more steps than the file", EpisodeStatus{Found: true, Ended: true, Steps: 11, StoredSteps: 11, Source: src}, src, false},
		{"no start", EpisodeStatus{Found: true, Ended: true, Steps: 10, StoredSteps: 10}, src, false},
		{"another record", full, &other, false},
	}
	for _, tc := range tests {
		if got := tc.s.Complete(10, tc.src); got != tc.want {
			t.Errorf("%s: Complete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSceneTags(t *testing.T) {
	got := sceneTags(map[string]any{
		"episode_metadata/scene":       " toy kitchen ",
		"environment":                  "lab",
		"episode_metadata/scene_id":    int64(7), // not a name
		"episode_metadata/file_path":   "/x/scene/y",
		"episode_metadata/environment": "lab",
	})
	if want := []string{"scene:lab", "scene:toy kitchen"}; !slices.Equal(got, want) {
		t.Errorf("sceneTags = %q, want %q", got, want)
	}
}

func TestExpectedEpisodes(t *testing.T) {
	ds, err := OpenRLDS([]string{"../../../../shared/rlds-samples/bridge_dataset"}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := ExpectedEpisodes(ds, 0); n != 50 {
		t.Errorf("expected %d episodes, want 50 (25 train + 25 val)", n)
	}
	if n := ExpectedEpisodes(ds, 7); n != 7 {
		t.Errorf("with limit 7: %d", n)
	}
	// Consecutive shards of one folder are one dataset, of another
	// folder another.
	files := []string{
		"../../../../shared/rlds-samples/bridge_dataset/1.0.0/bridge_dataset-train.tfrecord-00000-of-00001",
		"../../../../shared/rlds-samples/bridge_dataset/1.0.0/bridge_dataset-val.tfrecord-00000-of-00001",
		"../../../../shared/rlds-samples/bridge/1.0.0/bridge-train.tfrecord-00000-of-00001",
	}
	ds, err = OpenRLDS(files, ImportOptions{})
	if err != nil || len(ds) != 2 || len(ds[0].Shards) != 2 || ds[1].Name != "bridge" {
		t.Fatalf("%d datasets, %v", len(ds), err)
	}
	if n := ExpectedEpisodes(ds, 0); n != 51 {
		t.Errorf("expected %d episodes, want 51", n)
	}
}
