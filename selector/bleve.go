package selector

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
)

// fieldOptions index a field's terms and frequencies only: no stored
// values, term vectors or doc values, which the search never reads and
// which would cost compile time and memory.
const fieldOptions = index.IndexField

// buildIndex indexes one bleve document per tool (id = the tool's index)
// in an in-memory scorch index with BM25 scoring. Documents are built
// directly with their analyzers, so the mapping only carries the scoring
// model. NewMemOnly is not used: its upsidedown index ignores BM25.
func buildIndex(ctx context.Context, tools []Tool, an *analyzer) (bleve.Index, *search.BM25Stats, error) {
	m := mapping.NewIndexMapping()
	m.ScoringModel = index.BM25Scoring
	m.IndexDynamic = false
	m.StoreDynamic = false
	m.DocValuesDynamic = false
	idx, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("creating index: %w", err)
	}
	b := idx.NewBatch()
	docs := make([]*document.Document, len(tools))
	for i := range tools {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				_ = idx.Close()
				return nil, nil, fmt.Errorf("indexing tools: %w", err)
			}
		}
		docs[i] = toolDocument(i, &tools[i], an)
		if err := b.IndexAdvanced(docs[i]); err != nil {
			_ = idx.Close()
			return nil, nil, fmt.Errorf("indexing tool %q: %w", tools[i].Name, err)
		}
	}
	if err := idx.Batch(b); err != nil {
		_ = idx.Close()
		return nil, nil, fmt.Errorf("indexing tools: %w", err)
	}
	// bleve's BM25 takes a field's average length to be its distinct terms
	// per document (ceil(dictionary size / docs)), which on tool texts is
	// 2-5 times too short and punishes every long description and
	// parameter list. The index's own analysed lengths (known once the
	// batch is in) give the true averages, handed to each search through
	// bleve's BM25 pre-search statistics.
	stats := &search.BM25Stats{DocCount: float64(len(tools)), FieldCardinality: map[string]int{}}
	for _, d := range docs {
		d.VisitFields(func(f index.Field) {
			stats.FieldCardinality[f.Name()] += f.AnalyzedLength()
		})
	}
	return idx, stats, nil
}

// toolDocument is a tool's bleve document: every field analysed by the
// text chain except the whole name.
func toolDocument(i int, t *Tool, an *analyzer) *document.Document {
	d := document.NewDocument(strconv.Itoa(i))
	add := func(name, text string, a analysis.Analyzer) {
		if strings.TrimSpace(text) == "" {
			return
		}
		d.AddField(document.NewTextFieldCustom(name, nil, []byte(text), fieldOptions, a))
	}
	add(fName, t.Name, an.text)
	add(fWhole, t.Name, an.whole)
	add(fTitle, t.Meta.Title, an.text)
	add(fKeywords, strings.Join(t.Meta.Keywords, " ; "), an.text)
	add(fExamples, strings.Join(t.Meta.Examples, " ; "), an.text)
	add(fDesc, t.Description, an.text)
	add(fLead, leadSentence(t.Description), an.text)
	var params strings.Builder
	for _, p := range t.Params {
		params.WriteString(p.Name)
		params.WriteString(" ; ")
		params.WriteString(p.Description)
		params.WriteString(" ; ")
	}
	add(fParams, params.String(), an.text)
	add(fCategory, t.Meta.Category, an.text)
	add(fPrefix, namePrefix(t.Name), an.text)
	// all: every field once per unit of its weight, so a term's frequencies
	// across fields add up before BM25 saturates them (BM25F's combination,
	// which per-field scores summed at query time cannot give).
	var all strings.Builder
	for _, part := range []struct {
		text string
		reps int
	}{
		{t.Name, 3}, {t.Meta.Title, 2}, {strings.Join(t.Meta.Keywords, " ; "), 2},
		{strings.Join(t.Meta.Examples, " ; "), 1}, {t.Description, 1}, {params.String(), 1},
		{t.Meta.Category, 1}, {namePrefix(t.Name), 1},
	} {
		if strings.TrimSpace(part.text) == "" {
			continue
		}
		for range part.reps {
			all.WriteString(part.text)
			all.WriteString(" ; ")
		}
	}
	add(fAll, all.String(), an.text)
	return d
}

// leadSentence returns the first sentence of a description: up to the
// first ". ", newline or end.
func leadSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return s
}

// lexQuery is a query analysed once: its weighted terms and its raw
// tokens (candidates for a verbatim tool name).
type lexQuery struct {
	terms map[string]float64 // term -> weight; repeats keep their largest
	raw   []string
}

func (q *lexQuery) add(terms []string, weight float64) {
	for _, t := range terms {
		if weight > q.terms[t] {
			q.terms[t] = weight
		}
	}
}

// analyzeQuery analyses text with the text chain (the same as every
// field's but the whole name's) at weight.
func (c *Catalog) analyzeQuery(text string, weight float64) *lexQuery {
	q := &lexQuery{terms: map[string]float64{}}
	q.add(c.an.terms(text), weight)
	for _, tok := range strings.Fields(text) {
		tok = strings.ToLower(strings.Trim(tok, ".,;:!?\"'()[]{}`"))
		if strings.ContainsAny(tok, "_.-:") {
			q.raw = append(q.raw, tok)
		}
	}
	return q
}

// bleveQuery is the BM25F-style disjunction: for every field with a
// boost, every query term as a term query boosted by field boost × term
// weight (what a MatchQuery per field with SetBoost builds, without
// re-analysing the query per field), plus the raw tokens against the
// whole-name field.
func (c *Catalog) bleveQuery(q *lexQuery) query.Query {
	// Sorted, so the float sums (and so ties) do not depend on map order.
	terms := make([]string, 0, len(q.terms))
	for t := range q.terms {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	var ds []query.Query
	for _, fb := range fieldBoosts {
		if fb.boost == 0 || c.stats.FieldCardinality[fb.field] == 0 {
			continue
		}
		for _, term := range terms {
			tq := query.NewTermQuery(term)
			tq.SetField(fb.field)
			tq.SetBoost(fb.boost * q.terms[term])
			ds = append(ds, tq)
		}
	}
	if c.stats.FieldCardinality[fWhole] > 0 {
		for _, tok := range q.raw {
			tq := query.NewTermQuery(tok)
			tq.SetField(fWhole)
			tq.SetBoost(wholeBoost)
			ds = append(ds, tq)
		}
	}
	return query.NewDisjunctionQuery(ds)
}

// search runs q against the index and returns up to n documents with
// their bleve scores, best first.
func (c *Catalog) search(ctx context.Context, q *lexQuery, n int) ([]int32, []float64, error) {
	if len(q.terms) == 0 && len(q.raw) == 0 {
		return nil, nil, nil
	}
	req := bleve.NewSearchRequestOptions(c.bleveQuery(q), n, 0, false)
	req.PreSearchData = map[string]any{search.BM25PreSearchDataKey: c.stats}
	res, err := c.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("searching index: %w", err)
	}
	docs := make([]int32, 0, len(res.Hits))
	scores := make([]float64, 0, len(res.Hits))
	for _, h := range res.Hits {
		d, err := strconv.Atoi(h.ID)
		if err != nil || d < 0 || d >= len(c.tools) {
			continue
		}
		docs = append(docs, int32(d))
		scores = append(scores, h.Score)
	}
	return docs, scores, nil
}

// coverage is the share of the query's idf mass that tool d's text
// contains: how much of the request the tool speaks to.
func (c *Catalog) coverage(q *lexQuery, d int32) float64 {
	if len(q.terms) == 0 {
		return 0
	}
	t := &c.tools[d]
	have := map[string]bool{}
	for _, s := range []string{t.Name, t.Meta.Title, strings.Join(t.Meta.Keywords, " "), strings.Join(t.Meta.Examples, " "), t.Description, t.Meta.Category} {
		for _, term := range c.an.terms(s) {
			have[term] = true
		}
	}
	for _, p := range t.Params {
		for _, term := range c.an.terms(p.Name + " " + p.Description) {
			have[term] = true
		}
	}
	n := float64(len(c.tools))
	var mass, got float64
	for term, w := range q.terms {
		df, ok := c.df[term]
		if !ok {
			continue // a word no tool uses says nothing about coverage
		}
		idf := w * math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5))
		mass += idf
		if have[term] {
			got += idf
		}
	}
	if mass == 0 {
		return 0
	}
	return got / mass
}

// docFreqs reads each term's document frequency (the largest over the
// text fields) from the index's dictionaries, for coverage.
func docFreqs(idx bleve.Index) (map[string]int, error) {
	adv, err := idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("opening index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("opening index reader: %w", err)
	}
	defer r.Close()
	df := map[string]int{}
	for _, fb := range fieldBoosts {
		fd, err := r.FieldDict(fb.field)
		if err != nil {
			return nil, fmt.Errorf("reading field %s: %w", fb.field, err)
		}
		for {
			e, err := fd.Next()
			if err != nil {
				_ = fd.Close()
				return nil, fmt.Errorf("reading field %s: %w", fb.field, err)
			}
			if e == nil {
				break
			}
			if int(e.Count) > df[e.Term] {
				df[e.Term] = int(e.Count)
			}
		}
		_ = fd.Close()
	}
	return df, nil
}
