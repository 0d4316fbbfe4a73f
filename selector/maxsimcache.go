package selector

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// A catalog remembers, per query word, which of its words reach max-sim's
// floor and by how much. Requests share most of their words (an agent's
// users ask for the same few things in the same words), and a word's
// products with the whole vocabulary are most of max-sim's cost, which was
// half of a preselection on real catalogs. The values are the ones
// maxSimDirect computes, pair by pair, so rankings do not change.
const (
	// maxSimCacheWords bounds the words a catalog remembers: ~100 bytes
	// each (most words reach the floor with a handful of catalog words),
	// so at most ~0.4 MB per catalog.
	maxSimCacheWords = 4096
	// maxSimCacheVocab is the largest vocabulary that is cached: a word
	// first seen costs a product with every catalog word instead of only
	// the candidates' (≈ 0.05 ms per 1,000 words), so catalogs with larger
	// vocabularies compare per request, candidates only.
	maxSimCacheVocab = 4096
)

// simEntry is one catalog word (max-sim vocabulary id) within reach of a
// query word, and its floored similarity.
type simEntry struct {
	id  int32
	sim float32
}

// newMaxSimCache returns the catalog's word cache, or nil when its
// vocabulary is too large to compare whole.
func newMaxSimCache(voc *maxSimVocab) *lru.Cache[int32, []simEntry] {
	if voc == nil || len(voc.rows) > maxSimCacheVocab {
		return nil
	}
	cache, _ := lru.New[int32, []simEntry](maxSimCacheWords) // errors only on size <= 0
	return cache
}

// wordRow returns the catalog words within reach of word-vector row r.
// Two requests may compute the same row at once; both get the same values.
func (c *Catalog) wordRow(r int32) []simEntry {
	if row, ok := c.msWords.Get(r); ok {
		return row
	}
	qv, qt := c.queryVec(r)
	var row []simEntry
	for id := range c.msVocab.rows {
		if s := c.wordSim(r, qv, qt, int32(id)); s > 0 {
			row = append(row, simEntry{int32(id), s})
		}
	}
	c.msWords.Add(r, row)
	return row
}

// maxSimCached is maxSimDirect from the remembered rows: each doc's best
// floored similarity per query word (doc-major).
func (c *Catalog) maxSimCached(qrows []int32, docs []int32) []float32 {
	nq := len(qrows)
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	if len(sc.msSlot) < len(c.msVocab.rows) {
		sc.msSlot = make([]int32, len(c.msVocab.rows))
	}
	// sims[k*nq+i]: the k-th catalog word within reach of some query word,
	// its similarity to query word i; slot[id] is k+1 for such a word.
	slot, set, sims := sc.msSlot, sc.msSet[:0], sc.msSims[:0]
	defer func() {
		for _, id := range set {
			slot[id] = 0
		}
		sc.msSet, sc.msSims = set[:0], sims[:0]
	}()
	for i, r := range qrows {
		for _, e := range c.wordRow(r) {
			k := slot[e.id] - 1
			if k < 0 {
				k = int32(len(sims) / nq)
				slot[e.id] = k + 1
				set = append(set, e.id)
				for range nq {
					sims = append(sims, 0)
				}
			}
			sims[int(k)*nq+i] = e.sim
		}
	}
	return c.bestPerDoc(docs, nq, slot, sims)
}
