package selector

import (
	"strings"
	"unicode"
)

// lexHit is a document's lexical score for one query and the share of the
// query's idf mass it matched (how much of the query it covers).
type lexHit struct {
	score   float64
	covered float64
}

// weightedTerms maps query terms to their weight; a term seen several
// times keeps its largest weight, so repetition does not dominate.
type weightedTerms map[string]float64

func (w weightedTerms) add(terms []string, weight float64) {
	for _, t := range terms {
		if weight > w[t] {
			w[t] = weight
		}
	}
}

// queryTerms returns the weighted stemmed terms of text.
func (c *Catalog) queryTerms(text string, weight float64) weightedTerms {
	w := weightedTerms{}
	w.add(c.an.terms(text), weight)
	return w
}

// lexical scores every document that shares a term with the query by BM25F
// (Robertson's form: field-weighted, length-normalised term frequencies
// summed before one saturation) and adds an exact-name bonus when the query
// spells a tool's full name. The map is keyed by document index.
func (c *Catalog) lexical(qt weightedTerms, raw string) ([]lexHit, float64) {
	hits := make([]lexHit, len(c.tools))
	var mass float64
	for term, qw := range qt {
		ti := c.terms[term]
		if ti == nil {
			continue
		}
		idf := ti.idf * qw
		mass += idf
		for _, p := range ti.post {
			wtf := float64(p.wtf)
			h := &hits[p.doc]
			h.score += idf * wtf / (bm25K1 + wtf)
			h.covered += idf
		}
	}
	if mass > 0 {
		for d := range hits {
			hits[d].covered /= mass
		}
	}
	// A query that names a tool verbatim ("use github.create_issue") wants
	// that tool whatever its description says.
	for _, tok := range strings.FieldsFunc(raw, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-' || r == ':')
	}) {
		tok = strings.Trim(strings.ToLower(tok), ".:-")
		if d, ok := c.whole[tok]; ok && strings.ContainsAny(tok, "_.-:") {
			hits[d].score += 2 * fieldParams[fWhole].w
			hits[d].covered = 1
		}
	}
	return hits, mass
}

// maxScore returns the largest score in hits, or 0.
func maxScore(hits []lexHit) float64 {
	var m float64
	for _, h := range hits {
		if h.score > m {
			m = h.score
		}
	}
	return m
}
