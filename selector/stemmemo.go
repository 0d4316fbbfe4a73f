package selector

import (
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
)

// stemMemo remembers the stems of the words a catalog has seen. The
// snowball stemmer allocates an environment and a result per token, a
// tenth of a query's analysis when run on every word, and a catalog's
// tools and requests keep using the same few thousand words. It holds single words (the tenants
// that send the same catalog share it), never a request's text.
//
// It also keeps each word's row in the word vectors: the semantic signal
// and max-sim read a request's words by row, and the vectors' index is
// large enough that a lookup in it costs a few cache misses once a
// request's body has been through the caches (about 0.6 µs a word in
// place), where the memo's entry was read moments before by the analysis.
type stemMemo struct {
	f  analysis.TokenFilter
	wv *WordVectors // nil: rows unknown
	mu sync.RWMutex
	m  map[string]stemEntry // word -> its stem and row
	// text is the bytes of m's words and stems, and peak the most words
	// m has held (a cleared map keeps its slots), for heapBytes.
	text int64
	peak int
}

// stemEntry is a word's stem (shared, never modified) and its row in the
// word vectors (-1 when they lack the word).
type stemEntry struct {
	stem []byte
	row  int32
}

// stemMemoWords bounds the memo (~60 bytes a word); past it the memo starts
// over, so a stream of never-repeated words costs memory only up to here.
const stemMemoWords = 16384

func newStemMemo(f analysis.TokenFilter, wv *WordVectors) *stemMemo {
	return &stemMemo{f: f, wv: wv, m: map[string]stemEntry{}}
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
	e, ok := s.m[word]
	s.mu.RUnlock()
	if ok {
		return e.stem
	}
	return s.compute(&analysis.Token{Term: []byte(word), Type: analysis.AlphaNumeric}, word)
}

// row returns word's row in the word vectors from the memo: ok is false
// when the memo does not hold the word (the caller looks it up itself),
// and row is -1 when the vectors lack it.
func (s *stemMemo) row(word string) (row int32, ok bool) {
	s.mu.RLock()
	e, ok := s.m[word]
	s.mu.RUnlock()
	return e.row, ok && s.wv != nil
}

// stem returns t's stem, from the memo or the stemmer (which may change t).
func (s *stemMemo) stem(t *analysis.Token) []byte {
	s.mu.RLock()
	e, ok := s.m[string(t.Term)] // no allocation: a map index by bytes
	s.mu.RUnlock()
	if ok {
		return e.stem
	}
	return s.compute(t, string(t.Term))
}

// compute stems t, whose term is word, and remembers the stem and row.
func (s *stemMemo) compute(t *analysis.Token, word string) []byte {
	s.f.Filter(analysis.TokenStream{t})
	e := stemEntry{stem: t.Term, row: -1}
	if s.wv != nil {
		if r, ok := s.wv.index[word]; ok {
			e.row = r
		}
	}
	s.mu.Lock()
	if len(s.m) >= stemMemoWords {
		clear(s.m)
		s.text = 0
	}
	if _, dup := s.m[word]; !dup {
		s.text += strBytes(word) + roundAlloc(int64(cap(e.stem)))
	}
	s.m[word] = e
	s.peak = max(s.peak, len(s.m))
	s.mu.Unlock()
	return t.Term
}
