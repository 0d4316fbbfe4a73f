package selector

import "slices"

// Document-side neighbour expansion: each tool also "has", in a field of
// its own, the word-vector neighbours (neighbours.bin, cosine ≥
// docNbrMinSim) of its words that its text lacks, so a request that says
// "research" reaches a tool that says "scientific" without the query being
// expanded. Query-side expansion (expandWeak) only fires on weak queries
// and re-weights the whole query; this one leaves every matched term
// alone and only adds small scores for terms a tool does not have.
//
// The field is scored here, next to bleve, with bleve's BM25 formula and
// the field's own idf and lengths, and added to the rescored lexical score
// at Weights.DocNeighbours. It is kept out of bleve, where a second field
// costs compile and search time beyond their budgets. Tools that match a
// query only through the field join bleve's hits, so the field retrieves
// as well as re-ranks. Its matches count docNbrCoord of a real match in
// the coord factor: counted fully, every match would raise the coord that
// multiplies the whole score.
//
// Preselect only (lexQuery.nbr): Search is what the model's own short
// keyword queries hit, and those name what they want, so expansion there
// costs recall; Search's speed is untouched. The measurements are in
// selector/README.md (rounds 7 to 9).
const (
	// docNbrMinSim is the least cosine of a neighbour that joins a tool's
	// field (the table keeps ≥ 0.6; query-side expansion uses 0.7).
	docNbrMinSim = 0.7
	// docNbrCoord is the share of a matched clause a neighbour match adds
	// to the coord factor.
	docNbrCoord = 0.3
)

// nbrField is the catalog's neighbour field: postings per term and each
// tool's field length. Immutable after compile.
type nbrField struct {
	post  map[string][]nbrPosting
	len   []int32
	avgdl float64
}

// nbrPosting is one tool that has a term as a neighbour, tf times (once per
// distinct word of the tool that leads to it).
type nbrPosting struct {
	doc int32
	tf  int32
}

// initNbrField builds the neighbour field from each tool's distinct words
// (toolRows, as max-sim keeps them). A word's neighbour terms are stemmed
// once per catalog, however many tools share the word.
func (c *Catalog) initNbrField() {
	if c.w.DocNeighbours <= 0 || c.wv == nil || c.nbs == nil || c.msVocab == nil {
		return
	}
	f := &nbrField{post: map[string][]nbrPosting{}, len: make([]int32, len(c.tools))}
	stems := map[uint16][]string{}
	counts := map[string]int32{}
	var total float64
	for i, rows := range c.toolRows {
		clear(counts)
		for _, id := range rows {
			r := c.msVocab.rows[id]
			if int(r) >= len(c.nbs.rows) {
				continue
			}
			for _, nb := range c.nbs.rows[r] {
				if nb.sim < docNbrMinSim {
					continue
				}
				ts, ok := stems[nb.row]
				if !ok {
					ts = c.an.wordTerms(c.wv.words[nb.row])
					stems[nb.row] = ts
				}
				for _, t := range ts {
					if !c.fields.has(t, int32(i)) {
						counts[t]++
					}
				}
			}
		}
		terms := make([]string, 0, len(counts))
		for t := range counts {
			terms = append(terms, t)
		}
		slices.Sort(terms) // postings in doc order regardless of map order
		for _, t := range terms {
			f.post[t] = append(f.post[t], nbrPosting{int32(i), counts[t]})
			f.len[i] += counts[t]
		}
		total += float64(f.len[i])
	}
	if total == 0 {
		return
	}
	f.avgdl = total / float64(len(c.tools))
	c.nbr = f
}

// nbrScores sets, in sc.nbr, for the tools that have some of q's terms in
// the neighbour field, the field's BM25 sum (boost × query weight × idf² ×
// tf part, the scale of the rescorer's per-field sums) and how many of q's
// terms matched there, and lists those tools in sc.nbrDocs; the caller
// clears both (clearNbr). Slots per tool, not a map: a map per query cost
// four allocations and a lookup per posting.
func (c *Catalog) nbrScores(q *lexQuery, sc *searchScratch) {
	f := c.nbr
	if f == nil || len(q.terms) == 0 {
		return
	}
	terms := sc.terms[:0]
	for t := range q.terms {
		if len(f.post[t]) > 0 {
			terms = append(terms, t)
		}
	}
	defer func() { sc.terms = terms[:0] }()
	slices.Sort(terms) // float sums independent of map order
	docs := float64(len(c.tools))
	for _, t := range terms {
		ps := f.post[t]
		idf := bm25IDF(docs, int32(len(ps)))
		coef := c.w.DocNeighbours * q.terms[t] * idf * idf
		for _, p := range ps {
			s := &sc.nbr[p.doc]
			if s.matched == 0 {
				sc.nbrDocs = append(sc.nbrDocs, p.doc)
			}
			s.sum += coef * bm25TF(float64(p.tf), float64(f.len[p.doc]), f.avgdl)
			s.matched++
		}
	}
}

// clearNbr zeroes the slots nbrScores set.
func (sc *searchScratch) clearNbr() {
	for _, d := range sc.nbrDocs {
		sc.nbr[d] = nbrScore{}
	}
	sc.nbrDocs = sc.nbrDocs[:0]
}

// nbrOnly ranks a query none of whose terms is in the all field (search's
// early exit) by the neighbour field alone: the top n tools, best first.
func (c *Catalog) nbrOnly(q *lexQuery, n int, sc *searchScratch) ([]int32, []float64, error) {
	if !q.nbr {
		return nil, nil, nil
	}
	c.nbrScores(q, sc)
	defer sc.clearNbr()
	hits := make([]docScore, 0, len(sc.nbrDocs))
	for _, d := range sc.nbrDocs {
		s := sc.nbr[d]
		hits = append(hits, docScore{d, s.sum * float64(s.matched)})
	}
	docs, scores := topHits(hits, n)
	return docs, scores, nil
}

// nbrScore is one tool's neighbour-field score for a query.
type nbrScore struct {
	sum     float64
	matched int
}

// addNbr adds the neighbour field's scores to the rescored bleve hits and
// appends the tools that match only there. A rescored hit is (raw + side)
// × m / allN (m matched clauses of allN); with the field it becomes
// (raw + side + nbr) × (m + docNbrCoord × nbr matches) / allN, so a tool
// that matches only through the field scores on the same scale as bleve's
// hits.
func (c *Catalog) addNbr(q *lexQuery, rs *lexRescorer, hits []docScore, sc *searchScratch) []docScore {
	if !q.nbr {
		return hits
	}
	c.nbrScores(q, sc)
	defer sc.clearNbr()
	if len(sc.nbrDocs) == 0 {
		return hits
	}
	allN := float64(max(rs.allN, 1))
	for i := range hits {
		h := &hits[i]
		n := &sc.nbr[h.doc]
		if n.matched == 0 {
			continue
		}
		m := float64(rs.matchedClauses(h.doc))
		base := 0.0
		if m > 0 {
			base = h.score * allN / m
		}
		h.score = (base + n.sum) * (m + docNbrCoord*float64(n.matched)) / allN
		n.matched = -n.matched // taken: not appended below
	}
	for _, d := range sc.nbrDocs {
		if n := sc.nbr[d]; n.matched > 0 {
			hits = append(hits, docScore{doc: d, score: n.sum * docNbrCoord * float64(n.matched) / allN})
		}
	}
	return hits
}

// matchedClauses counts the clauses of the rescored query that tool d
// matches (its terms in the all field and each side field, its whole
// name): the m of the rescorer's coord factor, which addNbr needs to add
// neighbour matches to it. It reads accumulate's sums.
func (r *lexRescorer) matchedClauses(d int32) int {
	a := &r.acc[d]
	m := int(a.all) + int(a.sideN)
	for _, tok := range r.raw {
		if tok == r.c.wholes[d] {
			m++
		}
	}
	return m
}
