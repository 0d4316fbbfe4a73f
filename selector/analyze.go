package selector

import (
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	uaxtok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// analyzer turns text into index terms with bleve's own analysis chain:
// unicode (UAX#29) tokenisation, CJK width folding and bigrams, English
// possessives, lower case, English stop words and the snowball stemmer.
// Identifiers are split before analysis (see splitIdent) because UAX#29
// keeps "get_user" and "getUser" as one word. It is stateless after
// construction and safe for concurrent use.
type analyzer struct {
	stemmed analysis.Analyzer // index and query terms
	plain   analysis.Analyzer // unstemmed words, for word vectors
	stops   analysis.TokenMap
}

func newAnalyzer() (*analyzer, error) {
	stops := analysis.NewTokenMap()
	if err := stops.LoadBytes(en.EnglishStopWords); err != nil {
		return nil, err
	}
	tok := uaxtok.NewUnicodeTokenizer()
	stopF := stop.NewStopTokensFilter(stops)
	return &analyzer{
		stemmed: &analysis.DefaultAnalyzer{
			Tokenizer: tok,
			TokenFilters: []analysis.TokenFilter{
				cjk.NewCJKWidthFilter(),
				en.NewPossessiveFilter(),
				lowercase.NewLowerCaseFilter(),
				cjk.NewCJKBigramFilter(false),
				stopF,
				en.NewEnglishStemmerFilter(),
			},
		},
		plain: &analysis.DefaultAnalyzer{
			Tokenizer: tok,
			TokenFilters: []analysis.TokenFilter{
				en.NewPossessiveFilter(),
				lowercase.NewLowerCaseFilter(),
				stopF,
			},
		},
		stops: stops,
	}, nil
}

// terms returns the stemmed index terms of text, identifiers split.
func (a *analyzer) terms(text string) []string {
	return analyze(a.stemmed, splitIdent(text))
}

// words returns the unstemmed, stop-filtered words of text.
func (a *analyzer) words(text string) []string {
	return analyze(a.plain, splitIdent(text))
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

// splitIdent makes identifiers readable to a word tokenizer: it breaks
// camelCase and PascalCase (keeping acronyms: "HTTPServer" -> "HTTP Server"),
// and turns _ . - / : into spaces. Ordinary prose passes through unchanged
// apart from those separators.
func splitIdent(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	rs := []rune(s)
	for i, r := range rs {
		switch r {
		case '_', '.', '-', '/', ':', '\\', '#', '@':
			b.WriteByte(' ')
			continue
		}
		if i > 0 && unicode.IsUpper(r) {
			p := rs[i-1]
			next := rune(0)
			if i+1 < len(rs) {
				next = rs[i+1]
			}
			if unicode.IsLower(p) || unicode.IsDigit(p) ||
				(unicode.IsUpper(p) && unicode.IsLower(next)) {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

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
