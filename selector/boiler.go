package selector

import "strings"

// requestWords are generic English words of a request ("please help me, I
// want to use a tool that can ...") that say nothing about which tool is
// wanted; the English stop list already drops the pronouns and auxiliaries
// it knows. They are dropped, not down-weighted, from the lexical query
// and from the semantic query vector, and never expanded, unless nothing
// else is left. Catalog document frequency is not used on top: BM25's idf
// already does most of that. The measurements are in selector/README.md
// (round 5).
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
