package selector

// A catalog remembers, per query word, which of its tools the word
// reaches max-sim's floor with and how closely (the word's row).
// Requests share most of their words (an agent's users ask for the same
// few things in the same words), and comparing a word with the
// candidates' words on every request costs half of a preselection on real
// catalogs. A row costs a product with every catalog word, about three
// times the candidates' words, so a word's first sighting is compared with
// the candidates only, and its row is computed when it comes back.
// Every value is wordSim's, pair by pair, so rankings do not change.
// Entries are keyed by rows of the public word table and hold only
// similarities: nothing of a request's text, though the tenants that send
// the same catalog share them.
const (
	// maxSimCacheEntries bounds the (tool, similarity) pairs a catalog
	// remembers, 8 bytes each: 2 MB at most, about half in practice (a
	// word reaches about half the tools of the bundled catalog).
	maxSimCacheEntries = 1 << 18
	// maxSimCacheWords bounds the words of a small catalog, and
	// maxSimMinWords is the fewest a catalog keeps (past 512 tools, at
	// up to 8 bytes per tool and word).
	maxSimCacheWords = 4096
	maxSimMinWords   = 512
	// maxSimCacheVocab is the largest vocabulary whose rows are kept:
	// past it a row costs too much (≈ 0.05 ms per 1,000 catalog words)
	// and every word is compared with the candidates' words only.
	maxSimCacheVocab = 4096
)

// docSim is one tool within reach of a query word and its best floored
// similarity to any of the tool's words.
type docSim struct {
	doc int32
	sim float32
}

// newMaxSimCache returns the word memory of a catalog of n tools: each
// word's tools within reach and their best similarities, in document
// order. Scoring a candidate is then one lookup per query word, where
// folding the word's similarities through each candidate's words cost a
// fifth of a preselection. It is nil when the vocabulary is too large to
// compare whole.
func newMaxSimCache(voc *maxSimVocab, n int) *wordMemo[[]docSim] {
	if voc == nil || len(voc.rows) > maxSimCacheVocab {
		return nil
	}
	return newWordMemo(min(maxSimCacheWords, max(maxSimMinWords, maxSimCacheEntries/max(n, 1))), sliceBytes[docSim])
}

// rememberedRow returns word-vector row r's tools if the catalog has seen
// the word before (wordMemo).
func (c *Catalog) rememberedRow(r int32) ([]docSim, bool) {
	if c.msWords == nil {
		return nil, false
	}
	return c.msWords.get(r, func() []docSim { return c.toolsReached(r) })
}

// toolsReached returns the tools word-vector row r reaches max-sim's floor
// with and the best similarity to each, in document order.
func (c *Catalog) toolsReached(r int32) []docSim {
	qv, qt := c.queryVec(r)
	best := make([]float32, len(c.tools))
	for id, docs := range c.msVocab.docs {
		s := c.wordSim(r, qv, qt, int32(id))
		if s <= 0 {
			continue
		}
		for _, d := range docs {
			best[d] = max(best[d], s)
		}
	}
	var row []docSim
	for d, s := range best {
		if s > 0 {
			row = append(row, docSim{int32(d), s})
		}
	}
	return row
}

// bestSims writes each doc's best floored similarity per query word into
// best (doc-major, len(docs) × len(qrows), zero): remembered words from
// their rows, the others by comparing them with each distinct word of the
// candidates once. sc is the caller's scratch; bestSims uses its slots.
func (c *Catalog) bestSims(qrows []int32, docs []int32, best []float32, sc *searchScratch) {
	nq := len(qrows)
	if len(sc.docSlot) < len(c.tools) {
		sc.docSlot = make([]int32, len(c.tools))
	}
	slot := sc.docSlot // docs[j] -> j+1
	for j, d := range docs {
		slot[d] = int32(j + 1)
	}
	defer func() {
		for _, d := range docs {
			slot[d] = 0
		}
	}()
	var direct []int // query words compared with the candidates' words
	for i, r := range qrows {
		row, ok := c.rememberedRow(r)
		if !ok {
			direct = append(direct, i)
			continue
		}
		for _, e := range row {
			if j := slot[e.doc]; j > 0 {
				best[int(j-1)*nq+i] = e.sim
			}
		}
	}
	if len(direct) > 0 {
		c.compareDirect(sc, qrows, direct, docs, best)
	}
}

// compareDirect fills best's columns of the direct query words (indices
// into qrows) by comparing each with every distinct word of the docs once.
func (c *Catalog) compareDirect(sc *searchScratch, qrows []int32, direct []int, docs []int32, best []float32) {
	nq := len(qrows)
	if len(sc.msSlot) < len(c.msVocab.rows) {
		sc.msSlot = make([]int32, len(c.msVocab.rows))
	}
	// sims[k*nd+x]: the similarity of the k-th distinct catalog word to
	// direct word x; slot[id] is k+1 for that word.
	nd := len(direct)
	slot := sc.msSlot
	set, sims := sc.msSet[:0], sc.msSims[:0]
	defer func() {
		for _, id := range set {
			slot[id] = 0
		}
		sc.msSet, sc.msSims = set[:0], sims[:0]
	}()
	qvecs := make([][]float32, nd)
	qtails := make([][2]float32, nd)
	for x, i := range direct {
		qvecs[x], qtails[x] = c.queryVec(qrows[i])
	}
	for _, d := range docs {
		for _, id := range c.toolRows[d] {
			if slot[id] != 0 {
				continue
			}
			set = append(set, id)
			slot[id] = int32(len(set))
			for x, i := range direct {
				sims = append(sims, c.wordSim(qrows[i], qvecs[x], qtails[x], id))
			}
		}
	}
	for j, d := range docs {
		b := best[j*nq : (j+1)*nq]
		for _, id := range c.toolRows[d] {
			k := int(slot[id]) - 1
			for x, i := range direct {
				b[i] = max(b[i], sims[k*nd+x])
			}
		}
	}
}
