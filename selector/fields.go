package selector

import (
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search"
)

// sideFields are the fields scored next to bleve rather than inside it:
// their per-field BM25 (with bleve's formula, idf and exact lengths) is
// computed here for bleve's candidates from term counts kept at compile.
// Querying them in bleve too made the disjunction 3-4 times as many term
// searchers and cost most of a search's time; they only re-rank (every
// term of theirs is also in the all field, which retrieves).
var sideFields = [...]struct {
	field string
	boost float64
}{
	{fName, 0.5},
	{fTitle, 0.5},
	{fKeywords, 0.5},
	{fExamples, 0.3},
	{fDesc, 0.3},
	{fCategory, 0.3},
	{fPrefix, 0.2},
}

// Positions in sideFields, for code that reads one field.
const (
	sideName  = 0
	sideTitle = 1
	sideDesc  = 4
)

// bleveFields are the fields the bleve query searches, with their boosts:
// all (BM25F: every field repeated by its weight). With one field and a
// plain query bleve's disjunction stays under its heap takeover (10
// searchers) and scans its clauses as a slice, which is faster.
var bleveFields = [...]struct {
	field string
	boost float64
}{
	{fAll, 1.0},
}

// termCounts is one field of one tool: term frequencies and length.
type termCounts struct {
	tf  map[string]int32
	len int32
}

func countTerms(ts analysis.TokenStream) termCounts {
	tc := termCounts{tf: make(map[string]int32, len(ts)), len: int32(len(ts))}
	for _, t := range ts {
		tc.tf[string(t.Term)]++
	}
	return tc
}

// toolFields are a tool's analysed fields, kept for the side fields'
// scores, coverage and bleve's match counts.
type toolFields struct {
	all   termCounts
	whole string // the lower-case full name
	side  [len(sideFields)]termCounts
}

// fieldStats are a catalog's document frequencies and total lengths per
// field (the side fields and the bleve fields), the numbers BM25 needs.
type fieldStats struct {
	docs    float64
	sideDF  [len(sideFields)]map[string]int32
	sideLen [len(sideFields)]float64
	bleveDF [len(bleveFields)]map[string]int32
}

func newFieldStats(tf []toolFields) *fieldStats {
	s := &fieldStats{docs: float64(len(tf))}
	for i := range s.sideDF {
		s.sideDF[i] = map[string]int32{}
	}
	for i := range s.bleveDF {
		s.bleveDF[i] = map[string]int32{}
	}
	for _, t := range tf {
		for i, f := range t.side {
			s.sideLen[i] += float64(f.len)
			for term := range f.tf {
				s.sideDF[i][term]++
			}
		}
		for term := range t.all.tf {
			s.bleveDF[0][term]++
		}
	}
	return s
}

// bm25IDF is bleve's BM25 idf.
func bm25IDF(docs float64, df int32) float64 {
	return math.Log(1 + (docs-float64(df)+0.5)/(float64(df)+0.5))
}

// bm25TF is bleve's BM25 term-frequency part.
func bm25TF(tf, dl, avgdl float64) float64 {
	return tf * search.BM25_k1 / (tf + search.BM25_k1*(1-search.BM25_b+search.BM25_b*dl/avgdl))
}

// lexRescorer turns bleve's scores of the all+name query into the scores
// the full per-field disjunction would give: bleve's score undone of its
// query norm and coord factor, plus the side fields' BM25 sums, times the
// full query's norm and coord. It is built once per query, with each side
// field's query terms that the field has anywhere and their constant
// factors, so scoring a candidate looks up only terms that can match.
type lexRescorer struct {
	c            *Catalog
	terms        []string
	raw          []string
	bleveNorm    float64
	bleveN, allN int
	side         [len(sideFields)][]sideTerm
}

// sideTerm is a query term some tool has in a side field, with its
// constant factor: field boost × term weight × idf² (bleve's BM25 term
// score is query weight × idf × tf part, its query weight boost × idf).
type sideTerm struct {
	term string
	coef float64
}

func (c *Catalog) newRescorer(q *lexQuery, terms []string) *lexRescorer {
	r := &lexRescorer{c: c, terms: terms, raw: q.raw}
	var bleveSq float64
	fs := c.fields
	for _, t := range terms {
		w := q.terms[t]
		for j, bf := range bleveFields {
			if c.stats.FieldCardinality[bf.field] == 0 {
				continue
			}
			x := bf.boost * w * bm25IDF(fs.docs, fs.bleveDF[j][t])
			bleveSq += x * x
			r.bleveN++
		}
		for j, sf := range sideFields {
			if fs.sideLen[j] == 0 {
				continue
			}
			r.allN++
			if df := fs.sideDF[j][t]; df > 0 {
				idf := bm25IDF(fs.docs, df)
				r.side[j] = append(r.side[j], sideTerm{t, sf.boost * w * idf * idf})
			}
		}
	}
	if c.stats.FieldCardinality[fWhole] > 0 {
		for _, tok := range q.raw {
			df := int32(0)
			if c.wholeNames[tok] {
				df = 1
			}
			x := wholeBoost * bm25IDF(fs.docs, df)
			bleveSq += x * x
			r.bleveN++
		}
	}
	r.allN += r.bleveN
	if bleveSq > 0 {
		r.bleveNorm = 1 / math.Sqrt(bleveSq)
	}
	return r
}

// score rescores document d given bleve's score for it.
func (r *lexRescorer) score(d int32, bleveScore float64) float64 {
	if r.bleveNorm == 0 {
		return bleveScore
	}
	tf := &r.c.toolFields[d]
	fs := r.c.fields
	matched := 0
	for _, term := range r.terms {
		if tf.all.tf[term] > 0 {
			matched++
		}
	}
	for _, tok := range r.raw {
		if tok == tf.whole {
			matched++
		}
	}
	if matched == 0 {
		return bleveScore
	}
	raw := bleveScore * float64(r.bleveN) / (float64(matched) * r.bleveNorm)
	var side float64
	for j, sts := range r.side {
		f := &tf.side[j]
		if f.len == 0 || len(sts) == 0 {
			continue
		}
		avgdl := fs.sideLen[j] / fs.docs
		for _, st := range sts {
			if n := f.tf[st.term]; n > 0 {
				side += st.coef * bm25TF(float64(n), float64(f.len), avgdl)
				matched++
			}
		}
	}
	// The full query's norm is the same for every document: left out.
	return (raw + side) * float64(matched) / float64(r.allN)
}

// lowerName is the whole-name term of a tool name.
func lowerName(name string) string { return strings.ToLower(name) }
