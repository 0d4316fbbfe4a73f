package proxy

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/rewrite"
)

// Token accounting: how many tokens the client's tools array costs and how
// many the tools the upstream really received cost. Counts use the model's
// BPE (o200k_base, or cl100k_base for gpt-3.5 and gpt-4 before 4o; an
// o200k_base estimate for other providers' models, whose tokenizers are
// not public) over the tools' JSON text. Providers render tools in their
// own format before counting, so an absolute count is an estimate; both
// sides are counted the same way, so their ratio is fair. Where a count
// meets the upstream's own (the direct estimate), the tools are counted as
// the model reads them (tokenrender.go).

// Encodings the counter chooses between.
const (
	encO200k  = tokenizer.O200kBase
	encCl100k = tokenizer.Cl100kBase
)

// encodingFor picks the BPE a model uses: cl100k_base for gpt-3.5* and the
// gpt-4 models before gpt-4o and gpt-4.1, o200k_base for everything else,
// including unknown models (the default of current OpenAI models).
func encodingFor(model string) tokenizer.Encoding {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // "openai/gpt-4" from routers
	}
	m = strings.TrimPrefix(m, "ft:")
	switch {
	case strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"):
		return encCl100k
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"):
		return encO200k
	case m == "gpt-4", strings.HasPrefix(m, "gpt-4-"), strings.HasPrefix(m, "gpt-4-32k"):
		return encCl100k
	}
	return encO200k
}

// tokenCounter counts tokens of tool definitions with long-lived caches: one
// entry per distinct tool text and one per catalog, so a catalog is
// tokenized once and a round's tools are counted by their positions in it.
// It is safe for concurrent use and loads a BPE table only when a model
// first needs it.
type tokenCounter struct {
	seed     maphash.Seed
	perTool  *lru.Cache[tokenKey, int]
	catalogs *lru.Cache[string, *catalogCount]
	o200k    func() (tokenizer.Codec, error)
	cl100k   func() (tokenizer.Codec, error)
}

type tokenKey struct {
	enc      tokenizer.Encoding
	hash     uint64
	n        int  // the text's length, against hash collisions
	rendered bool // the count of the tool as the model reads it (renderedTool)
}

// Cache sizes: tools are small entries (a key and an int), so the per-tool
// cache holds several large catalogs; catalog totals are tiny.
const (
	toolTokenCacheSize    = 1 << 15
	catalogTokenCacheSize = 1024
)

func newTokenCounter() *tokenCounter {
	perTool, _ := lru.New[tokenKey, int](toolTokenCacheSize) // errors only for size <= 0
	cats, _ := lru.New[string, *catalogCount](catalogTokenCacheSize)
	return &tokenCounter{
		seed:     maphash.MakeSeed(),
		perTool:  perTool,
		catalogs: cats,
		o200k:    sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(encO200k) }),
		cl100k:   sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(encCl100k) }),
	}
}

func (c *tokenCounter) codec(enc tokenizer.Encoding) (tokenizer.Codec, error) {
	if enc == encCl100k {
		return c.cl100k()
	}
	return c.o200k()
}

// tool returns the tokens of one tool's JSON text.
func (c *tokenCounter) tool(enc tokenizer.Encoding, raw string) (int, error) {
	k := tokenKey{enc: enc, hash: maphash.String(c.seed, raw), n: len(raw)}
	if n, ok := c.perTool.Get(k); ok {
		return n, nil
	}
	return c.count(k, raw)
}

// rendered returns the tokens of one tool as the model reads it
// (renderedTool), or of its JSON text for a tool not rendered.
func (c *tokenCounter) rendered(enc tokenizer.Encoding, raw string) (int, error) {
	k := tokenKey{enc: enc, hash: maphash.String(c.seed, raw), n: len(raw), rendered: true}
	if n, ok := c.perTool.Get(k); ok {
		return n, nil
	}
	text, ok := renderedTool(raw)
	if !ok {
		return c.tool(enc, raw)
	}
	return c.count(k, text)
}

// text returns the tokens of a one-off text, uncached: kept in the tool
// cache, texts seen once would push out the catalogs' tools.
func (c *tokenCounter) text(enc tokenizer.Encoding, s string) (int, error) {
	cd, err := c.codec(enc)
	if err != nil {
		return 0, fmt.Errorf("loading %s: %w", enc, err)
	}
	n, err := cd.Count(s)
	if err != nil {
		return 0, fmt.Errorf("counting tokens: %w", err)
	}
	return n, nil
}

// maxCountedText is how much of one tool's text is tokenized: a tool
// past it is counted from its first maxCountedText bytes, and the rest
// estimated at the same tokens per byte. Tokenizing costs about 0.8 s of
// CPU a megabyte, spent before the request goes upstream, and a request
// may bring megabytes of descriptions (eleven tools of 1 MB took 8.9 s to
// answer, passed through); tools of a few KB, every real one, are
// counted exactly.
const maxCountedText = 16 << 10

// count counts text in k's encoding (estimating past maxCountedText) and
// caches the count under k.
func (c *tokenCounter) count(k tokenKey, text string) (int, error) {
	head := text
	if len(text) > maxCountedText {
		head = clip(text, maxCountedText)
	}
	n, err := c.text(k.enc, head)
	if err != nil {
		return 0, err
	}
	if len(head) < len(text) && len(head) > 0 {
		n = int((int64(n)*int64(len(text)) + int64(len(head))/2) / int64(len(head)))
	}
	c.perTool.Add(k, n)
	return n, nil
}

// round returns the tokens of a round's tools array: raws are its items,
// pos each item's position in the client's catalog ct, or -1 for a tool
// of the gateway's own (tool_search). Catalog tools are not hashed again:
// a round sends up to max_active of them, and looking each text up cost
// more than the rest of building the round.
func (c *tokenCounter) round(enc tokenizer.Encoding, ct *catalogTokens, raws []string, pos []int) (int, error) {
	total := 0
	for i, raw := range raws {
		var n int
		if p := pos[i]; p >= 0 {
			n = ct.per[p]
		} else {
			var err error
			if n, err = c.tool(enc, raw); err != nil {
				return 0, err
			}
		}
		total += n + boundary(enc, i, raw)
	}
	return total, nil
}

// boundary corrects the sum of per-tool counts towards the count of the
// whole array's text, measured on the bundled catalog: the brackets cost
// about two tokens; between compact tools o200k_base merges "},{" and saves
// one, cl100k_base breaks even; an indented tool's separator costs one.
// With it the sum lands within about 1% of counting the array at once,
// while each tool is tokenized only once per process.
func boundary(enc tokenizer.Encoding, i int, raw string) int {
	switch {
	case i == 0:
		return 2
	case strings.Contains(raw, "\n"):
		return 1
	case enc == encO200k:
		return -1
	}
	return 0
}

// catalogTokens is a client's tools array counted once: each tool's
// tokens, by position, and the whole array's, as JSON text and as the
// model reads it (rendered).
type catalogTokens struct {
	total    int
	per      []int
	rendered int
	// estimated is set when a tool's text was past maxCountedText: its
	// count is partly an estimate.
	estimated bool
}

// renderedShare scales a count of the catalog's tools' JSON text to the
// tokens the model reads for them: the catalog's rendered count over its
// JSON count.
func (ct *catalogTokens) renderedShare(n int64) int64 {
	if ct == nil || ct.total <= 0 {
		return n
	}
	return n * int64(ct.rendered) / int64(ct.total)
}

// catalogCount is a catalog's count, done or under way: the first caller
// counts, and any other waits for its result (done closes) instead of
// counting again.
type catalogCount struct {
	done chan struct{}
	ct   *catalogTokens
	err  error
}

// catalog returns the tokens of a client's full tools array and of each of
// its tools, cached under key (the turn's catalog key), so the array is
// counted once per catalog.
func (c *tokenCounter) catalog(enc tokenizer.Encoding, key string, tools []rewrite.Tool) (*catalogTokens, error) {
	ck := string(enc) + "|" + key
	if p, ok := c.catalogs.Get(ck); ok {
		<-p.done
		return p.ct, p.err
	}
	p := &catalogCount{done: make(chan struct{})}
	if prev, found, _ := c.catalogs.PeekOrAdd(ck, p); found {
		<-prev.done
		return prev.ct, prev.err
	}
	c.countInto(p, ck, enc, tools)
	return p.ct, p.err
}

// countInto counts tools into p and releases its waiters whatever
// happens: a panic in the tokenizer would otherwise hold every later turn
// of the catalog (and, counted beside a compile, end the process).
func (c *tokenCounter) countInto(p *catalogCount, ck string, enc tokenizer.Encoding, tools []rewrite.Tool) {
	defer func() {
		if r := recover(); r != nil {
			p.ct, p.err = nil, fmt.Errorf("counting a catalog's tokens: %v", r)
		}
		if p.err != nil {
			c.catalogs.Remove(ck) // a later turn tries again
		}
		close(p.done)
	}()
	p.ct, p.err = c.countCatalog(enc, tools)
}

// countCatalog counts tools: each one's JSON text, and as the model reads it.
func (c *tokenCounter) countCatalog(enc tokenizer.Encoding, tools []rewrite.Tool) (*catalogTokens, error) {
	ct := &catalogTokens{per: make([]int, len(tools))}
	for i := range tools {
		n, err := c.tool(enc, tools[i].Raw)
		if err != nil {
			return nil, err
		}
		ct.per[i] = n
		ct.total += n + boundary(enc, i, tools[i].Raw)
		ct.estimated = ct.estimated || len(tools[i].Raw) > maxCountedText
		r, err := c.rendered(enc, tools[i].Raw)
		if err != nil {
			return nil, err
		}
		ct.rendered += r
	}
	return ct, nil
}
