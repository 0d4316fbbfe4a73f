package selector

import (
	"context"
	"sync/atomic"
)

// semantic holds a catalog's tool vectors and turns a query into one.
type semantic struct {
	// remote, when not nil, ranks with a remote embedder's vectors, which
	// arrive later (computed in the background); the offline vectors below
	// rank whenever it cannot.
	remote *remoteSemantic
	vecs   atomic.Pointer[[][]float32] // per document, unit length, nil entries allowed
	// query embeds a query: text as written, words its content words
	// (the offline vectors use the words, a remote embedder the text).
	query func(ctx context.Context, text string, words []string) []float32
	// rows, for the offline vectors, scores the tools from remembered
	// per-word rows instead (semrows.go).
	rows *semRows
}

// toolText is what a tool's embedding is computed from: its name twice
// (names are dense with meaning), title, keywords, examples, category and
// description.
func toolText(t *Tool) (words string, nameText string) {
	nameText = splitIdent(t.Name)
	s := nameText + " " + t.Meta.Title + " " + t.Meta.Category
	for _, k := range t.Meta.Keywords {
		s += " " + k
	}
	for _, e := range t.Meta.Examples {
		s += " " + e
	}
	return s + " " + t.Description, nameText
}

// initSemantic prepares semantic search when its weight is on: the
// offline word vectors synchronously (averaging is cheap) and, with the
// Config's Embedder, the remote vectors in the background. The offline
// vectors rank whenever the remote ones cannot (not computed yet, the
// endpoint failing, a query without a vector): a failing endpoint must
// not rank worse than no endpoint. A ranking never mixes the two spaces.
// all, when not nil, holds each tool's toolText words, already analysed.
func (c *Catalog) initSemantic(ctx context.Context, all [][]string) error {
	if c.w.Semantic <= 0 {
		return nil
	}
	s := &semantic{}
	wv, err := DefaultWordVectors()
	if err != nil && c.cfg.Embedder == nil {
		return err
	}
	if err == nil {
		vecs := c.toolVectors(wv, all)
		removeCommon(vecs, commonShare)
		s.vecs.Store(&vecs)
		s.query = func(_ context.Context, _ string, words []string) []float32 {
			return wv.average(words, nil)
		}
		s.rows = newSemRows(wv, vecs)
	}
	if c.cfg.Embedder != nil {
		s.remote = c.startRemote(ctx, c.cfg.Embedder)
	}
	c.sem = s
	return nil
}

// toolVectors returns each tool's rarity-weighted average word vector
// (name words twice); all, when not nil, holds each tool's toolText words.
func (c *Catalog) toolVectors(wv *WordVectors, all [][]string) [][]float32 {
	vecs := make([][]float32, len(c.tools))
	for i := range c.tools {
		text, name := toolText(&c.tools[i])
		var words []string
		if all != nil {
			words = all[i]
		} else {
			words = c.an.words(text)
		}
		nameWords := len(c.an.words(name))
		weights := make([]float64, len(words))
		for j := range words {
			weights[j] = 1
			if j < nameWords {
				weights[j] = 2
			}
		}
		vecs[i] = wv.average(words, weights)
	}
	return vecs
}

// commonShare is how much of the catalog's common direction (the unit
// mean of its tool vectors) removeCommon takes out of each tool vector.
// Averaged word vectors share a large component (every tool text is made
// of the same "get / list / data / information" vocabulary), so tools with
// generic texts sit close to every query. Taking out part of it, the
// common-component removal of SIF sentence embeddings (Arora et al.,
// 2017), leaves what tells the tools apart. Measured on the dev sets
// (R@1/R@5/R@10): mcp +0.006/+0.008/+0.025, bfcl +0.001/+0.001/±0,
// metatool +0.001/-0.002/-0.001; shares 0.3-0.7 measure within ±0.004 of
// 0.5, 1.0 (the whole direction) costs metatool R@10 0.012. Removing it
// from the query vector as well: no better.
const commonShare = 0.5

// removeCommon subtracts share × each vector's projection on the vectors'
// unit mean and renormalises them, in place. nil vectors stay nil.
func removeCommon(vecs [][]float32, share float32) {
	var u []float32
	for _, v := range vecs {
		if v == nil {
			continue
		}
		if u == nil {
			u = make([]float32, len(v))
		}
		for i, x := range v {
			u[i] += x
		}
	}
	if u = normalize(u); u == nil {
		return
	}
	for j, v := range vecs {
		if v == nil {
			continue
		}
		p := share * dot(u, v)
		for i := range v {
			v[i] -= p * u[i]
		}
		vecs[j] = normalize(v)
	}
}

// ranked returns the n tools whose vectors are most similar to the
// query's, best first (ties by document), with the remote vectors when
// they can, else the offline ones. It returns nil when vectors are not
// ready, the query has no known word, or the n are all alike: the
// semantic signal enters the ensemble by rank alone, and a ranking of
// equals says nothing. buf (one slot per tool) holds the scores of the
// remembered rows; budget, when not nil, bounds the wait for the query's
// remote vector.
func (s *semantic) ranked(ctx context.Context, text string, budget *EmbedBudget, words []string, rows []int32, n int, buf []float64) []int32 {
	var sims []float64
	if s.remote != nil {
		sims = s.remote.sims(ctx, text, budget, buf)
	}
	if sims == nil {
		sims = s.offlineSims(ctx, text, words, rows, buf)
	}
	if sims == nil {
		return nil
	}
	top := topDocs(sims, n)
	if len(top) == 0 || !(sims[top[0]] > sims[top[len(top)-1]]) {
		return nil
	}
	return top
}

// offlineSims scores the tools with the offline word vectors, or returns
// nil when there are none or the query has no known word.
func (s *semantic) offlineSims(ctx context.Context, text string, words []string, rows []int32, buf []float64) []float64 {
	vp := s.vecs.Load()
	if vp == nil {
		return nil
	}
	if s.rows != nil {
		return s.rows.scores(rows, buf)
	}
	qv := s.query(ctx, text, words)
	if qv == nil {
		return nil
	}
	sims := make([]float64, len(*vp))
	for i, v := range *vp {
		if v != nil {
			sims[i] = float64(dot(qv, v))
		}
	}
	return sims
}
