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
	sets     *weighedLRU[string, *setCount] // by encoding and tool set (toolset.go)
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
// cache holds several large catalogs; catalog totals are tiny. A set's
// count keeps its tools' names besides, so its cache is bounded by their
// bytes too.
const (
	toolTokenCacheSize    = 1 << 15
	catalogTokenCacheSize = 1024
	setTokenCacheSize     = 256
	setTokenCacheBytes    = 64 << 20
)

func newTokenCounter() *tokenCounter {
	perTool, _ := lru.New[tokenKey, int](toolTokenCacheSize) // errors only for size <= 0
	cats, _ := lru.New[string, *catalogCount](catalogTokenCacheSize)
	sets := newWeighedLRU[string, *setCount](setTokenCacheSize, setTokenCacheBytes)
	return &tokenCounter{
		seed:     maphash.MakeSeed(),
		perTool:  perTool,
		catalogs: cats,
		sets:     sets,
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
// its tools, cached under key (the array's text key), so the array is
// counted once. set, unless "", is the key of the array's tool set
// (toolset.go): another order of the same tools is not counted again but
// laid out from the set's count.
func (c *tokenCounter) catalog(enc tokenizer.Encoding, key, set string, tools []rewrite.Tool) (*catalogTokens, error) {
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
	c.countInto(p, ck, enc, set, tools)
	return p.ct, p.err
}

// countInto counts tools into p and releases its waiters whatever
// happens: a panic in the tokenizer would otherwise hold every later turn
// of the catalog (and, counted beside a compile, end the process).
func (c *tokenCounter) countInto(p *catalogCount, ck string, enc tokenizer.Encoding, set string, tools []rewrite.Tool) {
	defer func() {
		if r := recover(); r != nil {
			p.ct, p.err = nil, fmt.Errorf("counting a catalog's tokens: %v", r)
		}
		if p.err != nil {
			c.catalogs.Remove(ck) // a later turn tries again
		}
		close(p.done)
	}()
	p.ct, p.err = c.countSet(enc, set, tools)
}

// countSet counts tools, in their order, from the count of their set
// when another order of it was counted, else by counting each tool
// (countCatalog), keeping the set's count for its other orders.
func (c *tokenCounter) countSet(enc tokenizer.Encoding, set string, tools []rewrite.Tool) (*catalogTokens, error) {
	if set == "" {
		return c.countCatalog(enc, tools)
	}
	sk := string(enc) + "|" + set
	if s, ok := c.sets.Get(sk); ok {
		if ct, ok := s.inOrder(enc, tools); ok {
			return ct, nil
		}
	}
	ct, err := c.countCatalog(enc, tools)
	if err != nil {
		return nil, err
	}
	if s := newSetCount(ct, tools); s != nil {
		c.sets.Add(sk, s, s.bytes)
	}
	return ct, nil
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

// setCount is a tool set's count: one order's, and each tool's place in
// that order by name, from which any other order of the set is laid out
// (inOrder) where counting it again would hash and look up every tool
// twice (about 70 µs at 200 tools with every tool's count cached, as
// long as tokenizing them when the per-tool cache has let them go).
type setCount struct {
	ct    *catalogTokens
	at    map[string]int32 // names are the set's own copies
	bytes int              // what it holds: its names, its map's slots and the count's ints
}

// newSetCount keeps ct, the count of tools, for their other orders; nil
// when two tools share a name, which no other order could be laid out
// from by name.
func newSetCount(ct *catalogTokens, tools []rewrite.Tool) *setCount {
	n := 0
	for i := range tools {
		n += len(tools[i].Name)
	}
	// One string for every name: the names may alias a request body,
	// which the count outlives.
	buf := make([]byte, 0, n)
	for i := range tools {
		buf = append(buf, tools[i].Name...)
	}
	own := string(buf)
	s := &setCount{ct: ct, at: make(map[string]int32, len(tools)), bytes: n + 144*len(tools)}
	off := 0
	for i := range tools {
		name := own[off : off+len(tools[i].Name)]
		off += len(name)
		if _, dup := s.at[name]; dup {
			return nil
		}
		s.at[name] = int32(i)
	}
	return s
}

// inOrder returns the count of tools, an order of the set, laid out
// from the set's: each tool's tokens moved to its position, the
// separators between tools (boundary) counted where they now fall. ok is
// false when tools are not the set's (a key that collided).
func (s *setCount) inOrder(enc tokenizer.Encoding, tools []rewrite.Tool) (*catalogTokens, bool) {
	if len(tools) != len(s.ct.per) {
		return nil, false
	}
	ct := &catalogTokens{per: make([]int, len(tools)), rendered: s.ct.rendered, estimated: s.ct.estimated}
	taken := make([]bool, len(tools))
	for i := range tools {
		j, ok := s.at[tools[i].Name]
		if !ok || taken[j] {
			return nil, false
		}
		taken[j] = true
		ct.per[i] = s.ct.per[j]
		ct.total += ct.per[i] + boundary(enc, i, tools[i].Raw)
	}
	return ct, true
}
