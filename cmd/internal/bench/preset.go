package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Preset sizes a fleet workload. Every count is exact except the edges,
// which follow from the rest (about 90 per episode: the events, the
// entities each episode observes, tool use, goals, spans).
type Preset struct {
	Name string `json:"name"`
	// Robots stream episodes; Sites are the labs they work in (each
	// robot works at one; each site has its own objects).
	Robots int `json:"robots"`
	Sites  int `json:"sites"`
	// Episodes in all, StepsPerEpisode each (10 Hz).
	Episodes        int `json:"episodes"`
	StepsPerEpisode int `json:"steps_per_episode"`
	// EventsPerStep is the mean number of subject/predicate/object events
	// a step carries, each with its own clustered embedding and each a
	// new edge.
	EventsPerStep float64 `json:"events_per_step"`
	// Entities is the object vocabulary (split among the sites);
	// EntitiesPerEpisode of them are in view in one episode.
	Entities           int `json:"entities"`
	EntitiesPerEpisode int `json:"entities_per_episode"`
	Tools              int `json:"tools"`
	Concepts           int `json:"concepts"`
	// Clusters × SubClusters is the topic structure of the embeddings.
	Clusters    int `json:"clusters"`
	SubClusters int `json:"sub_clusters"`
	// Queries is the number of planner queries (with ground truth).
	Queries int `json:"queries"`
	// Days is the fleet time the episodes spread over.
	Days int `json:"days"`
}

// Presets are the standard workloads: micro for tests, small (about 20k
// edges), medium (about 200k edges, the targets' size) and large (about
// 1M edges, for the reopen target).
var Presets = []Preset{
	{Name: "micro", Robots: 4, Sites: 2, Episodes: 12, StepsPerEpisode: 10, EventsPerStep: 1.5,
		Entities: 120, EntitiesPerEpisode: 8, Tools: 3, Concepts: 10, Clusters: 4, SubClusters: 4, Queries: 40, Days: 2},
	{Name: "small", Robots: 20, Sites: 4, Episodes: 220, StepsPerEpisode: 40, EventsPerStep: 1.5,
		Entities: 1000, EntitiesPerEpisode: 12, Tools: 6, Concepts: 40, Clusters: 16, SubClusters: 8, Queries: 1000, Days: 14},
	{Name: "medium", Robots: 50, Sites: 8, Episodes: 2200, StepsPerEpisode: 40, EventsPerStep: 1.5,
		Entities: 5000, EntitiesPerEpisode: 12, Tools: 8, Concepts: 80, Clusters: 32, SubClusters: 16, Queries: 1000, Days: 14},
	{Name: "large", Robots: 200, Sites: 16, Episodes: 11000, StepsPerEpisode: 40, EventsPerStep: 1.5,
		Entities: 25000, EntitiesPerEpisode: 12, Tools: 12, Concepts: 160, Clusters: 64, SubClusters: 16, Queries: 1000, Days: 30},
}

// PresetNamed returns the preset called name.
func PresetNamed(name string) (Preset, error) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		names := make([]string, len(Presets))
		for j, p := range Presets {
			names[j] = p.Name
		}
		return Preset{}, fmt.Errorf("%w: unknown preset %q (have %s)", ErrInvalid, name, strings.Join(names, ", "))
	}
	return Presets[i], nil
}

// Steps is the number of steps of the workload.
func (p Preset) Steps() int { return p.Episodes * p.StepsPerEpisode }

// span is the fleet time the episodes spread over.
func (p Preset) span() time.Duration { return time.Duration(p.Days) * 24 * time.Hour }

// Dims is the embedding dimension of every workload (the daemon's
// default embedder's).
const Dims = 384

// fleetStart is when every workload's fleet time begins.
var fleetStart = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// stepEvery is the step period (10 Hz control).
const stepEvery = 100 * time.Millisecond
