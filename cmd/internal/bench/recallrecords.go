package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// RecallFile is the file of RunOptions.CallsDir that receives the recall
// pass's queries, one recallRecord per line.
const RecallFile = "recall.jsonl"

// recallRecord is one query of the recall pass: how much of the exact
// top 10 the index's prefilter found, under which constraints, with how
// much work, and what it missed. It shows where recall is lost, which a
// mean cannot: the forty-ninth round found the selective queries' misses
// to be nodes in the splits' catch-alls this way.
type recallRecord struct {
	Query     int     `json:"query"`
	Recall    float64 `json:"recall_at_10"`
	Admitted  float64 `json:"admitted"` // the share of the workload's events its filters admit
	SameAgent bool    `json:"same_agent,omitempty"`
	Far       bool    `json:"far,omitempty"` // its exact 10th best scores below FarScore
	Window    bool    `json:"window,omitempty"`
	Location  bool    `json:"location,omitempty"`
	Lists     int     `json:"lists,omitempty"`
	Scored    int     `json:"scored,omitempty"`
	Asked     int     `json:"asked,omitempty"`
	Allowed   int     `json:"allowed,omitempty"`
	// Found and Exact are the index's and exact search's top 10, as
	// [seq, score] pairs, best first.
	Found [][2]float64 `json:"found"`
	Exact [][2]float64 `json:"exact"`
	// Missed names what each exact hit the index did not find is:
	// "node", "episode" or "edge:TYPE", in the exact order.
	Missed []string `json:"missed,omitempty"`
}

// recallLog collects the recall pass's records and counts what its
// queries missed.
type recallLog struct {
	records []recallRecord
	missed  int
	nodes   int // of missed, how many are nodes
}

// add records query i: the index found found, exact search exact (each
// best first), under the filter f after a search that did work st.
func (l *recallLog) add(store *particle.Store, i int, rc, admitted float64, sameAgent bool, f *wave.Filter, st wave.SearchStats, found, exact []wave.Hit) {
	rec := recallRecord{Query: i, Recall: rc, Admitted: admitted, SameAgent: sameAgent, Far: isFar(exact),
		Lists: st.Lists, Scored: st.Scored, Asked: st.Asked, Allowed: st.Allowed, Found: scoredPairs(found, 10), Exact: scoredPairs(exact, 10)}
	if f != nil {
		rec.Window, rec.Location = f.From != 0 || f.To != 0, f.Site != 0
	}
	got := ids(found, 10)
	store.Read(func(rd particle.Reader) {
		for _, h := range exact[:min(10, len(exact))] {
			if slices.Contains(got, h.ID) {
				continue
			}
			kind := "unknown"
			e := rd.EdgeBySeq(h.ID)
			switch {
			case e != nil:
				kind = "edge:" + string(e.Type)
			case rd.NodeBySeq(h.ID) != nil:
				kind = "node"
				l.nodes++
			case rd.EpisodeBySeq(h.ID) != nil:
				kind = "episode"
			}
			rec.Missed = append(rec.Missed, kind)
			l.missed++
		}
	})
	l.records = append(l.records, rec)
}

// scoredPairs is the first k of hs as [id, score] pairs.
func scoredPairs(hs []wave.Hit, k int) [][2]float64 {
	out := make([][2]float64, 0, min(k, len(hs)))
	for _, h := range hs[:min(k, len(hs))] {
		out = append(out, [2]float64{float64(h.ID), float64(h.Score)})
	}
	return out
}

// write writes the records to dir/RecallFile.
func (l *recallLog) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b []byte
	for _, rec := range l.records {
		line, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("recall record of query %d: %w", rec.Query, err)
		}
		b = append(append(b, line...), '\n')
	}
	return os.WriteFile(filepath.Join(dir, RecallFile), b, 0o644)
}
