package proxy

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/tidwall/pretty"

	"github.com/toolgate/toolgate/rewrite"
)

var _ rewrite.ToolCache = toolSpace{}

// toolCache keeps parsed tools arrays by their exact text and the dialect
// that read them: agents resend the same catalog every turn, and parsing
// it is the largest part of reading a request. Entries own their memory;
// nothing aliases a request body.
//
// The same text means other tools to another dialect (the Messages API's
// "custom" tools are its client tools, the Responses API's are free-form
// tools it pins), so each dialect reads and fills the cache through its
// own toolSpace, and an entry's key (the ToolsKey that also keys the
// array's shape, compiled catalog and policy tables) covers both.
//
// A lookup gets the text from the start of the tools value to the end of
// the body, the array's end still unknown: finding it would mean scanning
// the array, and hashing it would mean reading it again. So entries are
// indexed by a hash of their first headLen bytes, and each candidate is
// compared as a prefix: a hit costs one memory compare of the array.
type toolCache struct {
	seed     maphash.Seed
	mu       sync.Mutex
	lru      *simplelru.LRU[uint64, *toolEntry] // by key: the hash of the whole text
	byHead   map[uint64][]*toolEntry            // by the hash of the first headLen bytes, oldest first
	bytes    int                                // the kept texts' bytes, all entries
	maxBytes int                                // what bytes may reach; the least recent go first
}

// toolEntry is immutable once made, so candidates are compared outside the
// lock.
type toolEntry struct {
	head  uint64
	space uint64 // the toolSpace's mix
	known rewrite.KnownTools
	size  int // bytes of text it keeps: the array and its tools' compact forms
}

const (
	// headLen is how much of an array's text indexes it; shorter arrays
	// (a few tools, quick to parse) are not kept.
	headLen = 512
	// maxPerHead bounds the arrays that share their first headLen bytes,
	// and so the candidates one lookup walks; the oldest of them makes
	// way. Sharing a start is the rule, not the exception: every user of
	// one agent sends its built-in tools first and their own MCP tools
	// after, so the bound is as many such users as one gateway serves at
	// once, not a handful (at 8, the ninth user's every turn parsed its
	// array again and evicted a neighbour's). A candidate that is not the
	// array costs a length and a 64-byte compare.
	maxPerHead = 64
	// maxMatches bounds the candidates that pass those checks and are
	// compared whole, outside the lock: arrays that share their first
	// and last bytes and fit in the text.
	maxMatches = 4
	// tailCheck is how much of a candidate's end is compared before the
	// whole: arrays that share a head mostly differ by their last tools.
	tailCheck = 64
	// toolCacheBytes bounds the text the cache keeps in all. A count alone
	// let 256 arrays of a few tools with 300 KB descriptions hold 2.9 GB;
	// 256 arrays of 200 ordinary tools are about 50 MB.
	toolCacheBytes = 128 << 20
)

// newToolCache returns a cache of at most size arrays and toolCacheBytes
// of text; an array over an eighth of that is not kept.
func newToolCache(size int) *toolCache { return newToolCacheBytes(size, toolCacheBytes) }

func newToolCacheBytes(size, maxBytes int) *toolCache {
	c := &toolCache{seed: maphash.MakeSeed(), byHead: map[uint64][]*toolEntry{}, maxBytes: maxBytes}
	c.lru, _ = simplelru.NewLRU(max(size, 1), c.unindex) // errors only on size <= 0
	return c
}

// toolSpace is the cache as one dialect reads it (see toolCache): its
// entries and keys are its own.
type toolSpace struct {
	c *toolCache
	// mix is a hash of the dialect's name, xored into every key and head
	// hash of the space: equal texts of two dialects get unrelated keys.
	mix uint64
}

// space returns the cache as dialect (a route's name) reads it.
func (c *toolCache) space(dialect string) toolSpace {
	return toolSpace{c: c, mix: maphash.String(c.seed, dialect)}
}

// keyOf is the key of a tools array's text, whether the cache holds it or
// not: the catalog cache key of arrays too small to keep.
func (s toolSpace) keyOf(raw string) uint64 { return maphash.String(s.c.seed, raw) ^ s.mix }

// Lookup returns the kept array that str begins with.
func (s toolSpace) Lookup(str string) (rewrite.KnownTools, bool) {
	if len(str) < headLen {
		return rewrite.KnownTools{}, false
	}
	c := s.c
	var cands [maxMatches]*toolEntry
	n := 0
	head := maphash.String(c.seed, str[:headLen]) ^ s.mix
	c.mu.Lock()
	same := c.byHead[head]
	for i := len(same) - 1; i >= 0 && n < len(cands); i-- { // the newest is the likeliest
		k := same[i].known
		if same[i].space == s.mix && len(k.Raw) <= len(str) && str[len(k.Raw)-tailCheck:len(k.Raw)] == k.Raw[len(k.Raw)-tailCheck:] {
			cands[n] = same[i]
			n++
		}
	}
	c.mu.Unlock()
	for _, e := range cands[:n] {
		k := e.known
		if str[:len(k.Raw)] != k.Raw {
			continue
		}
		c.mu.Lock()
		c.lru.Get(k.Key) // recency; a no-op if it was evicted meanwhile
		c.mu.Unlock()
		return k, true
	}
	return rewrite.KnownTools{}, false
}

// Add keeps a copy of raw and of the tools, their strings rebased into the
// copy and each tool's Raw without insignificant whitespace (compactTool).
// The tools slice is shared by every request that hits it: read-only. An
// array shorter than headLen, or one checkCatalog refuses, is not kept; its
// key is still returned. So a hit needs no check: the check reads every
// tool, a few hundred cache misses per request once the catalog has gone
// cold.
func (s toolSpace) Add(raw string, tools []rewrite.Tool) rewrite.KnownTools {
	c, key := s.c, s.keyOf(raw)
	if len(raw) < headLen || len(raw) > c.maxBytes/8 || checkCatalog(tools) != nil {
		return rewrite.KnownTools{Raw: raw, Tools: tools, Key: key}
	}
	own := strings.Clone(raw)
	size := len(own)
	kept := make([]rewrite.Tool, len(tools))
	for i, t := range tools {
		t.Name = rebase(t.Name, raw, own)
		t.Description = rebase(t.Description, raw, own)
		t.Raw = compactTool(rebase(t.Raw, raw, own))
		if _, in := offsetIn(t.Raw, own); !in {
			size += len(t.Raw)
		}
		t.Params = nil
		kept[i] = t
	}
	e := &toolEntry{head: maphash.String(c.seed, own[:headLen]) ^ s.mix, space: s.mix, known: rewrite.KnownTools{Raw: own, Tools: kept, Key: key}, size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(key); ok {
		if old.space == s.mix && old.known.Raw == raw {
			return old.known // a concurrent request added it first
		}
		c.lru.Remove(key) // a hash collision: the newer array wins
	}
	if same := c.byHead[e.head]; len(same) >= maxPerHead {
		c.lru.Remove(same[0].known.Key)
	}
	c.lru.Add(key, e) // may evict, which unindexes
	c.byHead[e.head] = append(c.byHead[e.head], e)
	c.bytes += e.size
	for c.bytes > c.maxBytes && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
	return e.known
}

// compactTool returns a tool's JSON without the whitespace between its
// tokens (pretty.Ugly; strings untouched), or raw when it has none. A
// catalog's tools are what the upstream receives each round, and clients
// that pretty-print their schemas send several times the bytes the JSON
// needs (the bench's indented tools: 34 KB for a turn's eight, 9 KB
// compact). Models never see this whitespace (providers render tool
// schemas into their own prompt format), and the token accounting counts
// the compact text on both sides: the client's catalog and what each round
// sent. It runs once per catalog, when the catalog is cached.
func compactTool(raw string) string {
	c := pretty.Ugly([]byte(raw))
	if len(c) == len(raw) {
		return raw
	}
	return string(c)
}

// unindex drops an entry the LRU let go from the head index; the LRU calls
// it with c.mu held.
func (c *toolCache) unindex(_ uint64, e *toolEntry) {
	c.bytes -= e.size
	same := slices.DeleteFunc(c.byHead[e.head], func(x *toolEntry) bool { return x == e })
	if len(same) == 0 {
		delete(c.byHead, e.head)
		return
	}
	c.byHead[e.head] = same
}

// offsetIn returns where s starts in in's memory, and whether it lies
// there at all.
func offsetIn(s, in string) (int, bool) {
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.StringData(in))))
	return off, s != "" && off >= 0 && off+len(s) <= len(in)
}

// rebase returns s as a substring of to when s lies inside from (to being a
// copy of from); strings gjson had to unescape live elsewhere and are
// copied.
func rebase(s, from, to string) string {
	if off, in := offsetIn(s, from); in {
		return to[off : off+len(s)]
	}
	return strings.Clone(s)
}
