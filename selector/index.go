package selector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/rewrite"
)

// Fields of a tool: all, name and whole are bleve's (the query searches
// them); the others are scored beside bleve (sideFields). Measured on the
// dev sets: all alone or the separate fields alone (per-field BM25 summed,
// as a disjunction does) both rank worse than all plus small per-field
// boosts; the parameters only help through all, the description's lead
// sentence not at all.
const (
	fName     = "name"     // the name split into words
	fWhole    = "whole"    // the name as one lower-case term
	fTitle    = "title"    // Meta.Title
	fKeywords = "keywords" // Meta.Keywords
	fExamples = "examples" // Meta.Examples
	fDesc     = "desc"     // the description
	fCategory = "category" // Meta.Category
	fPrefix   = "prefix"   // server / namespace prefix of the name
	fAll      = "all"      // every field, repeated by weight
)

// wholeBoost is the boost of a query token that spells a tool's full name.
const wholeBoost = 8.0

// ErrEmptyCatalog is returned by Compile for a catalog without tools.
var ErrEmptyCatalog = errors.New("catalog has no tools")

// Catalog is a compiled, immutable, searchable tools catalog, as one order
// of its tools speaks of it (InOrder gives another order the same
// compiled catalog). It is safe for concurrent use. It does not hold
// session state: callers pass that in each Query.
type Catalog struct {
	*catalogCore
	// pos is each tool's position in the order this Catalog speaks in
	// (the tools array Compile was given, or the names InOrder was), the
	// positions Names, Position and Query.Skip speak in.
	pos []int32
}

// catalogCore is what compiling makes of a set of tools, in name order
// whatever the order they came in (canonical.go), so that every order of
// the same tools shares it (InOrder): an index, its memos and its
// background work, megabytes where an order is 4 bytes a tool.
type catalogCore struct {
	// tools are in name order (canonical.go): a tool's index in them, its
	// document, is what every tie between tools falls to.
	tools  []Tool
	byName map[string]int // name -> document
	first  []string       // first line of each description
	an     *analyzer
	idx    bleve.Index // in-memory scorch, BM25; one document per tool, id = index in tools
	// bleveIdx is idx's scorch index, which bleveTop searches directly;
	// docOf maps its internal document numbers to tool indices.
	bleveIdx    index.Index
	docOf       []int32
	scratchPool sync.Pool         // *searchScratch
	stats       *search.BM25Stats // exact field lengths for bleve's BM25
	// fields are the tools' analysed fields as postings, with their
	// document frequencies and lengths: the side fields' scores and
	// coverage come from them.
	fields     *fieldStats
	wholes     []string        // each tool's lower-case full name (its whole-field term)
	wholeNames map[string]bool // the same names as a set
	cfg        Config
	w          Weights
	areas      []string
	sem        *semantic // nil when semantic search is off
	// wv and nbs are the offline word vectors and their neighbour table,
	// for query expansion (both nil if either fails to load: no expansion).
	wv  *WordVectors
	nbs *neighbourTable
	// nbr is the document-side neighbour field (docexpand.go); nil when
	// Weights.DocNeighbours is 0 or the word vectors are missing.
	nbr *nbrField
	// genTerms and genWords are the generic request words (stemmed and
	// plain).
	genTerms, genWords map[string]bool
	// toolRows are each tool's distinct words as ids into msVocab (max-sim).
	toolRows [][]int32
	msVocab  *maxSimVocab
	// msWords remembers query words' max-sim rows (maxsimcache.go); nil
	// for vocabularies too large to compare whole.
	msWords *wordMemo[[]docSim]
	// postingsCache remembers bleve's term scores per (field, term)
	// (postings.go).
	postingsCache *lru.Cache[fieldTerm, *termPostings]
	// hasAvoid reports whether any tool has avoid_when phrases (else a
	// search need not analyse the query for them).
	hasAvoid bool
	// compiledBytes is the heap compiling left the catalog holding
	// (heapBytes), and memoBytes what its postings memos have filled
	// since; heldBytes adds the other memos' own counts.
	compiledBytes int64
	memoBytes     atomic.Int64
	// orders are the other orders of its tools that callers spoke in
	// lately (InOrder), a few at most.
	orders orderViews
}

// Compile builds a Catalog from tools and their ranking configuration: a
// bleve index (in-memory scorch, BM25 scoring) with one document per tool,
// and the tool vectors of semantic search, so a search never waits on
// compilation work. An all-zero cfg.Weights means DefaultWeights. It does
// not validate anchor tool names: unknown names are ignored at search time.
// The same tools in any order rank the same (canonical.go); tools is not
// modified, and Names and Position keep its order.
func Compile(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
	if len(tools) == 0 {
		return nil, ErrEmptyCatalog
	}
	an, err := newAnalyzer()
	if err != nil {
		return nil, fmt.Errorf("building analyzer: %w", err)
	}
	tools, pos := canonicalOrder(tools)
	c := &Catalog{catalogCore: &catalogCore{
		tools:  tools,
		byName: make(map[string]int, len(tools)),
		first:  make([]string, len(tools)),
		an:     an,
		cfg:    cfg,
		w:      cfg.Weights,
	}, pos: pos}
	if c.w == (Weights{}) {
		c.w = DefaultWeights()
	}
	for i := range tools {
		t := &tools[i]
		if _, dup := c.byName[t.Name]; dup {
			return nil, fmt.Errorf("compiling catalog: duplicate tool %q", t.Name)
		}
		c.byName[t.Name] = i
		c.hasAvoid = c.hasAvoid || len(t.Meta.AvoidWhen) > 0
		c.first[i] = rewrite.FirstLine(t.Description, 160)
	}
	wv, wvErr := DefaultWordVectors()
	if wvErr != nil {
		wv = nil
	}
	var tf []toolFields
	if c.idx, c.stats, tf, err = buildIndex(ctx, tools, an, wv); err != nil {
		return nil, fmt.Errorf("compiling catalog: %w", err)
	}
	// The index's scorch instance runs a goroutine until closed; the
	// catalog is shared through the cache, in every order of its tools,
	// and may be searched after its eviction, so the index closes when no
	// order of it is reachable.
	runtime.AddCleanup(c.catalogCore, func(idx bleve.Index) { _ = idx.Close() }, c.idx)
	if err := c.mapDocs(); err != nil {
		return nil, fmt.Errorf("compiling catalog: %w", err)
	}
	c.fields = newFieldStats(tf)
	c.wholes = make([]string, len(tools))
	c.wholeNames = make(map[string]bool, len(tools))
	for i := range tf {
		c.wholes[i] = tf[i].whole
		c.wholeNames[tf[i].whole] = true
	}
	c.areas = computeAreas(tools)
	c.genTerms, c.genWords = an.boilerplate()
	if wvErr == nil {
		if nbs, err := loadNeighbours(); err == nil {
			c.wv, c.nbs = wv, nbs
		}
	}
	words := c.initMaxSim()
	c.msWords = newMaxSimCache(c.msVocab, len(c.tools))
	c.postingsCache = newPostingsCache(&c.memoBytes)
	c.initNbrField()
	if err := c.initSemantic(ctx, words); err != nil {
		return nil, err
	}
	c.compiledBytes = c.heapBytes()
	return c, nil
}

// stopBackground ends the catalog's background work (the remote
// embedding of its tools, running or waiting): its cache let it go.
func (c *Catalog) stopBackground() {
	if c.sem != nil && c.sem.remote != nil {
		c.sem.remote.stop()
	}
}

// startBackground begins the catalog's background work when its cache
// held it back (Config.embedLater): a request that used it was accepted.
func (c *Catalog) startBackground() {
	if c.sem != nil && c.sem.remote != nil {
		c.sem.remote.start()
	}
}

// Len returns the number of tools in the catalog.
func (c *Catalog) Len() int { return len(c.tools) }

// Tool returns the tool called name, as compiled (with its enrichment).
func (c *Catalog) Tool(name string) (Tool, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Tool{}, false
	}
	return c.tools[i], true
}

// Position returns where the tool called name stands in Names: its
// position in the tools array Compile was given.
func (c *Catalog) Position(name string) (int, bool) {
	d, ok := c.byName[name]
	if !ok {
		return 0, false
	}
	return int(c.pos[d]), true
}

// Names returns the catalog's tool names in their original order, the
// order of the tools array Compile was given (the catalog ranks in its
// own, canonical.go).
func (c *Catalog) Names() []string {
	out := make([]string, len(c.tools))
	for d := range c.tools {
		out[c.pos[d]] = c.tools[d].Name
	}
	return out
}

// Areas returns up to max short labels that summarise what the catalog
// covers (its most common categories, else server or name prefixes, or
// the word after a prefix that is a verb: see areaLabel), for
// the tool_search description. It does not describe individual tools.
func (c *Catalog) Areas(max int) []string {
	if max <= 0 || max >= len(c.areas) {
		return append([]string(nil), c.areas...)
	}
	return append([]string(nil), c.areas[:max]...)
}

// computeAreas ranks categories and shared name prefixes by how many tools
// they cover; a label used by a single tool is not an area.
func computeAreas(tools []Tool) []string {
	count := map[string]int{}
	for _, t := range tools {
		if t.Meta.Category != "" {
			count[t.Meta.Category]++
			continue
		}
		if p := areaLabel(t.Name); p != "" {
			count[p]++
		}
	}
	type kv struct {
		k string
		n int
	}
	var list []kv
	for k, n := range count {
		if n >= 2 {
			list = append(list, kv{k, n})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].k < list[j].k
	})
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.k
	}
	return out
}
