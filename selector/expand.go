package selector

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// neighboursBin is the word vectors' nearest-neighbour table (top 3 per
// word by cosine, ≥ 0.6), derived from wordvec.bin by
// `go run ./selector/internal/mkvectors -neighbours` (format there).
//
//go:embed neighbours.bin
var neighboursBin []byte

// Query expansion by word-vector neighbours: a query word's close
// neighbours that occur in the catalog join the lexical query at a low
// weight, bridging vocabulary gaps ("scientific" -> "research"). It helps
// chatty requests and costs queries that already name a tool's own
// words, for which extra terms only add noise (selector/README.md,
// rounds 4 and 5). Words among the 500 most frequent are never expanded:
// their neighbours are other function words.
const (
	expandWeight = 0.3 // a neighbour's query weight per unit of cosine
	expandMinSim = 0.7 // the table keeps ≥ 0.6; below 0.7 mostly noise
	// expandMaxCover gates expansion: a search is expanded only when its
	// unexpanded lexical winner covers less than this share of the
	// query's idf mass (coverage), at any query length. A keyword query
	// whose words a tool already has is left alone. Search only:
	// gating Preselect the same way did not help (selector/README.md,
	// round 5, has the gates measured).
	expandMaxCover = 0.7
)

// neighbour is one entry of the table.
type neighbour struct {
	row uint16
	sim float32
}

// neighbourTable maps a word row to its neighbours (rows of the same word
// vectors). It is immutable.
type neighbourTable struct {
	k    int
	rows [][]neighbour
}

// loadNeighbours parses the embedded table once per process.
var loadNeighbours = sync.OnceValues(func() (*neighbourTable, error) {
	return parseNeighbours(neighboursBin)
})

func parseNeighbours(b []byte) (*neighbourTable, error) {
	if len(b) < 10 || string(b[:5]) != "TGNB1" {
		return nil, errors.New("neighbour table: bad header")
	}
	n := int(binary.LittleEndian.Uint32(b[5:]))
	k := int(b[9])
	body := b[10:]
	if len(body) != n*k*3 {
		return nil, fmt.Errorf("neighbour table: %d bytes, want %d", len(body), n*k*3)
	}
	t := &neighbourTable{k: k, rows: make([][]neighbour, n)}
	for r := range n {
		for j := range k {
			e := body[(r*k+j)*3:]
			row := binary.LittleEndian.Uint16(e)
			if row == 0xFFFF || int(row) >= n {
				continue
			}
			t.rows[r] = append(t.rows[r], neighbour{row: row, sim: float32(e[2]) / 255})
		}
	}
	return t, nil
}

// expansion returns the terms to add to a query of words: each word's
// neighbours with cosine ≥ expandMinSim, analysed like the index, that
// some tool of the catalog has and the query has not, weighted
// expandWeight × cosine. It returns nil without word vectors.
func (c *Catalog) expansion(words []string, have map[string]float64) map[string]float64 {
	if c.wv == nil || c.nbs == nil {
		return nil
	}
	var out map[string]float64
	for _, w := range words {
		row, ok := c.wv.index[w]
		if !ok || int(row) >= len(c.nbs.rows) {
			continue
		}
		for _, nb := range c.nbs.rows[row] {
			if nb.sim < expandMinSim {
				continue
			}
			for _, t := range c.an.wordTerms(c.wv.words[nb.row]) {
				if _, dup := have[t]; dup || c.fields.df(t) == 0 {
					continue
				}
				if out == nil {
					out = map[string]float64{}
				}
				if wt := expandWeight * float64(nb.sim); wt > out[t] {
					out[t] = wt
				}
			}
		}
	}
	return out
}

// expandWeak returns q plus the neighbours of its content words (words;
// expansion) when the unexpanded lexical winner is weak: no hit, or one
// that covers less than expandMaxCover of the query's idf mass. It returns
// nil to keep q. It gates on the winner's weakness, not on the query's
// length, so that short queries that miss are expanded and keyword
// queries whose words a tool already has are left alone.
func (c *Catalog) expandWeak(q *lexQuery, words []string, lex lexScores) *lexQuery {
	if len(lex.order) > 0 && c.coverage(q, lex.order[0]) >= expandMaxCover {
		return nil
	}
	x := c.expansion(words, q.terms)
	if len(x) == 0 {
		return nil
	}
	nq := &lexQuery{terms: make(map[string]float64, len(q.terms)+len(x)), raw: q.raw, nbr: q.nbr}
	for t, w := range q.terms {
		nq.terms[t] = w
	}
	for t, w := range x {
		nq.terms[t] = w
	}
	return nq
}
