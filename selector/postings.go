package selector

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/searcher"
	index "github.com/blevesearch/bleve_index_api"
	lru "github.com/hashicorp/golang-lru/v2"
)

// A catalog remembers, per (field, term), the BM25 score bleve's own term
// searcher gives every tool that has the term: the clause of a query
// before its boost and query norm. Building bleve's searchers for every
// request costs a third of a preselection, and requests share most of
// their terms, so a term's postings are read from bleve once per catalog
// and each query combines the remembered clauses the way bleve's
// disjunction does (lexScores below): the same products and sums, so the
// same scores. An all-field term keeps its postings in its termStats
// (fields.go) once a query has used it: 12 bytes per tool that has the
// term, so at most three times the catalog's own all-field tool lists
// (4 bytes an occurrence): 0.4 MB for BenchmarkCompile's 2,000 tools (16
// distinct terms a tool) if every term is queried, against the 6.5 MB
// the compiled catalog holds anyway; the catalog cache bounds how many
// catalogs there are. Whole names and terms no tool has go to a bounded
// LRU, keyed by copies of the tokens (a request's own words, for a term
// no tool has); the entries hold tool numbers and scores.
const (
	// postingsCacheTerms bounds the (field, term) pairs the LRU
	// remembers: a pair costs 12 bytes per tool that has the term plus
	// ~100 bytes.
	postingsCacheTerms = 8192
)

// fieldTerm names one clause of the lexical query.
type fieldTerm struct {
	field, term string
}

// termPostings is what bleve's term searcher scores for one (field, term):
// the term's idf and each matching tool's BM25 term score, unboosted.
type termPostings struct {
	idf    float64
	docs   []int32
	scores []float64
}

// newPostingsCache returns the LRU of a catalog's remaining postings,
// counting in held what its entries hold.
func newPostingsCache(held *atomic.Int64) *lru.Cache[fieldTerm, *termPostings] {
	cache, _ := lru.NewWithEvict(postingsCacheTerms, func(k fieldTerm, p *termPostings) { held.Add(-cachedPostingsBytes(k, p)) }) // errors only on size <= 0
	return cache
}

// heapBytes is what p holds.
func (p *termPostings) heapBytes() int64 {
	return roundAlloc(sizeOf[termPostings]()) + sliceBytes(p.docs) + sliceBytes(p.scores)
}

// cachedPostingsBytes is what an entry of the postings LRU holds: its
// key's copy of the term, the postings, and the LRU's element and map
// slot, which its two-string key makes some 40 bytes wider than a word
// memo's.
func cachedPostingsBytes(k fieldTerm, p *termPostings) int64 {
	return memoEntryBytes + 40 + strBytes(k.term) + p.heapBytes()
}

// postingsReader opens the catalog's bleve reader on the first term not
// yet remembered, so a request whose terms are all remembered opens
// none.
type postingsReader struct {
	c *Catalog
	r index.IndexReader
}

func (pr *postingsReader) close() {
	if pr.r != nil {
		_ = pr.r.Close()
	}
}

// clausePostings returns a clause's postings: an all-field term's from
// its catalog entry, read from bleve on first use; others' (whole names,
// terms no tool has) from the LRU.
func (pr *postingsReader) clausePostings(ctx context.Context, cl lexClause) (*termPostings, error) {
	if cl.stats == nil {
		if p, ok := pr.c.postingsCache.Get(cl.ft); ok {
			return p, nil
		}
		p, err := pr.read(ctx, cl.ft)
		if err != nil {
			return nil, err
		}
		// A whole-name token is the request's own text, which may alias
		// its body: the cache outlives the request, so it keeps a copy.
		k := fieldTerm{cl.ft.field, strings.Clone(cl.ft.term)}
		// Two searches that missed the term at once both read it: one
		// entry is kept and counted, and both use it. (A replacing Add
		// would count the term twice: the LRU calls no eviction on a
		// replace.)
		if prev, found, _ := pr.c.postingsCache.PeekOrAdd(k, p); found {
			return prev, nil
		}
		pr.c.memoBytes.Add(cachedPostingsBytes(k, p))
		return p, nil
	}
	if p := cl.stats.bleve.Load(); p != nil {
		return p, nil
	}
	p, err := pr.read(ctx, cl.ft)
	if err != nil {
		return nil, err
	}
	// Concurrent first searches may both read it: the same postings,
	// kept and counted once.
	if !cl.stats.bleve.CompareAndSwap(nil, p) {
		return cl.stats.bleve.Load(), nil
	}
	pr.c.memoBytes.Add(p.heapBytes())
	return p, nil
}

// read returns (field, term)'s postings from bleve's term searcher.
func (pr *postingsReader) read(ctx context.Context, ft fieldTerm) (*termPostings, error) {
	c := pr.c
	if pr.r == nil {
		r, err := c.bleveIdx.Reader()
		if err != nil {
			return nil, fmt.Errorf("opening index reader: %w", err)
		}
		pr.r = r
	}
	// Boost 1 and no query norm: a lone term searcher's scores are its
	// BM25 term scores as they are (bleve multiplies by the query weight
	// only when it is not 1).
	s, err := searcher.NewTermSearcher(bm25Context{Context: ctx, stats: c.stats}, pr.r, ft.term, ft.field, 1, search.SearcherOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading postings of %s:%q: %w", ft.field, ft.term, err)
	}
	defer func() { _ = s.Close() }()
	n := s.Count()
	p := &termPostings{idf: bm25IDF(float64(c.stats.DocCount), int32(n)), docs: make([]int32, 0, n), scores: make([]float64, 0, n)}
	pool := search.NewDocumentMatchPool(s.DocumentMatchPoolSize()+1, 0)
	mctx := &search.SearchContext{DocumentMatchPool: pool}
	for {
		dm, err := s.Next(mctx)
		if err != nil {
			return nil, fmt.Errorf("reading postings of %s:%q: %w", ft.field, ft.term, err)
		}
		if dm == nil {
			break
		}
		if v := dm.IndexInternalID.Value(); v < uint64(len(c.docOf)) {
			p.docs = append(p.docs, c.docOf[v])
			p.scores = append(p.scores, dm.Score)
		}
		pool.Put(dm)
	}
	return p, nil
}

// lexClause is one clause of the lexical disjunction: a field's term at a
// boost, and for an all-field term the catalog's entry for it, which
// holds its postings once read.
type lexClause struct {
	ft    fieldTerm
	boost float64
	stats *termStats // nil: the postings are remembered in the LRU
}

// lexClauses are q's clauses in bleve's order: every indexed query term
// against the all field, boosted by allBoost × term weight, then the raw
// tokens against the whole-name field.
func (c *Catalog) lexClauses(q *lexQuery, terms []queryTerm) []lexClause {
	out := make([]lexClause, 0, len(terms)+len(q.raw))
	if c.stats.FieldCardinality[fAll] > 0 {
		for _, qt := range terms {
			out = append(out, lexClause{fieldTerm{fAll, qt.term}, allBoost * q.terms[qt.term], qt.stats})
		}
	}
	if c.stats.FieldCardinality[fWhole] > 0 {
		for _, tok := range q.raw {
			out = append(out, lexClause{ft: fieldTerm{fWhole, tok}, boost: wholeBoost})
		}
	}
	return out
}

// lexScores scores the clauses as bleve's disjunction of term searchers
// with BM25 does, from the remembered postings: each clause's query weight
// is boost × idf × the query norm (1 / √Σ (boost × idf)² over every
// clause, matched or not), a tool's score the sum of its matching clauses'
// term scores × weight, times the share of the clauses it matches
// (coord). sc.bm25 gets each matching tool's score and sc.hits the tools,
// for the caller to reset; sc.coord is used and left zero.
func (c *Catalog) lexScores(ctx context.Context, clauses []lexClause, sc *searchScratch) error {
	pr := postingsReader{c: c}
	defer pr.close()
	ps := sc.postings[:0]
	sumSq := 0.0
	for _, cl := range clauses {
		p, err := pr.clausePostings(ctx, cl)
		if err != nil {
			return err
		}
		ps = append(ps, p)
		w := cl.boost * p.idf
		sumSq += w * w
	}
	sc.postings = ps[:0]
	norm := 1 / math.Sqrt(sumSq)
	for i, p := range ps {
		weight := clauses[i].boost * p.idf * norm
		for j, d := range p.docs {
			if sc.coord[d] == 0 {
				sc.hits = append(sc.hits, d)
			}
			sc.coord[d]++
			s := p.scores[j]
			if weight != 1 {
				s *= weight
			}
			sc.bm25[d] += s
		}
	}
	total := float64(len(clauses))
	for _, d := range sc.hits {
		sc.bm25[d] *= float64(sc.coord[d]) / total
		sc.coord[d] = 0
	}
	clear(ps)
	return nil
}
