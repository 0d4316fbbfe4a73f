package selector

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"

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

// allBoost is the boost of the one field the bleve query searches for
// analysed terms: all (BM25F: every field repeated by its weight). With
// one field and a plain query bleve's disjunction stays under its heap
// takeover (10 searchers) and scans its clauses as a slice, which is
// faster.
const allBoost = 1.0

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

// toolFields are a tool's analysed fields while its catalog compiles:
// newFieldStats reads their counts and lengths into the postings once, and
// the catalog keeps only the whole name. The per-tool term maps held half
// a compiled catalog's heap (a tool with 4 KB of description and 60
// parameters has some 2,000 distinct terms, about 60 bytes each in a map),
// and the postings answer every question asked of them after compiling
// (fieldStats.has).
type toolFields struct {
	all   termCounts
	whole string // the lower-case full name
	side  [len(sideFields)]termCounts
}

// fieldStats are a catalog's document frequencies and total lengths per
// field, the numbers BM25 needs, and the postings the rescorer reads its
// per-document counts from, all under one entry per term: a query term is
// looked up once, where one map per field and statistic cost a dozen
// lookups per term, most of them cache misses once a request's 190 KB
// body has passed through the CPU caches.
type fieldStats struct {
	docs    float64
	sideLen [len(sideFields)]float64
	terms   map[string]*termStats
}

// termStats is one analysed term of a catalog: the tools that have it in
// the all field (its document frequency there is their number), its
// side-field postings, and bleve's scores of it in the all field, read on
// the term's first search.
type termStats struct {
	all []int32 // in tool order
	// side holds every side field's postings of the term, field by field
	// in sideFields order, each in tool order; field j's are
	// side[sideEnd[j-1]:sideEnd[j]].
	side    []posting
	sideEnd [len(sideFields)]int32
	bleve   atomic.Pointer[termPostings] // see postings.go
}

// sidePostings returns field j's postings of the term.
func (t *termStats) sidePostings(j int) []posting {
	start := int32(0)
	if j > 0 {
		start = t.sideEnd[j-1]
	}
	return t.side[start:t.sideEnd[j]]
}

// posting is one tool's frequency of a term in a field, and the field's
// length in that tool: BM25 needs both, and the length read from the
// tool's own fields would cost a cache miss per posting once the catalog
// has gone cold between requests.
type posting struct {
	doc, tf, len int32
}

// df returns the number of tools with term in the all field (every term
// of every field is in it).
func (s *fieldStats) df(term string) int32 {
	if t := s.terms[term]; t != nil {
		return int32(len(t.all))
	}
	return 0
}

// has reports whether tool d has term in its all field (every term of
// every field is in it): whether d is in the term's tool list, which is in
// tool order.
func (s *fieldStats) has(term string, d int32) bool {
	if t := s.terms[term]; t != nil {
		_, ok := slices.BinarySearch(t.all, d)
		return ok
	}
	return false
}

// sidePostings returns term's postings in side field j.
func (s *fieldStats) sidePostings(j int, term string) []posting {
	if t := s.terms[term]; t != nil {
		return t.sidePostings(j)
	}
	return nil
}

func newFieldStats(tf []toolFields) *fieldStats {
	s := &fieldStats{docs: float64(len(tf)), terms: map[string]*termStats{}}
	// Side postings are gathered per field first, then laid out one
	// term's after another's.
	var side [len(sideFields)]map[string][]posting
	for i := range side {
		side[i] = map[string][]posting{}
	}
	for d := range tf {
		t := &tf[d]
		for i := range t.side {
			f := &t.side[i]
			s.sideLen[i] += float64(f.len)
			for term, n := range f.tf {
				side[i][term] = append(side[i][term], posting{int32(d), n, f.len})
			}
			// The postings hold the same counts; nothing reads the
			// per-tool maps after this, and they cost more memory.
			f.tf = nil
		}
		for term := range t.all.tf {
			ts := s.terms[term]
			if ts == nil {
				ts = &termStats{}
				s.terms[term] = ts
			}
			ts.all = append(ts.all, int32(d))
		}
		t.all.tf = nil // as the side maps: has reads the lists
	}
	for term, ts := range s.terms {
		n := 0
		for i := range side {
			n += len(side[i][term])
		}
		if n > 0 {
			ts.side = make([]posting, 0, n)
		}
		for i := range side {
			ts.side = append(ts.side, side[i][term]...)
			ts.sideEnd[i] = int32(len(ts.side))
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
// factors, and sums every tool's matches from the terms' postings in one
// pass, so scoring a candidate is a few array reads.
type lexRescorer struct {
	c            *Catalog
	terms        []queryTerm
	raw          []string
	bleveNorm    float64
	bleveN, allN int
	side         []sideTerm   // field by field in sideFields order, terms in query order
	acc          []rescoreAcc // per tool, summed by accumulate
}

// sideTerm is a query term's postings in a side field some tool has it
// in, with its constant factor: field boost × term weight × idf² (bleve's
// BM25 term score is query weight × idf × tf part, its query weight boost
// × idf).
type sideTerm struct {
	field int
	post  []posting
	coef  float64
}

// rescoreAcc is one tool's matches of a query: query terms its all field
// has, side-field terms it has and their BM25 sum.
type rescoreAcc struct {
	all, sideN int32
	side       float64
}

// newRescorer prepares q's rescoring; acc (one entry per tool, zero) is
// the scratch accumulate fills.
func (c *Catalog) newRescorer(q *lexQuery, terms []queryTerm, acc []rescoreAcc) *lexRescorer {
	r := &lexRescorer{c: c, terms: terms, raw: q.raw, acc: acc}
	var bleveSq float64
	fs := c.fields
	if c.stats.FieldCardinality[fAll] > 0 {
		for _, qt := range terms {
			x := allBoost * q.terms[qt.term] * bm25IDF(fs.docs, int32(len(qt.stats.all)))
			bleveSq += x * x
			r.bleveN++
		}
	}
	// The side terms, counted first so they take one allocation.
	n := 0
	for j := range sideFields {
		if fs.sideLen[j] == 0 {
			continue
		}
		r.allN += len(terms)
		for _, qt := range terms {
			if len(qt.stats.sidePostings(j)) > 0 {
				n++
			}
		}
	}
	if n > 0 {
		r.side = make([]sideTerm, 0, n)
	}
	for j, sf := range sideFields {
		if fs.sideLen[j] == 0 {
			continue
		}
		for _, qt := range terms {
			if post := qt.stats.sidePostings(j); len(post) > 0 {
				idf := bm25IDF(fs.docs, int32(len(post)))
				r.side = append(r.side, sideTerm{j, post, sf.boost * q.terms[qt.term] * idf * idf})
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

// accumulate sums every tool's matches into r.acc. A tool's side sum adds
// its terms in the same order (field, then term) as a per-tool loop
// would, so the scores are the same to the last bit.
func (r *lexRescorer) accumulate() {
	if r.bleveNorm == 0 {
		return
	}
	fs := r.c.fields
	for _, qt := range r.terms {
		for _, d := range qt.stats.all {
			r.acc[d].all++
		}
	}
	for _, st := range r.side {
		avgdl := fs.sideLen[st.field] / fs.docs
		for _, p := range st.post {
			a := &r.acc[p.doc]
			a.side += st.coef * bm25TF(float64(p.tf), float64(p.len), avgdl)
			a.sideN++
		}
	}
}

// score rescores document d given bleve's score for it (after accumulate).
func (r *lexRescorer) score(d int32, bleveScore float64) float64 {
	if r.bleveNorm == 0 {
		return bleveScore
	}
	a := &r.acc[d]
	matched := int(a.all)
	for _, tok := range r.raw {
		if tok == r.c.wholes[d] {
			matched++
		}
	}
	if matched == 0 {
		return bleveScore
	}
	raw := bleveScore * float64(r.bleveN) / (float64(matched) * r.bleveNorm)
	matched += int(a.sideN)
	// The full query's norm is the same for every document: left out.
	return (raw + a.side) * float64(matched) / float64(r.allN)
}

// lowerName is the whole-name term of a tool name.
func lowerName(name string) string { return strings.ToLower(name) }
