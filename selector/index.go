package selector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// field is one searchable part of a tool document.
type field int

const (
	fName     field = iota // the name split into words
	fWhole                 // the name as one lower-case term
	fTitle                 // Meta.Title
	fKeywords              // Meta.Keywords
	fExamples              // Meta.Examples
	fDesc                  // the description
	fParams                // parameter names and descriptions
	fCategory              // Meta.Category
	fPrefix                // server / namespace prefix of the name
	numFields
)

// fieldParams are BM25F's per-field weight and length normalisation b. The
// name, title and keywords are short and curated, so a hit there says more
// than a hit deep in a long description; b is low on short fields whose
// length says little about focus.
var fieldParams = [numFields]struct{ w, b float64 }{
	fName:     {3.0, 0.3},
	fWhole:    {4.0, 0},
	fTitle:    {2.5, 0.3},
	fKeywords: {2.0, 0.3},
	fExamples: {1.5, 0.5},
	fDesc:     {1.0, 0.75},
	fParams:   {0.4, 0.75},
	fCategory: {1.5, 0.2},
	fPrefix:   {1.0, 0},
}

// bm25K1 is BM25's term-frequency saturation.
const bm25K1 = 1.2

// posting is one document of a term's postings list with its BM25F
// pseudo term frequency (field-weighted and length-normalised, precomputed
// at compile time because field weights are fixed per catalog).
type posting struct {
	doc int32
	wtf float32
}

// termInfo is a term's postings and inverse document frequency.
type termInfo struct {
	idf  float64
	post []posting
}

// ErrEmptyCatalog is returned by Compile for a catalog without tools.
var ErrEmptyCatalog = errors.New("catalog has no tools")

// Catalog is a compiled, immutable, searchable tools catalog. It is safe for
// concurrent use. It does not hold session state: callers pass that in each
// Query.
type Catalog struct {
	tools  []Tool
	byName map[string]int
	first  []string // first line of each description
	an     *analyzer
	terms  map[string]*termInfo
	whole  map[string]int // lower-case full name -> doc
	cfg    Config
	w      Weights
	areas  []string
	sem    *semantic // nil when semantic search is off
}

// Compile builds a Catalog from tools and their ranking configuration. It
// computes everything a search needs up front (postings, BM25F weights,
// exact average field lengths), so a search never waits on compilation work.
// An all-zero cfg.Weights means DefaultWeights. It does not validate anchor
// tool names: unknown names are ignored at search time.
func Compile(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
	if len(tools) == 0 {
		return nil, ErrEmptyCatalog
	}
	an, err := newAnalyzer()
	if err != nil {
		return nil, fmt.Errorf("building analyzer: %w", err)
	}
	c := &Catalog{
		tools:  tools,
		byName: make(map[string]int, len(tools)),
		first:  make([]string, len(tools)),
		an:     an,
		whole:  make(map[string]int, len(tools)),
		cfg:    cfg,
		w:      cfg.Weights,
	}
	if c.w == (Weights{}) {
		c.w = DefaultWeights()
	}
	type docTerms struct {
		tf  map[string]*[numFields]float32
		len [numFields]float64
	}
	docs := make([]docTerms, len(tools))
	var sumLen [numFields]float64
	for i := range tools {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("compiling catalog: %w", err)
			}
		}
		t := &tools[i]
		if _, dup := c.byName[t.Name]; dup {
			return nil, fmt.Errorf("compiling catalog: duplicate tool %q", t.Name)
		}
		c.byName[t.Name] = i
		c.whole[strings.ToLower(t.Name)] = i
		c.first[i] = firstLine(t.Description, 160)
		d := docTerms{tf: make(map[string]*[numFields]float32, 32)}
		add := func(f field, text string) {
			for _, term := range an.terms(text) {
				p := d.tf[term]
				if p == nil {
					p = new([numFields]float32)
					d.tf[term] = p
				}
				p[f]++
				d.len[f]++
			}
		}
		add(fName, t.Name)
		lw := strings.ToLower(t.Name)
		d.tf[lw] = addOne(d.tf[lw], fWhole)
		d.len[fWhole] = 1
		add(fTitle, t.Meta.Title)
		for _, k := range t.Meta.Keywords {
			add(fKeywords, k)
		}
		for _, e := range t.Meta.Examples {
			add(fExamples, e)
		}
		add(fDesc, t.Description)
		for _, p := range t.Params {
			add(fParams, p.Name)
			add(fParams, p.Description)
		}
		add(fCategory, t.Meta.Category)
		add(fPrefix, namePrefix(t.Name))
		for f := range numFields {
			sumLen[f] += d.len[f]
		}
		docs[i] = d
	}
	var avg [numFields]float64
	for f := range numFields {
		avg[f] = sumLen[f] / float64(len(tools))
	}
	c.terms = make(map[string]*termInfo, 4*len(tools))
	for i, d := range docs {
		for term, tf := range d.tf {
			var wtf float64
			for f := range numFields {
				if tf[f] == 0 {
					continue
				}
				fp := fieldParams[f]
				norm := 1.0
				if avg[f] > 0 {
					norm = 1 - fp.b + fp.b*d.len[f]/avg[f]
				}
				wtf += fp.w * float64(tf[f]) / norm
			}
			ti := c.terms[term]
			if ti == nil {
				ti = &termInfo{}
				c.terms[term] = ti
			}
			ti.post = append(ti.post, posting{doc: int32(i), wtf: float32(wtf)})
		}
	}
	n := float64(len(tools))
	for _, ti := range c.terms {
		df := float64(len(ti.post))
		ti.idf = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	c.areas = computeAreas(tools)
	if err := c.initSemantic(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func addOne(p *[numFields]float32, f field) *[numFields]float32 {
	if p == nil {
		p = new([numFields]float32)
	}
	p[f]++
	return p
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

// Names returns the catalog's tool names in their original order.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.tools))
	for i := range c.tools {
		out[i] = c.tools[i].Name
	}
	return out
}

// Areas returns up to max short labels that summarise what the catalog
// covers (its most common categories, else server or name prefixes), for
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
		if p := namePrefix(t.Name); p != "" {
			count[strings.ToLower(p)]++
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

// firstLine returns the first line of s, cut to at most max runes.
func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	r := []rune(s)
	if max > 0 && len(r) > max {
		return strings.TrimSpace(string(r[:max-1])) + "…"
	}
	return s
}
