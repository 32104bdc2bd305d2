package particle

import "sync/atomic"

// Written is how many bytes (keys and values) a store's committed
// batches wrote to Badger, by table, since it was opened. A node's or
// edge's record is written whole each time a batch changes it, so these
// grow faster than the graph: their ratio to the records ingested is the
// write amplification that a commit pays for. An embedding, stored apart
// and written only when it changes (format 3), counts with its node or
// edge.
type Written struct {
	Nodes    int64 `json:"nodes"`
	Edges    int64 `json:"edges"`
	Episodes int64 `json:"episodes"`
	Steps    int64 `json:"steps"`
	Other    int64 `json:"other"` // aliases, spans, sessions, records, marks, metadata
	// EpisodeRecords counts the episode records written (a count, not
	// bytes). A batch writes an episode's record once however many of
	// its steps it holds, so steps over this is how many steps of an
	// episode a batch holds on average: the fewer, the more of an
	// episode's records (its own, its nodes', its edges') each step
	// rewrites.
	EpisodeRecords int64 `json:"episode_records"`
	// Keys counts the keys set (a count, not bytes; deletions apart):
	// Badger's commit inserts each into its memtable and logs it,
	// whatever its size, so its cost follows this as much as the bytes.
	Keys int64 `json:"keys"`
}

// Total is the bytes of every table (EpisodeRecords and Keys, counts,
// apart).
func (w Written) Total() int64 { return w.Nodes + w.Edges + w.Episodes + w.Steps + w.Other }

// ByTable is w by table name: nodes, edges, episodes, steps, other.
func (w Written) ByTable() map[string]int64 {
	return map[string]int64{"nodes": w.Nodes, "edges": w.Edges, "episodes": w.Episodes, "steps": w.Steps, "other": w.Other}
}

// Sub is w less an earlier reading.
func (w Written) Sub(earlier Written) Written {
	return Written{Nodes: w.Nodes - earlier.Nodes, Edges: w.Edges - earlier.Edges, Episodes: w.Episodes - earlier.Episodes,
		Steps: w.Steps - earlier.Steps, Other: w.Other - earlier.Other, EpisodeRecords: w.EpisodeRecords - earlier.EpisodeRecords,
		Keys: w.Keys - earlier.Keys}
}

// add counts n bytes written under key k in k's table: a node's or
// edge's embedding, stored apart (vectorKey), in its record's.
func (w *Written) add(k []byte, n int64) {
	w.Keys++
	p := prefix(k[0])
	if p == prefixVector && len(k) > 1 {
		p = prefix(k[1])
	}
	switch p {
	case prefixNode:
		w.Nodes += n
	case prefixEdge:
		w.Edges += n
	case prefixEpisode:
		w.Episodes += n
		w.EpisodeRecords++
	case prefixEpisodeEdges:
		w.Episodes += n
	case prefixStep:
		w.Steps += n
	default:
		w.Other += n
	}
}

// writtenCounter is Written, added to by every commit.
type writtenCounter struct{ nodes, edges, episodes, steps, other, episodeRecords, keys atomic.Int64 }

func (c *writtenCounter) add(w Written) {
	c.nodes.Add(w.Nodes)
	c.edges.Add(w.Edges)
	c.episodes.Add(w.Episodes)
	c.steps.Add(w.Steps)
	c.other.Add(w.Other)
	c.episodeRecords.Add(w.EpisodeRecords)
	c.keys.Add(w.Keys)
}

func (c *writtenCounter) load() Written {
	return Written{Nodes: c.nodes.Load(), Edges: c.edges.Load(), Episodes: c.episodes.Load(), Steps: c.steps.Load(), Other: c.other.Load(),
		EpisodeRecords: c.episodeRecords.Load(), Keys: c.keys.Load()}
}

// Written returns the bytes the store's committed batches have written
// since it was opened, by table.
func (s *Store) Written() Written { return s.written.load() }
