package keyword

import (
	"encoding/binary"
	"errors"
	"regexp"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// phraseRE finds the quoted phrases of a query.
var phraseRE = regexp.MustCompile(`"([^"]*)"`)

// Phrases returns the non-empty quoted phrases of q and q without them.
func Phrases(q string) (phrases []string, rest string) {
	for _, m := range phraseRE.FindAllStringSubmatch(q, -1) {
		if p := strings.TrimSpace(m[1]); p != "" {
			phrases = append(phrases, p)
		}
	}
	return phrases, strings.TrimSpace(phraseRE.ReplaceAllString(q, " "))
}

// buildQuery is the bleve query for q in namespace ns: every quoted
// phrase must match as a phrase; the other words match by BM25 over the
// text field and, for identifier-like tokens, the ident field (boosted:
// an exact serial number outweighs a common word). nil when q has no
// words.
func buildQuery(ns, q string) query.Query {
	phrases, rest := Phrases(q)
	if len(phrases) == 0 && rest == "" {
		return nil
	}
	nsq := bleve.NewTermQuery(ns)
	nsq.SetField(fieldNS)
	bq := bleve.NewBooleanQuery()
	bq.AddMust(nsq)
	for _, p := range phrases {
		pq := bleve.NewMatchPhraseQuery(p)
		pq.SetField(fieldText)
		bq.AddMust(pq)
	}
	if rest != "" {
		tq := bleve.NewMatchQuery(rest)
		tq.SetField(fieldText)
		iq := bleve.NewMatchQuery(rest)
		iq.SetField(fieldIdent)
		iq.SetBoost(2)
		bq.AddShould(tq, iq)
		if len(phrases) == 0 {
			bq.SetMinShould(1)
		}
	}
	return bq
}

// Fingerprints on disk: a version byte, then per document
// uvarint(len(id)) id fingerprint(8 bytes, little-endian).
const fpsV1 = 1

func encodeFingerprints(fps map[string]uint64) []byte {
	out := []byte{fpsV1}
	for id, fp := range fps {
		out = binary.AppendUvarint(out, uint64(len(id)))
		out = append(out, id...)
		out = binary.LittleEndian.AppendUint64(out, fp)
	}
	return out
}

var errBadFingerprints = errors.New("keyword: corrupt fingerprints")

func decodeFingerprints(b []byte) (map[string]uint64, error) {
	if len(b) == 0 || b[0] != fpsV1 {
		return nil, errBadFingerprints
	}
	b = b[1:]
	fps := map[string]uint64{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n+8 {
			return nil, errBadFingerprints
		}
		b = b[k:]
		id := string(b[:n])
		fps[id] = binary.LittleEndian.Uint64(b[n : n+8])
		b = b[n+8:]
	}
	return fps, nil
}
