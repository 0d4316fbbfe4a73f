package selector

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/camelcase"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/single"
	uaxtok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// identSeparators are the characters identifiers are joined with. UAX#29
// keeps "get_user" and "github.create" as one word, so each run of them
// becomes one space before tokenisation (sepFilter).
const identSeparators = "_./:\\#@-"

// analyzer holds the bleve analysis chains of a catalog. They are built
// from bleve's own components and handed to bleve as instances (documents
// are built with NewTextFieldCustom), so nothing is registered in bleve's
// global registry. It is safe for concurrent use; its only mutable state
// is the stem memo.
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
	// base is text's chain up to lower case; query runs it once and
	// finishes both text's and plain's chains from its tokens.
	base         analysis.Analyzer
	bigram, stop analysis.TokenFilter
	// stem is the chains' last filter; queryASCII also stems word by
	// word through it.
	stem *stemMemo
	// seps and stops are the other pieces queryASCII applies itself.
	seps  *sepFilter
	stops analysis.TokenMap
}

func newAnalyzer() (*analyzer, error) {
	stops := analysis.NewTokenMap()
	if err := stops.LoadBytes(en.EnglishStopWords); err != nil {
		return nil, fmt.Errorf("loading stop words: %w", err)
	}
	seps := newSepFilter(identSeparators)
	tok := asciiFirst{uaxtok.NewUnicodeTokenizer()}
	camel := alnumOnly{camelcase.NewCamelCaseFilter()}
	stopF := stop.NewStopTokensFilter(stops)
	lower := lowercase.NewLowerCaseFilter()
	bigram := cjk.NewCJKBigramFilter(false)
	wv, err := DefaultWordVectors()
	if err != nil {
		wv = nil // the memo keeps no rows; the vectors' users fail on their own
	}
	stem := newStemMemo(en.NewEnglishStemmerFilter(), wv)
	// text is base followed by the filters base leaves to its callers.
	baseFilters := []analysis.TokenFilter{camel, nonASCIIOnly{cjk.NewCJKWidthFilter()}, en.NewPossessiveFilter(), lower}
	return &analyzer{
		base: &analysis.DefaultAnalyzer{
			CharFilters:  []analysis.CharFilter{seps},
			Tokenizer:    tok,
			TokenFilters: baseFilters,
		},
		bigram: bigram,
		stop:   stopF,
		stem:   stem,
		seps:   seps,
		stops:  stops,
		text: &analysis.DefaultAnalyzer{
			CharFilters:  []analysis.CharFilter{seps},
			Tokenizer:    tok,
			TokenFilters: append(slices.Clip(baseFilters), bigram, stopF, stem),
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
		if oneCamelPart(t.Term) {
			// What the filter would return, without its parser, rune
			// buffers and term copy (most of an analysis' allocations):
			// the filter numbers each call's tokens from position 1.
			out = append(out, &analysis.Token{
				Term:     t.Term,
				Position: 1,
				Start:    t.Start,
				End:      t.Start + len(t.Term),
				Type:     t.Type,
			})
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

// nonASCIIOnly applies a token filter to tokens with non-ASCII bytes only.
// The CJK width filter folds full- and half-width forms, which an ASCII
// term cannot contain, but copies every term into runes and back.
type nonASCIIOnly struct{ f analysis.TokenFilter }

func (a nonASCIIOnly) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in))
	for i, t := range in {
		ascii := true
		for _, b := range t.Term {
			ascii = ascii && b < utf8.RuneSelf
		}
		if ascii {
			out = append(out, t)
			continue
		}
		out = append(out, a.f.Filter(in[i:i+1])...)
	}
	return out
}

// oneCamelPart reports whether bleve's camelCase filter leaves term whole:
// ASCII lower-case letters, digits, upper-case letters, or one upper-case
// letter then lower-case ones (the common words of a query or a tool text).
func oneCamelPart(term []byte) bool {
	if len(term) == 0 {
		return false
	}
	class := func(b byte) int {
		switch {
		case 'a' <= b && b <= 'z':
			return 1
		case 'A' <= b && b <= 'Z':
			return 2
		case '0' <= b && b <= '9':
			return 3
		}
		return 0
	}
	first, rest := class(term[0]), 0
	if first == 0 {
		return false
	}
	for i, b := range term[1:] {
		c := class(b)
		if c == 0 || (i > 0 && c != rest) {
			return false
		}
		rest = c
	}
	// "Ab", "ab", "AB", "12" and single characters; not "aB", "a1", "Ab1".
	return rest == 0 || rest == first || (first == 2 && rest == 1)
}

// terms returns the stemmed index terms of text (the text chain): for
// ASCII text, queryASCII's single pass, which yields the same terms.
func (a *analyzer) terms(text string) []string {
	if terms, _, ok := a.queryASCII(text); ok {
		return terms
	}
	return analyze(a.text, text)
}

// query analyses a query once for both chains: its index terms (as terms
// returns them) and its plain words (as words returns them, except that
// full-width forms are folded first, which only helps the word-vector
// lookup). ASCII text takes queryASCII's single pass, the rest
// queryChains.
func (a *analyzer) query(text string) (terms, words []string) {
	if text == "" {
		return nil, nil
	}
	if terms, words, ok := a.queryASCII(text); ok {
		return terms, words
	}
	return a.queryChains(text)
}

// queryChains is query through the bleve chains. Running the tokenizer
// and case filters once for both instead of twice saves a tenth of a
// search.
func (a *analyzer) queryChains(text string) (terms, words []string) {
	ts := a.base.Analyze([]byte(text))
	// The stop filter compacts its input in place: words get a copy.
	for _, t := range a.stop.Filter(append(analysis.TokenStream(nil), ts...)) {
		if len(t.Term) > 0 {
			words = append(words, string(t.Term))
		}
	}
	for _, t := range a.stem.Filter(a.stop.Filter(a.bigram.Filter(ts))) {
		if len(t.Term) > 0 {
			terms = append(terms, string(t.Term))
		}
	}
	return terms, words
}

// wordTerms returns the index terms of one word-vector word (plain a-z,
// as mkvectors keeps them): what terms returns for it, without the
// tokenizer and the filters that cannot change such a word.
func (a *analyzer) wordTerms(w string) []string {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return a.terms(w)
		}
	}
	ts := a.stem.Filter(a.stop.Filter(analysis.TokenStream{{Term: []byte(w), Type: analysis.AlphaNumeric}}))
	if len(ts) == 0 || len(ts[0].Term) == 0 {
		return nil
	}
	return []string{string(ts[0].Term)}
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
	s = string(newSepFilter(identSeparators).Filter([]byte(s)))
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
