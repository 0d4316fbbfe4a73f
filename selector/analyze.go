package selector

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	regexpchar "github.com/blevesearch/bleve/v2/analysis/char/regexp"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/camelcase"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/single"
	uaxtok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// identSeparators are the characters identifiers are joined with. UAX#29
// keeps "get_user" and "github.create" as one word, so they become spaces
// before tokenisation.
var identSeparators = regexp.MustCompile(`[_./:\\#@-]+`)

// analyzer holds the bleve analysis chains of a catalog. They are built
// from bleve's own components and handed to bleve as instances (documents
// are built with NewTextFieldCustom), so nothing is registered in bleve's
// global registry. It is stateless after construction and safe for
// concurrent use.
type analyzer struct {
	// text: identifier separators to spaces, unicode (UAX#29) tokens,
	// camelCase and letter/digit splits (alphanumeric tokens only, so CJK
	// keeps its token type), CJK width folding and bigrams, English
	// possessives, lower case, English stop words, snowball stemmer. Every
	// field but the whole name uses it, so a query is analysed once.
	text analysis.Analyzer
	// whole: the full name as one lower-case term, for queries that spell
	// a tool's name verbatim.
	whole analysis.Analyzer
	// plain: like text but neither stemmed nor CJK-bigrammed: the words the
	// word vectors know.
	plain analysis.Analyzer
}

func newAnalyzer() (*analyzer, error) {
	stops := analysis.NewTokenMap()
	if err := stops.LoadBytes(en.EnglishStopWords); err != nil {
		return nil, fmt.Errorf("loading stop words: %w", err)
	}
	seps := regexpchar.New(identSeparators, []byte(" "))
	tok := uaxtok.NewUnicodeTokenizer()
	camel := alnumOnly{camelcase.NewCamelCaseFilter()}
	stopF := stop.NewStopTokensFilter(stops)
	lower := lowercase.NewLowerCaseFilter()
	return &analyzer{
		text: &analysis.DefaultAnalyzer{
			CharFilters: []analysis.CharFilter{seps},
			Tokenizer:   tok,
			TokenFilters: []analysis.TokenFilter{
				camel,
				cjk.NewCJKWidthFilter(),
				en.NewPossessiveFilter(),
				lower,
				cjk.NewCJKBigramFilter(false),
				stopF,
				en.NewEnglishStemmerFilter(),
			},
		},
		whole: &analysis.DefaultAnalyzer{
			Tokenizer:    single.NewSingleTokenTokenizer(),
			TokenFilters: []analysis.TokenFilter{lower},
		},
		plain: &analysis.DefaultAnalyzer{
			CharFilters: []analysis.CharFilter{seps},
			Tokenizer:   tok,
			TokenFilters: []analysis.TokenFilter{
				camel,
				en.NewPossessiveFilter(),
				lower,
				stopF,
			},
		},
	}, nil
}

// alnumOnly applies a token filter to alphanumeric tokens only. bleve's
// camelCase filter rebuilds every token it sees with the zero token type,
// which would hide ideographic tokens from the CJK bigram filter.
type alnumOnly struct{ f analysis.TokenFilter }

func (a alnumOnly) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in)+4)
	for i, t := range in {
		if t.Type != analysis.AlphaNumeric {
			out = append(out, t)
			continue
		}
		split := a.f.Filter(in[i : i+1])
		for _, s := range split {
			s.Type = t.Type
		}
		out = append(out, split...)
	}
	return out
}

// terms returns the stemmed index terms of text (the text chain).
func (a *analyzer) terms(text string) []string {
	return analyze(a.text, text)
}

// words returns the unstemmed, stop-filtered words of text.
func (a *analyzer) words(text string) []string {
	return analyze(a.plain, text)
}

func analyze(an analysis.Analyzer, text string) []string {
	if text == "" {
		return nil
	}
	ts := an.Analyze([]byte(text))
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if len(t.Term) > 0 {
			out = append(out, string(t.Term))
		}
	}
	return out
}

// splitIdent makes an identifier readable as words ("repo_mergePR" ->
// "repo merge PR") for texts that are not analysed by bleve (the embedding
// text of a remote embedder).
func splitIdent(s string) string {
	s = identSeparators.ReplaceAllString(s, " ")
	var b strings.Builder
	b.Grow(len(s) + 8)
	rs := []rune(s)
	for i, r := range rs {
		if i > 0 && isUpper(r) {
			p := rs[i-1]
			next := rune(0)
			if i+1 < len(rs) {
				next = rs[i+1]
			}
			if isLower(p) || (p >= '0' && p <= '9') || (isUpper(p) && isLower(next)) {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isUpper(r rune) bool { return unicode.IsUpper(r) }
func isLower(r rune) bool { return unicode.IsLower(r) }

// namePrefix returns a tool name's server or namespace part: what precedes
// the last "__", ".", ":" or "/", or else the first "_" segment when the name
// has several. It returns "" when the name has no such part.
func namePrefix(name string) string {
	for _, sep := range []string{"__", ".", ":", "/"} {
		if i := strings.LastIndex(name, sep); i > 0 {
			return strings.Trim(name[:i], "_.:/")
		}
	}
	if i := strings.IndexByte(name, '_'); i > 0 && i < len(name)-1 {
		return name[:i]
	}
	return ""
}
