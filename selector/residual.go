package selector

import "slices"

// discountDone lowers the weight of query terms that the tools the
// conversation already called cover in their name, title or description
// by Weights.Done: that part of the request is done, so a follow-up ranks
// for what it still asks. It saves upstream calls in the follow-ups
// (selector/README.md, "Multi-step turns", has the weights measured).
func (c *Catalog) discountDone(q *lexQuery, done []string) {
	if len(done) == 0 || c.w.Done <= 0 {
		return
	}
	// The catalog's tools among done, looked up once: done comes from the
	// client's history, which may name thousands of tools the catalog
	// does not have, and each term would look every one up again.
	var buf [16]int
	docs := buf[:0]
	for _, name := range done {
		if d, ok := c.byName[name]; ok {
			docs = append(docs, d)
		}
	}
	keep := max(1-c.w.Done, 0)
	for term, w := range q.terms {
		for _, d := range docs {
			if c.sideHas(sideName, term, d) || c.sideHas(sideTitle, term, d) || c.sideHas(sideDesc, term, d) {
				q.terms[term] = w * keep
				break
			}
		}
	}
}

// sideHas reports whether tool d has term in side field j (its postings
// are in tool order).
func (c *Catalog) sideHas(j int, term string, d int) bool {
	ps := c.fields.sidePostings(j, term)
	_, found := slices.BinarySearchFunc(ps, int32(d), func(p posting, d int32) int { return int(p.doc - d) })
	return found
}
