package selector

import (
	"math"
	"testing"
)

// A catalog's remembered rows must order the tools as the cosine with the
// query's averaged vector does: their scores are one positive multiple of
// it, on a word's first sighting (one product with the tools), its second
// (the row computed) and after (the row remembered), alone or mixed.
func TestSemanticRowsScoreAsTheAveragedVector(t *testing.T) {
	c := compileTest(t, loadCatalogFile(t, "../testdata/catalog.json")[""], Config{})
	if c.sem == nil || c.sem.rows == nil {
		t.Fatal("the catalog has no semantic rows; the test needs them")
	}
	rows := c.sem.rows
	texts := []struct{ name, text string }{
		{"a request in the catalog's own words", "create an issue in the repository and comment on the pull request"},
		{"a request in other words", "jot down a memo about the weather forecast for the trip"},
		{"a request mixing known and new words", "comment on the memo about the repository and the unpaid invoice"},
		{"a word said twice", "picture of a picture"},
	}
	for _, tt := range texts {
		t.Run(tt.name, func(t *testing.T) {
			words := c.contentWords(c.an.words(tt.text))
			qv := c.wv.average(words, nil)
			if qv == nil {
				t.Fatal("no known words")
			}
			for _, sighting := range []string{"first", "second", "third"} {
				got := rows.scores(c.wv.rowsOf(words, nil), make([]float64, len(rows.vecs)))
				ratio, compared := 0.0, 0
				for d, v := range rows.vecs {
					want := float64(dot(qv, v))
					if math.Abs(want) < 1e-3 {
						continue
					}
					r := got[d] / want
					if ratio == 0 {
						ratio = r
					}
					if r <= 0 || math.Abs(r-ratio) > 1e-4*ratio {
						t.Fatalf("%s sighting: tool %d scores %v, cosine %v: not the multiple %v of the others", sighting, d, got[d], want, ratio)
					}
					compared++
				}
				if compared < len(rows.vecs)/2 {
					t.Fatalf("%s sighting: only %d tools compared", sighting, compared)
				}
			}
		})
	}
	t.Run("a catalog too large to remember enough words scans instead", func(t *testing.T) {
		if newSemRows(c.wv, make([][]float32, semRowEntries/semRowMinWords+1)) != nil {
			t.Error("rows kept for a catalog that can remember fewer than semRowMinWords words")
		}
	})
}
