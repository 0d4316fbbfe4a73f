package selector

import (
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
)

// stemMemo remembers the stems of the words a catalog has seen. The
// snowball stemmer allocates an environment and a result per token, and it
// was a tenth of a query's analysis; a catalog's tools and requests keep
// using the same few thousand words. It holds single words (the tenants
// that send the same catalog share it), never a request's text.
type stemMemo struct {
	f  analysis.TokenFilter
	mu sync.RWMutex
	m  map[string][]byte // word -> stem; the stems are shared, never modified
}

// stemMemoWords bounds the memo (~60 bytes a word); past it the memo starts
// over, so a stream of never-repeated words costs memory only up to here.
const stemMemoWords = 16384

func newStemMemo(f analysis.TokenFilter) *stemMemo {
	return &stemMemo{f: f, m: map[string][]byte{}}
}

// Filter stems each token as f does. Tokens get the memo's shared stem:
// the stemmer is the last filter of every chain, and what follows it only
// reads terms.
func (s *stemMemo) Filter(in analysis.TokenStream) analysis.TokenStream {
	for _, t := range in {
		t.Term = s.stem(t)
	}
	return in
}

// stemWord returns word's stem, from the memo or the stemmer.
func (s *stemMemo) stemWord(word string) []byte {
	s.mu.RLock()
	stem, ok := s.m[word]
	s.mu.RUnlock()
	if ok {
		return stem
	}
	return s.compute(&analysis.Token{Term: []byte(word), Type: analysis.AlphaNumeric}, word)
}

// stem returns t's stem, from the memo or the stemmer (which may change t).
func (s *stemMemo) stem(t *analysis.Token) []byte {
	s.mu.RLock()
	stem, ok := s.m[string(t.Term)] // no allocation: a map index by bytes
	s.mu.RUnlock()
	if ok {
		return stem
	}
	return s.compute(t, string(t.Term))
}

// compute stems t, whose term is word, and remembers the stem.
func (s *stemMemo) compute(t *analysis.Token, word string) []byte {
	s.f.Filter(analysis.TokenStream{t})
	s.mu.Lock()
	if len(s.m) >= stemMemoWords {
		clear(s.m)
	}
	s.m[word] = t.Term
	s.mu.Unlock()
	return t.Term
}
