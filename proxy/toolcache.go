package proxy

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
// array's shape, and its token count and policy table in its order; its
// tool set, toolset.go, keys the compiled catalog) covers both.
//
// A lookup gets the text from the start of the tools value to the end of
// the body, the array's end still unknown: finding it would mean scanning
// the array, and hashing it would mean reading it again. So entries are
// indexed by a hash of their first headLen bytes, and each candidate is
// compared as a prefix: a hit costs one memory compare of the array.
type toolCache struct {
	seed maphash.Seed
	mu   sync.Mutex
	lru  *simplelru.LRU[uint64, *toolEntry] // by key: the hash of the whole text
	// byHead indexes entries by the hash of their first headLen bytes,
	// oldest first. A bucket is never changed in place (unindex copies
	// it, Add only appends past what earlier readers hold), so Lookup
	// walks it outside the lock.
	byHead   map[uint64][]*toolEntry
	bytes    int // the kept texts' bytes, all entries
	maxBytes int // what bytes may reach; the least recent go first

	hits, misses atomic.Int64 // requests' arrays long enough to be kept: see counted
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
	// maxMatches bounds the candidates that pass the cheap checks
	// (length, tail, middle) and are compared whole: a lookup's worst
	// case, whatever arrays clients craft to share a start. Arrays that
	// share a start are the rule, not the exception: every user of one
	// agent sends its built-in tools first and their own MCP tools after,
	// so a start's bucket holds as many arrays as the gateway has such
	// users, bounded only by the cache's size and bytes (a bound per
	// start made the 65th user of one agent evict the next one due, and
	// a rotation of them all missed: 0 hits, every turn parsing 190 KB).
	maxMatches = 16
	// tailCheck is how much of a candidate's end is compared first:
	// arrays that share a start mostly differ by their last tools, and
	// the last 64 bytes of a JSON schema are often the same in all of
	// them. midCheck is compared at the middle, for arrays that end alike
	// too (an agent's own tools first and last, a user's in between).
	tailCheck = 512
	midCheck  = 64
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
	head := maphash.String(c.seed, str[:headLen]) ^ s.mix
	c.mu.Lock()
	same := c.byHead[head]
	c.mu.Unlock()
	compared := 0
	for i := len(same) - 1; i >= 0 && compared < maxMatches; i-- { // the newest is the likeliest
		e := same[i]
		k := e.known
		if e.space != s.mix || !sameEnds(str, k.Raw) {
			continue
		}
		compared++
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

// sameEnds reports whether str may begin with raw, by its length and the
// bytes at raw's end and middle: a few hundred bytes where the whole
// compare reads the array.
func sameEnds(str, raw string) bool {
	n := len(raw)
	if n > len(str) {
		return false
	}
	t := max(n-tailCheck, 0)
	m := n / 2
	return str[t:n] == raw[t:] && str[m:min(m+midCheck, n)] == raw[m:min(m+midCheck, n)]
}

// counted records whether a request's tools array, one long enough to be
// kept, came from the cache (known) or was parsed. It is counted per
// request, where a request's parse may look the array up twice.
func (c *toolCache) counted(raw string, known bool) {
	switch {
	case len(raw) < headLen:
	case known:
		c.hits.Add(1)
	default:
		c.misses.Add(1)
	}
}

// Stats returns how many requests' tools arrays, of those long enough to
// be kept, came from the cache, and how many were parsed.
func (c *toolCache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

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
	old := c.byHead[e.head]
	i := slices.Index(old, e)
	if i < 0 {
		return
	}
	if len(old) == 1 {
		delete(c.byHead, e.head)
		return
	}
	// A copy: a Lookup may be walking the old bucket (see byHead).
	c.byHead[e.head] = slices.Concat(old[:i], old[i+1:])
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
