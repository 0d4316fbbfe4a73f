package selector

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// A catalog remembers, per query word, which of its words reach max-sim's
// floor and by how much (the word's row). Requests share most of their
// words (an agent's users ask for the same few things in the same words),
// and comparing a word with the candidates' words was half of a
// preselection on real catalogs. A row costs a product with every catalog
// word, about three times the candidates' words, so a word's first
// sighting is compared with the candidates only, as before, and its row is
// computed when it comes back. Every value is wordSim's, pair by pair, so
// rankings do not change. Entries are keyed by rows of the public word
// table and hold only similarities: nothing of a request's text, though
// the tenants that send the same catalog share them.
const (
	// maxSimCacheWords bounds the words a catalog remembers: ~100 bytes
	// each (most words reach the floor with a handful of catalog words),
	// so at most ~0.4 MB per catalog.
	maxSimCacheWords = 4096
	// maxSimCacheVocab is the largest vocabulary whose rows are kept:
	// past it a row costs too much (≈ 0.05 ms per 1,000 catalog words)
	// and every word is compared with the candidates' words only.
	maxSimCacheVocab = 4096
)

// simEntry is one catalog word (max-sim vocabulary id) within reach of a
// query word, and its floored similarity.
type simEntry struct {
	id  int32
	sim float32
}

// wordRow is what a catalog remembers of a query word: its row, once the
// word has come back; a word seen once has none yet.
type wordRow struct {
	entries []simEntry
	full    bool
}

// newMaxSimCache returns the catalog's word cache, or nil when its
// vocabulary is too large to compare whole.
func newMaxSimCache(voc *maxSimVocab) *lru.Cache[int32, wordRow] {
	if voc == nil || len(voc.rows) > maxSimCacheVocab {
		return nil
	}
	cache, _ := lru.New[int32, wordRow](maxSimCacheWords) // errors only on size <= 0
	return cache
}

// rememberedRow returns word-vector row r's row if the catalog has seen
// the word before, computing it on the word's second sighting; on the
// first it only notes the word. Two requests may compute the same row at
// once; both get the same values.
func (c *Catalog) rememberedRow(r int32) ([]simEntry, bool) {
	if c.msWords == nil {
		return nil, false
	}
	w, ok := c.msWords.Get(r)
	switch {
	case !ok:
		c.msWords.Add(r, wordRow{})
		return nil, false
	case w.full:
		return w.entries, true
	}
	qv, qt := c.queryVec(r)
	var row []simEntry
	for id := range c.msVocab.rows {
		if s := c.wordSim(r, qv, qt, int32(id)); s > 0 {
			row = append(row, simEntry{int32(id), s})
		}
	}
	c.msWords.Add(r, wordRow{entries: row, full: true})
	return row, true
}

// bestSims returns each doc's best floored similarity per query word
// (doc-major): remembered words from their rows, the others by comparing
// them with each distinct word of the candidates once.
func (c *Catalog) bestSims(qrows []int32, docs []int32) []float32 {
	nq := len(qrows)
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	if len(sc.msSlot) < len(c.msVocab.rows) {
		sc.msSlot = make([]int32, len(c.msVocab.rows))
		sc.msCompared = make([]bool, len(c.msVocab.rows))
	}
	// sims[k*nq+i]: the similarity of the k-th catalog word that has a
	// slot to query word i; slot[id] is k+1 for such a word.
	slot, compared := sc.msSlot, sc.msCompared
	set, sims := sc.msSet[:0], sc.msSims[:0]
	defer func() {
		for _, id := range set {
			slot[id], compared[id] = 0, false
		}
		sc.msSet, sc.msSims = set[:0], sims[:0]
	}()
	slotOf := func(id int32) int {
		if slot[id] == 0 {
			slot[id] = int32(len(sims)/nq) + 1
			set = append(set, id)
			for range nq {
				sims = append(sims, 0)
			}
		}
		return int(slot[id]) - 1
	}
	var direct []int // query words compared with the candidates' words
	for i, r := range qrows {
		row, ok := c.rememberedRow(r)
		if !ok {
			direct = append(direct, i)
			continue
		}
		for _, e := range row {
			k := slotOf(e.id) // before indexing: it may grow sims
			sims[k*nq+i] = e.sim
		}
	}
	if len(direct) > 0 {
		qvecs := make([][]float32, nq)
		qtails := make([][2]float32, nq)
		for _, i := range direct {
			qvecs[i], qtails[i] = c.queryVec(qrows[i])
		}
		for _, d := range docs {
			for _, id := range c.toolRows[d] {
				if compared[id] {
					continue
				}
				compared[id] = true
				k := slotOf(id)
				for _, i := range direct {
					sims[k*nq+i] = c.wordSim(qrows[i], qvecs[i], qtails[i], id)
				}
			}
		}
	}
	best := make([]float32, len(docs)*nq)
	for j, d := range docs {
		b := best[j*nq : (j+1)*nq]
		for _, id := range c.toolRows[d] {
			if k := int(slot[id]) - 1; k >= 0 {
				raise(b, sims[k*nq:(k+1)*nq])
			}
		}
	}
	return best
}
