package keyword

import (
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/regexp"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/registry"
	index "github.com/blevesearch/bleve_index_api"
)

// mappingVersion names the document mapping and analysis below; an index
// on disk built with another version is rebuilt.
const mappingVersion = "ctxgraph-keyword-1"

// Field names.
const (
	fieldNS    = "ns"
	fieldText  = "text"
	fieldIdent = "ident"
)

// identPattern is a word, or words joined by - _ . / : #, so that
// "SN-4471-XQ", "ep-alpha-0001" and "fixture_v2.1" are single tokens.
const identPattern = `[\p{L}\p{N}]+(?:[-_./:#][\p{L}\p{N}]+)*`

const (
	identTokenizer = "ctxgraph_ident"
	identAnalyzer  = "ctxgraph_ident"
	identOnly      = "ctxgraph_ident_only"
)

func init() {
	registry.RegisterTokenFilter(identOnly, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return identFilter{}, nil
	})
}

// identFilter keeps only identifier-like tokens: those with a digit or a
// joining punctuation mark. Plain words are the "text" field's business.
type identFilter struct{}

func (identFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := in[:0]
	for _, t := range in {
		if identLike(string(t.Term)) {
			out = append(out, t)
		}
	}
	return out
}

func identLike(s string) bool {
	return strings.ContainsAny(s, "-_./:#") || strings.IndexFunc(s, unicode.IsDigit) >= 0
}

// document is what bleve indexes for one record.
type document struct {
	NS   string `json:"ns"`
	Text string `json:"text"`
}

func newMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.IndexDynamic, im.StoreDynamic, im.DocValuesDynamic = false, false, false
	if err := im.AddCustomTokenizer(identTokenizer, map[string]any{"type": regexp.Name, "regexp": identPattern}); err != nil {
		return nil, err
	}
	if err := im.AddCustomAnalyzer(identAnalyzer, map[string]any{
		"type": custom.Name, "tokenizer": identTokenizer, "token_filters": []any{lowercase.Name, identOnly},
	}); err != nil {
		return nil, err
	}
	ns := bleve.NewKeywordFieldMapping()
	ns.Store, ns.IncludeInAll, ns.DocValues, ns.IncludeTermVectors = false, false, false, false

	text := bleve.NewTextFieldMapping()
	text.Analyzer = standard.Name
	text.Store, text.IncludeInAll, text.DocValues = false, false, false
	text.IncludeTermVectors = true // phrase queries need positions

	ident := bleve.NewTextFieldMapping()
	ident.Name = fieldIdent
	ident.Analyzer = identAnalyzer
	ident.Store, ident.IncludeInAll, ident.DocValues, ident.IncludeTermVectors = false, false, false, false

	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldNS, ns)
	dm.AddFieldMappingsAt(fieldText, text, ident)
	im.DefaultMapping = dm
	im.DefaultAnalyzer = standard.Name
	return im, im.Validate()
}
