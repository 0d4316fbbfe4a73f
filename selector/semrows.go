package selector

// The offline semantic score of a tool is the cosine between its vector
// and the query's rarity-weighted sum of word vectors. Only the order of
// the tools matters (the signal enters the fusion by rank), and the
// query's norm is the same for every tool, so a tool's score is the sum
// over the query's words of that word's product with the tool's vector: a
// row per word, which a catalog remembers. A request's words then cost a
// few additions per tool instead of a product of the whole vector with
// every tool (a quarter of a preselection at 200 tools, and it grows with
// the catalog). As with max-sim's rows, a word's first sighting goes into
// one product with the tools as before and its row is computed when it
// comes back. Rows hold products of public word vectors with the
// catalog's tool vectors: nothing of a request's text.
const (
	// semRowEntries bounds the products a catalog remembers, 4 bytes
	// each: 1 MB.
	semRowEntries = 1 << 18
	// semRowWords bounds the words of a small catalog.
	semRowWords = 4096
	// semRowMinWords is the fewest words worth remembering: a row costs
	// as much as the whole query's product with every tool, so a catalog
	// that could keep fewer words (more than 512 tools) would compute
	// rows it soon forgets, and scans as before.
	semRowMinWords = 512
)

// semRows scores tools for a query's words with the offline vectors.
type semRows struct {
	wv   *WordVectors
	vecs [][]float32          // the catalog's tool vectors (unit, nil allowed)
	rows *wordMemo[[]float32] // each word's rarity-weighted product with each tool vector
}

// newSemRows returns the rows of a catalog's tool vectors, or nil when
// the catalog is too large to remember enough words.
func newSemRows(wv *WordVectors, vecs [][]float32) *semRows {
	words := min(semRowWords, semRowEntries/max(len(vecs), 1))
	if words < semRowMinWords {
		return nil
	}
	return &semRows{wv: wv, vecs: vecs, rows: newWordMemo(words, sliceBytes[float32])}
}

// scores returns each tool's score for the words of rows (rowsOf), in
// the order the cosine with their averaged vector gives (a positive
// multiple of it), in buf (one slot per tool, overwritten), or nil when no
// word is known.
func (s *semRows) scores(rows []int32, buf []float64) []float64 {
	wv := s.wv
	var sims []float64
	var acc []float32 // the words seen for the first time
	for _, r := range rows {
		if sims == nil {
			sims = buf[:len(s.vecs)]
			clear(sims)
		}
		if row, ok := s.row(r); ok {
			for d, x := range row {
				sims[d] += float64(x)
			}
			continue
		}
		if acc == nil {
			acc = make([]float32, wv.dims)
		}
		wv.addRow(acc, r, 1)
	}
	if acc != nil {
		for d, v := range s.vecs {
			if v != nil {
				sims[d] += float64(dot(acc, v))
			}
		}
	}
	return sims
}

// row returns word-vector row r's products with the tool vectors if the
// catalog has seen the word before (wordMemo).
func (s *semRows) row(r int32) ([]float32, bool) {
	return s.rows.get(r, func() []float32 {
		q := make([]float32, s.wv.dims)
		s.wv.addRow(q, r, 1)
		vals := make([]float32, len(s.vecs))
		for d, v := range s.vecs {
			if v != nil {
				vals[d] = dot(q, v)
			}
		}
		return vals
	})
}

// wordVectors returns the word vectors the catalog's semantic rows and
// max-sim read (nil without either).
func (c *Catalog) wordVectors() *WordVectors {
	if c.wv != nil {
		return c.wv
	}
	if c.sem != nil && c.sem.rows != nil {
		return c.sem.rows.wv
	}
	return nil
}

// wordRows appends to buf the rows in wv of words' known words, in order,
// repeats kept (wv.rowsOf), reading them from the analyser's memo, which
// the analysis of the same words has just read, where it holds them: the
// semantic signal and max-sim both read a request's words by row.
func (c *Catalog) wordRows(wv *WordVectors, words []string, buf []int32) []int32 {
	memo := c.an.stem
	if memo.wv != wv {
		return wv.rowsOf(words, buf)
	}
	for _, w := range words {
		r, ok := memo.row(w)
		if !ok {
			r, ok = wv.index[w]
			if !ok {
				r = -1
			}
		}
		if r >= 0 {
			buf = append(buf, r)
		}
	}
	return buf
}
