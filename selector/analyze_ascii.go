package selector

import (
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
)

// queryASCII is query for ASCII text, in one pass: the separator filter,
// the ASCII tokenizer, then per word what the bleve chains do to it
// (camelCase parts, lower case, stop words, stem), without a
// token stream per filter: the chains' allocations are most of a
// request's analysis. It gives exactly query's terms and words (tested
// against the bleve chains on random text, the dev sets' queries and a
// fuzz target) and declines (ok false) text that is not ASCII.
func (a *analyzer) queryASCII(text string) (terms, words []string, ok bool) {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			return nil, nil, false
		}
	}
	b := a.seps.Filter([]byte(text))
	// A word is about six bytes of text: one allocation each for the
	// words and the terms in the common case.
	words = make([]string, 0, len(b)/6+1)
	terms = make([]string, 0, len(b)/6+1)
	var parts [][]byte
	for i := 0; ; {
		start, end, typ, found := nextASCIIWord(b, i)
		if !found {
			break
		}
		i = end
		parts = append(parts[:0], b[start:end])
		if typ == analysis.AlphaNumeric && !oneCamelPart(b[start:end]) {
			parts = camelPartsASCII(b[start:end], parts[:0])
		}
		for _, w := range parts {
			terms, words = a.addASCIIWord(terms, words, w)
		}
	}
	return terms, words, true
}

// addASCIIWord appends one token's word, lower-cased, unless it is a stop
// word, and its stem unless empty. bleve's possessive filter, between the
// camelCase and lower-case ones, never changes an ASCII token: the
// camelCase filter has already cut "user's" into "user", "'" and "s".
func (a *analyzer) addASCIIWord(terms, words []string, w []byte) ([]string, []string) {
	var buf [64]byte
	lower := w
	for _, c := range w {
		if 'A' <= c && c <= 'Z' {
			lower = asciiLower(w, buf[:0])
			break
		}
	}
	if a.stops[string(lower)] { // no allocation: a map index by bytes
		return terms, words
	}
	word := string(lower)
	words = append(words, word)
	switch stem := a.stem.stemWord(word); {
	case len(stem) == 0:
	case string(stem) == word:
		terms = append(terms, word)
	default:
		terms = append(terms, string(stem))
	}
	return terms, words
}

// asciiLower appends ASCII w in lower case to dst.
func asciiLower(w, dst []byte) []byte {
	for _, c := range w {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// ASCII classes of bleve's camelCase filter.
const (
	camelOther = iota
	camelLower
	camelUpper
	camelDigit
)

func camelClass(c byte) int {
	switch {
	case 'a' <= c && c <= 'z':
		return camelLower
	case 'A' <= c && c <= 'Z':
		return camelUpper
	case '0' <= c && c <= '9':
		return camelDigit
	}
	return camelOther
}

// camelPartsASCII appends to parts the pieces bleve's camelCase filter
// cuts an ASCII word into: runs of lower-case letters, of digits, of other
// bytes, and upper-case runs that either stay upper case ("HTTP") or are
// one capital then lower case ("Server"), a capital before a lower-case
// letter starting a new piece ("HTTPServer" -> "HTTP", "Server").
func camelPartsASCII(w []byte, parts [][]byte) [][]byte {
	start, state := 0, camelClass(w[0])
	started, collectingUpper := false, false
	for i := 1; i < len(w); i++ {
		c := camelClass(w[i])
		var member bool
		switch state {
		case camelLower, camelDigit:
			member = c == state
		case camelOther:
			member = c == camelOther
		case camelUpper:
			letter := c == camelLower || c == camelUpper
			switch {
			case !letter:
			case c == camelUpper && i+1 < len(w) && camelClass(w[i+1]) == camelLower:
			case !started:
				started, collectingUpper, member = true, c == camelUpper, true
			default:
				member = collectingUpper == (c == camelUpper)
			}
		}
		if !member {
			parts = append(parts, w[start:i])
			start, state, started = i, c, false
		}
	}
	return append(parts, w[start:])
}
