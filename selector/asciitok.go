package selector

import (
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
)

// asciiFirst is bleve's unicode (UAX#29) tokenizer with a fast path for
// ASCII text: most queries and tool texts are ASCII, and for them the word
// rules reduce to a few byte classes, where the general segmenter (a
// state machine over every Unicode word-break class) costs a tenth of a
// preselection. The fast path returns exactly the tokens bleve's would
// (terms, offsets, positions and types; fuzzed against it), so indexing
// and queries agree whichever path a text takes.
type asciiFirst struct{ uax analysis.Tokenizer }

func (a asciiFirst) Tokenize(input []byte) analysis.TokenStream {
	for _, b := range input {
		if b >= utf8.RuneSelf {
			return a.uax.Tokenize(input)
		}
	}
	return tokenizeASCII(input)
}

// ASCII word-break classes (UAX#29 as bleve's segmenter implements it,
// Unicode 8.0): letters, digits, the connector '_' (ExtendNumLet), and
// the punctuation that joins letters (MidLetter ':', MidNumLet '.',
// Single_Quote) or digits (MidNum ',' ';', MidNumLet '.', Single_Quote)
// when it stands between two of them.
const (
	clOther = iota
	clLetter
	clDigit
	clConnector
)

func asciiClass(b byte) int {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z':
		return clLetter
	case '0' <= b && b <= '9':
		return clDigit
	case b == '_':
		return clConnector
	}
	return clOther
}

func joinsLetters(b byte) bool { return b == ':' || b == '.' || b == '\'' }
func joinsDigits(b byte) bool  { return b == ',' || b == ';' || b == '.' || b == '\'' }

// tokenizeASCII splits ASCII text into UAX#29 words: maximal runs of
// letters, digits and connectors, where one joining mark may stand
// between two letters or two digits. A word with digits and no letters is
// Numeric, any other AlphaNumeric; everything between words (spaces,
// other punctuation) is dropped, as bleve's tokenizer drops it. It counts
// the words first, so the tokens and the stream take one allocation each.
func tokenizeASCII(input []byte) analysis.TokenStream {
	n := 0
	for i := 0; ; n++ {
		var ok bool
		if _, i, _, ok = nextASCIIWord(input, i); !ok {
			break
		}
	}
	if n == 0 {
		return nil
	}
	tokens := make([]analysis.Token, n)
	out := make(analysis.TokenStream, n)
	i := 0
	for k := range tokens {
		start, end, typ, _ := nextASCIIWord(input, i)
		tokens[k] = analysis.Token{Term: input[start:end], Start: start, End: end, Position: k + 1, Type: typ}
		out[k] = &tokens[k]
		i = end
	}
	return out
}

// nextASCIIWord returns the first word at or after i: its offsets and
// type, or ok false when there is none.
func nextASCIIWord(input []byte, i int) (start, end int, typ analysis.TokenType, ok bool) {
	for i < len(input) && asciiClass(input[i]) == clOther {
		i++
	}
	if i == len(input) {
		return 0, i, 0, false
	}
	start, prev := i, clOther
	letters, digits := false, false
	for i < len(input) {
		c := asciiClass(input[i])
		if c == clOther {
			// A joining mark continues the word only between two
			// letters or two digits.
			if i+1 < len(input) {
				next := asciiClass(input[i+1])
				if (prev == clLetter && next == clLetter && joinsLetters(input[i])) ||
					(prev == clDigit && next == clDigit && joinsDigits(input[i])) {
					i += 2
					continue
				}
			}
			break
		}
		letters = letters || c == clLetter
		digits = digits || c == clDigit
		prev = c
		i++
	}
	typ = analysis.AlphaNumeric
	if digits && !letters {
		typ = analysis.Numeric
	}
	return start, i, typ, true
}
