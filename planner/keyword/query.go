package keyword

import (
	"context"
	"regexp"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/search/query"
)

// phraseRE finds the quoted phrases of a query.
var phraseRE = regexp.MustCompile(`"([^"]*)"`)

// Phrases returns the non-empty quoted phrases of q and q without them.
func Phrases(q string) (phrases []string, rest string) {
	if !strings.Contains(q, `"`) {
		return nil, strings.TrimSpace(q)
	}
	for _, m := range phraseRE.FindAllStringSubmatch(q, -1) {
		if p := strings.TrimSpace(m[1]); p != "" {
			phrases = append(phrases, p)
		}
	}
	return phrases, strings.TrimSpace(phraseRE.ReplaceAllString(q, " "))
}

// identRE splits a query into the tokens the ident field holds.
var identRE = regexp.MustCompile(identPattern)

// Common words: a plain word in more than commonFraction of the
// documents (and more than commonMin) is left out of the ranking when
// the query has rarer clauses. Its BM25 weight is near zero, and
// scoring its postings would visit a large part of the index.
const (
	commonFraction = 0.1
	commonMin      = 256
)

// compile is the bleve query for q in namespace ns (nil when q has no
// words):
//
//   - every quoted phrase must match as a phrase (text field);
//   - an identifier-like token ("SN-4471-XQ") matches whole in the ident
//     field, or as the phrase of its parts in the text field ("4471"
//     alone finds it too);
//   - every other word is a BM25 term of the text field, common words
//     left out when rarer clauses exist (see commonFraction).
//
// Phrases are required, the rest are alternatives (at least one must
// match when there is no phrase). Every clause is selective, and the
// namespace term (which matches every document of the namespace) is only
// ever a conjunct beside them: bleve's conjunction advances the rarest
// searcher and skips the others forward.
func (ix *Index) compile(ns, q string, filterNS bool) (query.Query, error) {
	phrases, rest := Phrases(q)
	var must, should, common []query.Query
	if filterNS {
		nsq := bleve.NewTermQuery(ns)
		nsq.SetField(fieldNS)
		must = append(must, nsq)
	}
	for _, p := range phrases {
		pq := bleve.NewMatchPhraseQuery(p)
		pq.SetField(fieldText)
		must = append(must, pq)
	}
	var words []string
	for _, raw := range identRE.FindAllString(rest, -1) {
		lower := strings.ToLower(raw)
		if !identLike(lower) {
			words = append(words, raw)
			continue
		}
		iq := bleve.NewTermQuery(lower)
		iq.SetField(fieldIdent)
		iq.SetBoost(2)
		pq := bleve.NewMatchPhraseQuery(raw)
		pq.SetField(fieldText)
		should = append(should, bleve.NewDisjunctionQuery(iq, pq))
	}
	if len(words) > 0 {
		tokens := ix.m.AnalyzerNamed(standard.Name).Analyze([]byte(strings.Join(words, " ")))
		df, err := ix.docFreqs(tokens)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, t := range tokens {
			term := string(t.Term)
			if seen[term] {
				continue
			}
			seen[term] = true
			tq := bleve.NewTermQuery(term)
			tq.SetField(fieldText)
			if df.common(term) {
				common = append(common, tq)
			} else {
				should = append(should, tq)
			}
		}
	}
	if len(should) == 0 {
		should = common // only common words: they are all there is
	}
	hasPhrase := len(phrases) > 0
	switch {
	case !hasPhrase && len(should) == 0:
		return nil, nil
	case !hasPhrase:
		return bleve.NewConjunctionQuery(append(must, bleve.NewDisjunctionQuery(should...))...), nil
	case len(should) == 0:
		return bleve.NewConjunctionQuery(must...), nil
	}
	// The other clauses only add to the score of what the phrases found.
	bq := bleve.NewBooleanQuery()
	bq.AddMust(bleve.NewConjunctionQuery(must...))
	bq.AddShould(should...)
	return bq, nil
}

// docFreqs are the text-field document frequencies of some terms.
type docFreqs struct {
	n  uint64
	df map[string]uint64
}

func (d docFreqs) common(term string) bool {
	f := d.df[term]
	return f > commonMin && float64(f) > commonFraction*float64(d.n)
}

func (ix *Index) docFreqs(tokens analysis.TokenStream) (docFreqs, error) {
	out := docFreqs{df: map[string]uint64{}}
	adv, err := ix.bl.Advanced()
	if err != nil {
		return out, err
	}
	r, err := adv.Reader()
	if err != nil {
		return out, err
	}
	defer r.Close()
	if out.n, err = r.DocCount(); err != nil {
		return out, err
	}
	for _, t := range tokens {
		tfr, err := r.TermFieldReader(context.Background(), t.Term, fieldText, false, false, false)
		if err != nil {
			return out, err
		}
		out.df[string(t.Term)] = tfr.Count()
		tfr.Close()
	}
	return out, nil
}
