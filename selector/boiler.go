package selector

import "strings"

// requestWords are generic English words of a request ("please help me, I
// want to use a tool that can ...") that say nothing about which tool is
// wanted; the English stop list already drops the pronouns and auxiliaries
// it knows. They are dropped from the lexical query and from the semantic
// query vector, and never expanded, unless nothing else is left. Measured
// (R@1/R@5/R@10 versus keeping them): metatool +0.008/+0.005/+0.006, bfcl
// +0.005/+0.002/±0, mcp -0.004/±0/-0.005 (one query); proxy agent tasks
// (833 tools) 1.45x -> 1.41x upstream calls, steps unchanged. Weight 0.3
// instead of dropping: about half the gain. Down-weighting by catalog
// document frequency as well (terms in more than 10 % of the tools ×0.7;
// 5 %/20 % and ×0.3/×0.5 also tried) traded mcp R@1 (-0.02) for R@5/R@10
// (+0.014/+0.008) and cost bfcl R@5: dropped, BM25's idf already does
// most of that.
const requestWords = "please help want need can could would like use using tool tools"

// boilerplate returns the request words as index terms and as plain words.
func (a *analyzer) boilerplate() (terms, words map[string]bool) {
	terms, words = map[string]bool{}, map[string]bool{}
	for _, w := range strings.Fields(requestWords) {
		for _, t := range a.terms(w) {
			terms[t] = true
		}
		words[w] = true
	}
	return terms, words
}

// dropBoilerplate removes the request words from q unless they are all
// it has.
func (c *Catalog) dropBoilerplate(q *lexQuery) {
	other := false
	for t := range q.terms {
		if !c.genTerms[t] {
			other = true
			break
		}
	}
	if !other {
		return
	}
	for t := range q.terms {
		if c.genTerms[t] {
			delete(q.terms, t)
		}
	}
}

// contentWords returns words without the request words unless they are
// all it has.
func (c *Catalog) contentWords(words []string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		if !c.genWords[w] {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return words
	}
	return out
}
