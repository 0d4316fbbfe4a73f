package proxy

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/rewrite"
)

// Some MCP clients build their tools array from map iteration: the same
// tools in a new order every turn, each a new text, a new ToolsKey and,
// keyed by it, a new compile (22 ms at 200 tools), token count and policy
// table. What those compute does not depend on the order (a catalog ranks
// in name order, a tool's tokens and decisions are its own), so they are
// keyed by the array's tool set instead, and each request lays them out
// in its own order (selector.Catalog.InOrder, tokenCounter.catalog,
// policy.Table.InOrder): what speaks in positions (the skip sets, the
// tokens per position, the core tools' order, the decision log's hidden
// tools, what goes upstream) stays the request's own.

// toolSets gives a tools array the key of its set of tools, remembered
// by the array's text key: a resent array pays a lookup, a new order a
// hash of its tools' texts (about 10 µs at 200 tools).
type toolSets struct {
	seed   maphash.Seed
	byText *lru.Cache[uint64, toolSet]
}

// toolSet is the key of a tools array's tool set.
type toolSet struct {
	key uint64
	// ordered is set when the key is the array's text key: the tools'
	// order changes what is compiled (capCatalog's budget), so the array
	// shares nothing with its other orders.
	ordered bool
}

func newToolSets(size int) *toolSets {
	byText, _ := lru.New[uint64, toolSet](size) // errors only on size <= 0
	return &toolSets{seed: maphash.MakeSeed(), byText: byText}
}

// of returns the key of req's tools as a set, read by dialect d: arrays
// of the same tools' texts in any order get one key; a tool whose text
// differs in a byte, another dialect (the same text is other tools to
// another dialect) or another count of tools get another. req.ToolsKey
// must be set (the array's text key).
//
// The key sums the tools' seeded hashes, which no order changes, and
// hashes the sum with the count and the dialect: without the seed a
// client cannot aim at another's key, any more than at a text key.
// Catalogs are shared by content across tenants, as they were by text.
func (s *toolSets) of(req *rewrite.Request, d rewrite.Dialect) toolSet {
	if set, ok := s.byText.Get(req.ToolsKey); ok {
		return set
	}
	var sum uint64
	text := 0
	for i := range req.Tools {
		sum += maphash.String(s.seed, req.Tools[i].Raw)
		text += len(req.Tools[i].Raw)
	}
	set := toolSet{key: req.ToolsKey, ordered: true}
	// A tool's indexed text is never longer than its JSON: under the
	// budget, capCatalog clips each tool alike in every order.
	if text <= maxCatalogText {
		var h maphash.Hash
		h.SetSeed(s.seed)
		_, _ = h.WriteString(dialectName(d))
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(len(req.Tools)))
		binary.LittleEndian.PutUint64(b[8:], sum)
		_, _ = h.Write(b[:])
		set = toolSet{key: h.Sum64()}
	}
	s.byText.Add(req.ToolsKey, set)
	return set
}

// String is the set's part of a cache key: a set key and a text key
// (textKey) never read alike, by their first letter.
func (s toolSet) String() string {
	var b [16]byte
	return string(s.append(b[:0]))
}

// keyWith returns the set's key, sep and n in base 36 as one string, in
// one allocation: a turn makes several such keys, and a resent
// catalog's turn allocates little else.
func (s toolSet) keyWith(sep string, n uint64) string {
	var b [40]byte
	return string(strconv.AppendUint(append(s.append(b[:0]), sep...), n, 36))
}

func (s toolSet) append(b []byte) []byte {
	prefix := byte('s')
	if s.ordered {
		prefix = 't'
	}
	return strconv.AppendUint(append(b, prefix), s.key, 36)
}

// textKey returns the key of a tools array's text in base 36 after an
// "x" (a set key starts with "s" or "t"), sep and n in base 36 as one
// string, in one allocation.
func textKey(text uint64, sep string, n uint64) string {
	var b [40]byte
	return string(strconv.AppendUint(append(strconv.AppendUint(append(b[:0], 'x'), text, 36), sep...), n, 36))
}

// namesOf yields the names of tools in order.
func namesOf(tools []rewrite.Tool) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range tools {
			if !yield(tools[i].Name) {
				return
			}
		}
	}
}
