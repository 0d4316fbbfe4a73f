package selector

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"
)

// fieldOptions index a field's terms and frequencies only: no stored
// values, term vectors or doc values, which the search never reads and
// which would cost compile time and memory.
const fieldOptions = index.IndexField

// buildIndex indexes one bleve document per tool (id = the tool's index)
// in an in-memory scorch index with BM25 scoring, and returns each tool's
// analysed fields. Documents are built directly with their analyzers, so
// the mapping only carries the scoring model. NewMemOnly is not used: its
// upsidedown index ignores BM25.
func buildIndex(ctx context.Context, tools []Tool, an *analyzer, wv *WordVectors) (bleve.Index, *search.BM25Stats, []toolFields, error) {
	m := mapping.NewIndexMapping()
	m.ScoringModel = index.BM25Scoring
	m.IndexDynamic = false
	m.StoreDynamic = false
	m.DocValuesDynamic = false
	idx, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating index: %w", err)
	}
	b := idx.NewBatch()
	docs := make([]*document.Document, len(tools))
	fields := make([]toolFields, len(tools))
	for i := range tools {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				_ = idx.Close()
				return nil, nil, nil, fmt.Errorf("indexing tools: %w", err)
			}
		}
		docs[i], fields[i] = toolDocument(i, &tools[i], an, wv)
		if err := b.IndexAdvanced(docs[i]); err != nil {
			_ = idx.Close()
			return nil, nil, nil, fmt.Errorf("indexing tool %q: %w", tools[i].Name, err)
		}
	}
	if err := idx.Batch(b); err != nil {
		_ = idx.Close()
		return nil, nil, nil, fmt.Errorf("indexing tools: %w", err)
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
	return idx, stats, fields, nil
}

// mapDocs points the catalog at the index's own reader API and maps
// scorch's internal document numbers to tool indices, so a search reads a
// match's tool without converting ids to and from strings.
func (c *Catalog) mapDocs() error {
	adv, err := c.idx.Advanced()
	if err != nil {
		return fmt.Errorf("opening index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return fmt.Errorf("opening index reader: %w", err)
	}
	defer func() { _ = r.Close() }()
	docOf := make([]int32, len(c.tools))
	for i := range c.tools {
		id, err := r.InternalID(strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("looking up tool %q in the index: %w", c.tools[i].Name, err)
		}
		v := id.Value()
		if len(id) == 0 || v >= uint64(len(docOf)) {
			// One batch into an empty index numbers its documents
			// 0..n-1; anything else is not an index built here.
			return fmt.Errorf("tool %q has index document %d of %d", c.tools[i].Name, v, len(docOf))
		}
		docOf[v] = int32(i)
	}
	c.bleveIdx, c.docOf = adv, docOf
	n := len(c.tools)
	c.scratchPool.New = func() any {
		return &searchScratch{
			bm25: make([]float64, n), coord: make([]int32, n), acc: make([]rescoreAcc, n),
			seen: make([]bool, n), lexRank: make([]int32, n), semRank: make([]int32, n), msRank: make([]int32, n),
			sims: make([]float64, n), nbr: make([]nbrScore, n),
		}
	}
	return nil
}

// searchScratch is one search's reusable working memory, pooled per
// catalog because its size is the catalog's.
type searchScratch struct {
	bm25  []float64 // the lexical disjunction's score per tool; all zero between uses
	hits  []int32   // the tools it matched (their bm25 slots set)
	coord []int32   // matching clauses per tool (lexScores); all zero between uses
	// postings holds a query's clauses' postings during lexScores (emptied).
	postings []*termPostings
	acc      []rescoreAcc // the rescorer's sums per tool; all zero between uses
	// rank's candidate marks and ranks per tool (all zero between uses)
	// and its list of scored candidates (emptied).
	seen                     []bool
	lexRank, semRank, msRank []int32
	list                     []scored
	// max-sim's slots per candidate tool and per vocabulary word (all
	// zero between uses), the words it set, and its similarities
	// (emptied); see bestSims.
	docSlot, msSlot, msSet []int32
	msSims                 []float32
	// max-sim's best similarities per candidate and query word, and its
	// scores per candidate (overwritten by each use).
	msBest []float32
	msOut  []float64
	// sims is the semantic signal's score per tool (semRows.scores
	// clears it before use).
	sims []float64
	// nbr is the neighbour field's score per tool and nbrDocs the tools
	// it set (nbrScores; all zero and emptied between uses).
	nbr     []nbrScore
	nbrDocs []int32
	terms   []string // nbrScores' query terms (emptied)
}

func (c *Catalog) scratch() *searchScratch { return c.scratchPool.Get().(*searchScratch) }

// tokens is an already analysed field: handed to bleve as the field's
// analyzer, so every text is analysed once per compile, however many
// fields (and repeats in the all field) it feeds.
type tokens analysis.TokenStream

func (t tokens) Analyze([]byte) analysis.TokenStream { return analysis.TokenStream(t) }

// toolDocument is a tool's bleve document (the all field and the whole
// name) and its analysed fields. A name that is one run-together word
// also gets its pieces (compoundParts; wv may be nil).
func toolDocument(i int, t *Tool, an *analyzer, wv *WordVectors) (*document.Document, toolFields) {
	d := document.NewDocument(strconv.Itoa(i))
	add := func(name string, ts analysis.TokenStream) {
		if len(ts) == 0 {
			return
		}
		d.AddField(document.NewTextFieldCustom(name, nil, nil, fieldOptions, tokens(ts)))
	}
	var params strings.Builder
	for _, p := range t.Params {
		params.WriteString(p.Name)
		params.WriteString(" ; ")
		params.WriteString(p.Description)
		params.WriteString(" ; ")
	}
	analyse := func(s string) analysis.TokenStream {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return an.text.Analyze([]byte(s))
	}
	name := analyse(t.Name)
	if cp := compoundParts(t.Name, an, wv); cp != "" {
		name = append(name, analyse(cp)...)
	}
	title := analyse(t.Meta.Title)
	keywords := analyse(strings.Join(t.Meta.Keywords, " ; "))
	examples := analyse(strings.Join(t.Meta.Examples, " ; "))
	desc := analyse(t.Description)
	ps := analyse(params.String())
	category := analyse(t.Meta.Category)
	prefix := analyse(namePrefix(t.Name))
	var tf toolFields
	tf.whole = lowerName(t.Name)
	for j, ts := range [len(sideFields)]analysis.TokenStream{name, title, keywords, examples, desc, category, prefix} {
		tf.side[j] = countTerms(ts)
	}
	// all: every field once per unit of its weight, so a term's frequencies
	// across fields add up before BM25 saturates them (BM25F's combination,
	// which per-field scores summed at query time cannot give).
	var all analysis.TokenStream
	for _, part := range []struct {
		ts   analysis.TokenStream
		reps int
	}{
		{name, 3}, {title, 2}, {keywords, 2}, {examples, 1}, {desc, 1}, {ps, 1}, {category, 1}, {prefix, 1},
	} {
		for range part.reps {
			all = append(all, part.ts...)
		}
	}
	tf.all = countTerms(all)
	if strings.TrimSpace(t.Name) != "" {
		d.AddField(document.NewTextFieldCustom(fWhole, nil, []byte(t.Name), fieldOptions, an.whole))
	}
	add(fAll, all)
	return d, tf
}

// nameQueryWords is the most words a query may have for a word without a
// separator that is, case aside, some tool's whole name ("read",
// "sendmessage") to match that name as one written with a separator
// does. Such a short query spells what it looks for; in a longer request
// the word is more often prose that a tool happens to be named after (a
// MetaTool catalog has tools named now, local, search and review, a BFCL
// one temperature, integral and sum): matching those cost MetaTool
// R@5 0.004 and BFCL 0.001 on the dev sets. A word written with an inner
// capital (sendMessage) is an identifier however long the query.
const nameQueryWords = 3

// atMostWords reports whether text has at most n space-separated words.
func atMostWords(text string, n int) bool {
	for range strings.FieldsSeq(text) {
		if n--; n < 0 {
			return false
		}
	}
	return true
}

// innerCapital reports whether tok has a lower-case letter followed by an
// upper-case one, as a camelCase identifier has and a prose word does not.
func innerCapital(tok string) bool {
	prevLower := false
	for _, r := range tok {
		if prevLower && unicode.IsUpper(r) {
			return true
		}
		prevLower = unicode.IsLower(r)
	}
	return false
}

// lexQuery is a query analysed once: its weighted terms and its raw
// tokens (candidates for a verbatim tool name).
type lexQuery struct {
	terms map[string]float64 // term -> weight; repeats keep their largest
	raw   []string
	nbr   bool // match the document-side neighbour field too (docexpand.go)
}

func (q *lexQuery) add(terms []string, weight float64) {
	for _, t := range terms {
		if weight > q.terms[t] {
			q.terms[t] = weight
		}
	}
}

// analyzeQuery analyses text with the text chain (the same as every
// field's but the whole name's) at weight, and returns its content words
// (contentWords of the plain chain) from the same pass.
func (c *Catalog) analyzeQuery(text string, weight float64) (*lexQuery, []string) {
	q := &lexQuery{terms: map[string]float64{}}
	terms, words := c.an.query(text)
	q.add(terms, weight)
	c.dropBoilerplate(q)
	// A token with a separator may spell a name and is always matched
	// against the whole names (lower case neither adds nor removes a
	// separator). One without is matched only when it is some tool's
	// whole name and the query spells names (nameQueryWords): the
	// analysed terms alone rank a one-word name such as read below the
	// longer names that share its word (read_file, read_text_file), and
	// sendMessage below the names that split into send and message.
	short := atMostWords(text, nameQueryWords)
	for tok := range strings.FieldsSeq(text) {
		tok = strings.Trim(tok, ".,;:!?\"'()[]{}`")
		sep := strings.ContainsAny(tok, "_.-:")
		if !sep && !short && !innerCapital(tok) {
			continue // lowered only when it may be kept: ToLower allocates
		}
		if low := strings.ToLower(tok); sep || c.wholeNames[low] {
			q.raw = append(q.raw, low)
		}
	}
	return q, c.contentWords(words)
}

// queryTerm is an analysed query term some tool has, with what the
// catalog knows of it.
type queryTerm struct {
	term  string
	stats *termStats
}

// indexedTerms returns q's terms that some tool has, sorted, so the float
// sums (and so ties) do not depend on map order. A term no tool has adds
// only a constant to every document's score (it changes the query norm and
// the coord denominator alike for all), so leaving it out ranks the same
// and spares bleve a term searcher and the rescorer its lookups: a prose
// query has many such words.
func (c *Catalog) indexedTerms(q *lexQuery) []queryTerm {
	terms := make([]queryTerm, 0, len(q.terms))
	for t := range q.terms {
		if st := c.fields.terms[t]; st != nil {
			terms = append(terms, queryTerm{t, st})
		}
	}
	slices.SortFunc(terms, func(a, b queryTerm) int { return strings.Compare(a.term, b.term) })
	return terms
}

// search runs q against the index and returns up to n documents with
// their scores (bleve's, completed by the side fields), best first. It
// keeps a few more than n of bleve's best, so a document the side fields
// lift can make the cut.
func (c *Catalog) search(ctx context.Context, q *lexQuery, n int) ([]int32, []float64, error) {
	if len(q.terms) == 0 && len(q.raw) == 0 {
		return nil, nil, nil
	}
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	terms := c.indexedTerms(q)
	if len(terms) == 0 && len(q.raw) == 0 {
		return c.nbrOnly(q, n, sc)
	}
	err := c.lexScores(ctx, c.lexClauses(q, terms), sc)
	defer func() {
		for _, d := range sc.hits {
			sc.bm25[d] = 0
		}
		sc.hits = sc.hits[:0]
	}()
	if err != nil {
		return nil, nil, err
	}
	// topHits orders the hits once rescored: bleve's order is not needed.
	top := topSetAmong(sc.hits, sc.bm25, n+n/3)
	rs := c.newRescorer(q, terms, sc.acc)
	rs.accumulate()
	// Clearing every tool's sums measured cheaper than walking the
	// query's postings again to zero only the touched ones.
	defer clear(sc.acc)
	hits := make([]docScore, len(top))
	for i, d := range top {
		hits[i] = docScore{d, rs.score(d, sc.bm25[d])}
	}
	docs, scores := topHits(c.addNbr(q, rs, hits, sc), n)
	return docs, scores, nil
}

// topHits returns the n best hits' documents and scores, best first, ties
// by document (so the order is total).
func topHits(hits []docScore, n int) ([]int32, []float64) {
	sortByRank(hits)
	hits = hits[:min(n, len(hits))]
	docs := make([]int32, len(hits))
	scores := make([]float64, len(hits))
	for i, h := range hits {
		docs[i], scores[i] = h.doc, h.score
	}
	return docs, scores
}

// bm25Context hands bleve's searchers what SearchInContext would put in
// the context: BM25 scoring and the catalog's exact field statistics.
type bm25Context struct {
	context.Context
	stats *search.BM25Stats
}

func (b bm25Context) Value(key any) any {
	switch key {
	case search.BM25StatsKey:
		return b.stats
	case search.GetScoringModelCallbackKey:
		return search.GetScoringModelCallbackFn(bm25Model)
	}
	return b.Context.Value(key)
}

func bm25Model() string { return index.BM25Scoring }

// coverage is the share of the query's idf mass that tool d's text
// contains: how much of the request the tool speaks to.
func (c *Catalog) coverage(q *lexQuery, d int32) float64 {
	if len(q.terms) == 0 {
		return 0
	}
	// The terms in a set order: summed in map order, the same query's
	// coverage could differ in the last bit from one search to the next
	// and fall on either side of expandMaxCover or a rounding of the
	// confidence.
	var buf [32]string
	terms := buf[:0]
	for term := range q.terms {
		terms = append(terms, term)
	}
	slices.Sort(terms)
	n := float64(len(c.tools))
	var mass, got float64
	for _, term := range terms {
		w := q.terms[term]
		df := c.fields.df(term)
		if df == 0 {
			continue // a word no tool uses says nothing about coverage
		}
		idf := w * math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5))
		mass += idf
		if c.fields.has(term, d) {
			got += idf
		}
	}
	if mass == 0 {
		return 0
	}
	return got / mass
}
