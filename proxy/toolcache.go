package proxy

import (
	"hash/maphash"
	"strings"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/rewrite"
)

var _ rewrite.ToolCache = (*toolCache)(nil)

// toolCache keeps parsed tools arrays by their exact text: agents resend the
// same catalog every turn, and parsing it is the largest part of reading a
// request. Entries own their memory; nothing aliases a request body.
type toolCache struct {
	seed    maphash.Seed
	entries *lru.Cache[uint64, toolEntry]
}

type toolEntry struct {
	raw   string
	tools []rewrite.Tool
}

func newToolCache(size int) *toolCache {
	c, _ := lru.New[uint64, toolEntry](max(size, 1)) // errors only on size <= 0
	return &toolCache{seed: maphash.MakeSeed(), entries: c}
}

// Get returns the tools parsed from exactly raw; a hash collision is caught
// by comparing the text.
func (c *toolCache) Get(raw string) ([]rewrite.Tool, bool) {
	e, ok := c.entries.Get(maphash.String(c.seed, raw))
	if !ok || e.raw != raw {
		return nil, false
	}
	return e.tools, true
}

// Add keeps a copy of raw and of the tools, their strings rebased into the
// copy. The tools slice is shared by every request that hits it: read-only.
func (c *toolCache) Add(raw string, tools []rewrite.Tool) {
	own := strings.Clone(raw)
	kept := make([]rewrite.Tool, len(tools))
	for i, t := range tools {
		t.Name = rebase(t.Name, raw, own)
		t.Description = rebase(t.Description, raw, own)
		t.Raw = rebase(t.Raw, raw, own)
		t.Params = nil
		kept[i] = t
	}
	c.entries.Add(maphash.String(c.seed, raw), toolEntry{raw: own, tools: kept})
}

// rebase returns s as a substring of to when s lies inside from (to being a
// copy of from); strings gjson had to unescape live elsewhere and are
// copied.
func rebase(s, from, to string) string {
	if s == "" {
		return ""
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.StringData(from))))
	if off >= 0 && off+len(s) <= len(from) {
		return to[off : off+len(s)]
	}
	return strings.Clone(s)
}
