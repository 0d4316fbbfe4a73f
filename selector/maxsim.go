package selector

import (
	"math"
	"slices"
)

// Max-sim: each query word's best cosine to any word of a tool's text,
// averaged over the query words with rarity weights (the word vectors'
// frequency rank, as in the averaged vectors). It matches a request's
// words one by one to a tool's ("markdown" -> "text", "diff" ->
// "changes") where the averaged vector blurs them. Scored for the top
// maxSimPool lexical and the top maxSimPool semantic candidates only, and
// entered into the fusion by rank like lexical and semantic. Its weight,
// floor and pool are the values that measured best on the dev sets and
// the agent tasks (selector/README.md, round 5).
//
// The int8 rows are scaled per row, so the cosine needs each row's own
// norm (rowF normalises): with a fixed 127² every best match saturates
// and the signal is noise.
const (
	maxSimWeight = 0.4
	// maxSimFloor: a word pair below this cosine counts 0; above it,
	// (cos - floor) / (1 - floor), so exact words count 1 and loose
	// relatives little.
	maxSimFloor = 0.5
	maxSimPool  = 30
)

// maxSimVocab is a catalog's word vocabulary for max-sim: every distinct
// word-vector row its tools use, as unit float32 vectors. Converting the
// int8 rows once at compile halves the cost of a max-sim dot product (no
// int8 conversion or per-row norm at search time), a large share of a
// preselection's CPU; it costs 4 bytes per dimension per catalog word
// (selector/README.md, round 7).
type maxSimVocab struct {
	dims int
	vecs []float32       // local id × dims, unit rows
	rows []int32         // local id -> word-vector row
	docs [][]int32       // local id -> the tools that use the word
	ids  map[int32]int32 // word-vector row -> local id
	// tails are each row's norms from msCut1 and msCut2 on (local id ×
	// 2), for floorDot's bounds; nil when dims is below msCut2.
	tails []float32
}

// msCut1 and msCut2 are the dimensions after which floorDot checks
// whether a product can still reach the floor (multiples of 4, dot's
// unrolling). Chosen on sampled word pairs of the 100-dimension vectors:
// ≈ 79 of 100 dimensions computed on average, 3 cuts no better.
const msCut1, msCut2 = 64, 76

// floorMargin keeps floorDot's bound clear of float32 rounding, which is
// orders of magnitude smaller on unit vectors.
const floorMargin = 1e-3

// tailNorms returns v's norms from msCut1 and from msCut2 on.
func tailNorms(v []float32) [2]float32 {
	var out [2]float32
	for j, cut := range [2]int{msCut1, msCut2} {
		var ss float64
		for _, x := range v[cut:] {
			ss += float64(x) * float64(x)
		}
		out[j] = float32(math.Sqrt(ss))
	}
	return out
}

// floorDot returns dot(a, b), bit for bit, when it can reach floor, and
// otherwise -1 as soon as a partial sum plus the Cauchy-Schwarz bound of
// the rest (the tails' norms, at and bt) proves it cannot: max-sim counts
// every product below the floor as 0, and most word pairs are far below
// it, so most products stop early. It accumulates exactly as dot does
// (four sums over the same dimensions, added in the same order).
func floorDot(a, b []float32, at, bt [2]float32, floor float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for j, cut := range [2]int{msCut1, msCut2} {
		for ; i+4 <= cut; i += 4 {
			s0 += a[i] * b[i]
			s1 += a[i+1] * b[i+1]
			s2 += a[i+2] * b[i+2]
			s3 += a[i+3] * b[i+3]
		}
		if s0+s1+s2+s3+at[j]*bt[j] < floor-floorMargin {
			return -1
		}
	}
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// initMaxSim stores each tool's distinct known words as ids into the
// catalog's max-sim vocabulary and returns each tool's words (toolText
// analysed), which initSemantic reuses.
func (c *Catalog) initMaxSim() [][]string {
	if c.wv == nil {
		return nil
	}
	wv := c.wv
	c.toolRows = make([][]int32, len(c.tools))
	all := make([][]string, len(c.tools))
	voc := &maxSimVocab{dims: wv.dims, ids: map[int32]int32{}}
	local := voc.ids
	seen := map[int32]bool{}
	for i := range c.tools {
		text, _ := toolText(&c.tools[i])
		all[i] = c.an.words(text)
		clear(seen)
		for _, w := range all[i] {
			r, ok := wv.index[w]
			if !ok || seen[r] {
				continue
			}
			seen[r] = true
			id, ok := local[r]
			if !ok {
				id = int32(len(voc.rows))
				local[r] = id
				voc.rows = append(voc.rows, r)
				voc.docs = append(voc.docs, nil)
				v := wv.rowF(r)
				voc.vecs = append(voc.vecs, v...)
				if wv.dims >= msCut2 {
					t := tailNorms(v)
					voc.tails = append(voc.tails, t[:]...)
				}
			}
			c.toolRows[i] = append(c.toolRows[i], id)
			voc.docs[id] = append(voc.docs[id], int32(i))
		}
	}
	c.msVocab = voc
	return all
}

// rowF returns row r as float32 scaled to unit length.
func (wv *WordVectors) rowF(r int32) []float32 {
	v := wv.data[int(r)*wv.dims : int(r+1)*wv.dims]
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return normalize(out)
}

// maxSim scores docs for a query's content words (their rows, rowsOf): each query word's best
// cosine to any word of the tool, floored, averaged with rarity weights;
// the i-th score is docs[i]'s. nil without word vectors or known query
// words.
func (c *Catalog) maxSim(rows []int32, docs []int32, sc *searchScratch) []float64 {
	if c.toolRows == nil || len(docs) == 0 {
		return nil
	}
	var rowBuf [32]int32
	var wBuf [32]float64
	qrows, qw := rowBuf[:0], wBuf[:0]
	var wsum float64
	for _, r := range rows {
		if slices.Contains(qrows, r) {
			continue
		}
		wt := 0.1 + math.Log(1+float64(r)/200)
		qrows, qw = append(qrows, r), append(qw, wt)
		wsum += wt
	}
	if len(qrows) == 0 {
		return nil
	}
	nq := len(qrows)
	best := grow(sc.msBest, len(docs)*nq)
	clear(best)
	sc.msBest = best
	c.bestSims(qrows, docs, best, sc)
	out := grow(sc.msOut, len(docs))
	sc.msOut = out
	for j := range docs {
		var s float64
		for i, b := range best[j*nq : (j+1)*nq] {
			s += qw[i] * float64(b)
		}
		out[j] = s / wsum
	}
	return out
}

// queryVec returns word-vector row r as a unit float32 vector and its tail
// norms. A word the catalog uses has it in the vocabulary already (the same
// rowF values), so only other words convert.
func (c *Catalog) queryVec(r int32) ([]float32, [2]float32) {
	voc := c.msVocab
	var qv []float32
	if id, ok := voc.ids[r]; ok {
		qv = voc.vecs[int(id)*voc.dims : int(id+1)*voc.dims]
	} else {
		qv = c.wv.rowF(r)
	}
	var qt [2]float32
	if voc.tails != nil {
		qt = tailNorms(qv)
	}
	return qv, qt
}

// wordSim is the floored similarity, (cos - floor) / (1 - floor), of a
// query word to the catalog word with max-sim vocabulary id id.
func (c *Catalog) wordSim(r int32, qv []float32, qt [2]float32, id int32) float32 {
	voc := c.msVocab
	sim := float32(1)
	switch {
	case voc.rows[id] == r:
	case voc.tails != nil:
		v := voc.vecs[int(id)*voc.dims : int(id+1)*voc.dims]
		sim = floorDot(qv, v, qt, [2]float32(voc.tails[2*id:2*id+2]), maxSimFloor)
	default:
		sim = dot(qv, voc.vecs[int(id)*voc.dims:int(id+1)*voc.dims])
	}
	return max((sim-maxSimFloor)/(1-maxSimFloor), 0)
}

// maxSimRanks ranks the top maxSimPool lexical and semantic candidates
// (lexDocs and semDocs, in rank order; lexRank their lexical ranks by
// tool) by max-sim for the query's content words (rows), into ranks, and returns
// the ranked documents.
func (c *Catalog) maxSimRanks(rows []int32, lexDocs, semDocs []int32, lexRank, ranks []int32) []int32 {
	if c.toolRows == nil || c.w.Semantic <= 0 {
		return nil
	}
	var buf [2 * maxSimPool]int32
	docs := append(buf[:0], lexDocs[:min(len(lexDocs), maxSimPool)]...)
	for _, d := range semDocs[:min(len(semDocs), maxSimPool)] {
		if r := lexRank[d]; r == 0 || r > maxSimPool {
			docs = append(docs, d)
		}
	}
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	scores := c.maxSim(rows, docs, sc)
	if scores == nil {
		return nil
	}
	return rankScored(docs, scores, ranks)
}
