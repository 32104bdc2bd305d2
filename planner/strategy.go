package planner

import (
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
)

// Strategies: how a request finds its seeds before the graph expansion.
const (
	// StrategyAuto picks one of the others from the request (the default).
	StrategyAuto = "auto"
	// StrategySemantic seeds from the vector index (cosine to the query).
	StrategySemantic = "semantic"
	// StrategyKeyword seeds from the bleve index (BM25 over names,
	// aliases, assertion values, instructions and CMS span text).
	StrategyKeyword = "keyword"
	// StrategyGraph seeds only from named goals, tools and entities and
	// the node names the query contains, then walks the graph.
	StrategyGraph = "graph"
	// StrategyTemporal seeds like the best of the others, keeps the
	// history (superseded facts, unless as_of asks for one instant) and
	// ranks facts by how close in time they are to as_of, the time
	// window's end, or now.
	StrategyTemporal = "temporal"
	// StrategyHybrid fuses the semantic and keyword rankings by
	// reciprocal rank.
	StrategyHybrid = "hybrid"
)

// Strategies lists the strategies a request may name.
var Strategies = []string{StrategyAuto, StrategySemantic, StrategyKeyword, StrategyGraph, StrategyTemporal, StrategyHybrid}

// preference breaks ties between equally suited strategies: the more
// specific first.
var preference = []string{StrategyTemporal, StrategyKeyword, StrategyHybrid, StrategyGraph, StrategySemantic}

// Signals are what the auto strategy reads off a request.
type Signals struct {
	// Phrases are the query's quoted phrases.
	Phrases []string `json:"phrases,omitempty"`
	// Identifiers are identifier-like tokens: with a digit, or words
	// joined by - _ . / : # ("SN-4471-XQ", "ep-alpha-0001").
	Identifiers []string `json:"identifiers,omitempty"`
	// Words are the other content words (stop and question words left out).
	Words []string `json:"words,omitempty"`
	// TemporalCues are words asking about time ("when", "changed", "as of").
	TemporalCues []string `json:"temporal_cues,omitempty"`
	AsOf         bool     `json:"as_of,omitempty"`
	TimeWindow   bool     `json:"time_window,omitempty"`
	// Named counts the goals, tools and entities the request names.
	Named int `json:"named,omitempty"`
	// KnownName is set when the whole query is a node's name or alias.
	KnownName string `json:"known_name,omitempty"`
	Vector    bool   `json:"vector,omitempty"`
	// KeywordIndex says whether this planner has a keyword index.
	KeywordIndex bool `json:"keyword_index"`
}

// Suggestion is one strategy rated for a request.
type Suggestion struct {
	Strategy string   `json:"strategy"`
	Score    float64  `json:"score"`
	Reasons  []string `json:"reasons"`
}

// Advice is the answer to POST /v1/strategies: the strategy auto would
// choose, and every strategy rated, best first.
type Advice struct {
	Chosen      string       `json:"chosen"`
	Reason      string       `json:"reason"`
	Suggestions []Suggestion `json:"suggestions"`
	Signals     Signals      `json:"signals"`
}

// stopWords are left out of a query's content words: function words
// and question words.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "on": true, "at": true,
	"by": true, "for": true, "with": true, "from": true, "into": true, "onto": true, "and": true,
	"or": true, "is": true, "are": true, "was": true, "were": true, "be": true, "it": true,
	"its": true, "this": true, "that": true, "then": true, "what": true, "where": true,
	"which": true, "who": true, "how": true, "why": true, "do": true, "does": true, "did": true,
	"i": true, "we": true, "me": true, "my": true, "our": true, "there": true, "any": true,
	"about": true, "show": true, "tell": true, "find": true, "all": true, "now": true,
}

// temporalCues are words that ask about time.
var temporalCues = map[string]bool{
	"when": true, "history": true, "historically": true, "changed": true, "change": true,
	"changes": true, "before": true, "after": true, "since": true, "until": true,
	"previously": true, "earlier": true, "ago": true, "yesterday": true, "formerly": true,
	"timeline": true, "superseded": true, "replaced": true,
}

// readSignals reads the signals of a request. known reports whether a
// text is the name or alias of a node (nil: never).
func readSignals(req *Request, known func(string) bool, keywordIndex bool) Signals {
	s := Signals{
		AsOf: req.AsOf != nil, TimeWindow: req.TimeWindow != nil,
		Named: len(req.Goals) + len(req.Tools) + len(req.Entities), Vector: len(req.Vector) > 0,
		KeywordIndex: keywordIndex,
	}
	phrases, rest := keyword.Phrases(req.Query)
	s.Phrases = phrases
	if strings.Contains(strings.ToLower(rest), "as of") {
		s.TemporalCues = append(s.TemporalCues, "as of")
	}
	for _, f := range strings.Fields(rest) {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		lw := strings.ToLower(w)
		switch {
		case w == "":
		case isIdentifier(w):
			s.Identifiers = append(s.Identifiers, w)
		case temporalCues[lw]:
			s.TemporalCues = append(s.TemporalCues, lw)
		case stopWords[lw]:
		default:
			s.Words = append(s.Words, lw)
		}
	}
	// Only a short query can be a name (names are a few words): a
	// question needs no look-up.
	q := strings.TrimSpace(req.Query)
	if q != "" && known != nil && len(s.Phrases) == 0 && len(s.Identifiers) == 0 && len(strings.Fields(q)) <= maxNameWords && known(q) {
		s.KnownName = particle.Canonical(q)
	}
	return s
}

// isIdentifier reports whether a token looks like an id or a serial
// number rather than a word: it has a digit, or letters joined by
// - _ . / : #.
func isIdentifier(w string) bool {
	if strings.IndexFunc(w, unicode.IsDigit) >= 0 {
		return true
	}
	return strings.ContainsAny(strings.Trim(w, "-_./:#"), "-_./:#")
}

// Suggest rates every strategy for the signals, best first.
func Suggest(s Signals) []Suggestion {
	exact := len(s.Phrases) + len(s.Identifiers)
	free := len(s.Words) > 0
	quoted := func() string {
		return "exact tokens " + strings.Join(slices.Concat(quote(s.Phrases), s.Identifiers), ", ")
	}
	out := make([]Suggestion, 0, len(Strategies)-1)
	add := func(name string, score float64, reasons ...string) {
		out = append(out, Suggestion{Strategy: name, Score: score, Reasons: reasons})
	}

	switch {
	case free || s.Vector:
		add(StrategySemantic, 0.6, "free text or a vector: cosine similarity also finds paraphrases")
	case exact > 0:
		add(StrategySemantic, 0.3, "only exact tokens: embeddings blur serial numbers and ids")
	default:
		add(StrategySemantic, 0.2, "no free text to embed beyond the names")
	}

	switch {
	case !s.KeywordIndex:
		add(StrategyKeyword, 0, "this planner has no keyword index")
		add(StrategyHybrid, 0, "this planner has no keyword index")
	case exact > 0 && !free:
		add(StrategyKeyword, 0.9, quoted()+": BM25 matches them whole")
		add(StrategyHybrid, 0.6, quoted()+": fusion adds semantic neighbours")
	case exact > 0:
		add(StrategyKeyword, 0.7, quoted()+": BM25 matches them whole")
		add(StrategyHybrid, 0.85, quoted()+" and free text: reciprocal-rank fusion of BM25 and semantic")
	case free:
		add(StrategyKeyword, 0.35, "plain words: BM25 works but misses paraphrases")
		add(StrategyHybrid, 0.5, "free text: fusion adds exact word matches to semantic")
	default:
		add(StrategyKeyword, 0, "no words to match")
		add(StrategyHybrid, 0, "no words to match")
	}

	switch {
	case s.KnownName != "":
		add(StrategyGraph, 0.88, "the query names the node "+quote1(s.KnownName)+": walk from it")
	case s.Named > 0 && !free && exact == 0 && !s.Vector:
		add(StrategyGraph, 0.9, "only named goals, tools or entities: walk the graph from them")
	case s.Named > 0:
		add(StrategyGraph, 0.45, "named goals, tools or entities seed a walk")
	default:
		add(StrategyGraph, 0.1, "nothing named to start a walk from")
	}

	switch {
	case s.AsOf || s.TimeWindow:
		add(StrategyTemporal, 0.95, "as_of or time_window: the facts valid then, ranked by time")
	case len(s.TemporalCues) > 0:
		add(StrategyTemporal, 0.92, "asks about time ("+strings.Join(s.TemporalCues, ", ")+"): keep the history, rank by time")
	default:
		add(StrategyTemporal, 0.05, "no time in the request")
	}

	rank := func(name string) int { return slices.Index(preference, name) }
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return rank(out[i].Strategy) < rank(out[j].Strategy)
	})
	return out
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote1(s)
	}
	return out
}

func quote1(s string) string { return `"` + s + `"` }

// advise rates the strategies for req and says which auto chooses.
func advise(req *Request, known func(string) bool, keywordIndex bool) Advice {
	sig := readSignals(req, known, keywordIndex)
	sug := Suggest(sig)
	return Advice{Chosen: sug[0].Strategy, Reason: strings.Join(sug[0].Reasons, "; "), Suggestions: sug, Signals: sig}
}

// seeding is how a temporal request finds its seeds: the best strategy
// that is not temporal.
func seeding(sug []Suggestion) string {
	for _, s := range sug {
		if s.Strategy != StrategyTemporal && s.Score > 0 {
			return s.Strategy
		}
	}
	return StrategySemantic
}
