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
// weight, bridging vocabulary gaps ("scientific" -> "research"). Measured
// on the dev sets (R@5/R@10): mcp +0.06/+0.02, metatool +0.003/+0.003,
// bfcl -0.005/-0.003 (its queries name the function's own words, so
// extra terms only add noise). Words among the 500 most frequent are
// never expanded: their neighbours are other function words.
const (
	expandWeight = 0.3 // a neighbour's query weight per unit of cosine
	expandMinSim = 0.7 // the table keeps ≥ 0.6; below 0.7 mostly noise
	// expandMinWords is the fewest content words a query needs to be
	// expanded.
	expandMinWords = 6
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
	allDF := c.fields.bleveDF[0]
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
			for _, t := range c.an.terms(c.wv.words[nb.row]) {
				if _, dup := have[t]; dup || allDF[t] == 0 {
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

// expandQuery adds the expansion of text's words to q when text reads as
// a request in prose (at least expandMinWords content words). Short
// keyword queries, such as a model's tool_search queries, already name
// what they want: expanding them cost the proxy's 833-tool agent tasks 3
// of 46 steps.
func (c *Catalog) expandQuery(q *lexQuery, text string) {
	words := c.an.words(text)
	if len(words) < expandMinWords {
		return
	}
	for t, w := range c.expansion(words, q.terms) {
		q.terms[t] = w
	}
}
