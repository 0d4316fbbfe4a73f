package selector

import (
	"context"
	"fmt"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Cache holds compiled catalogs keyed by a caller-given key (the proxy uses
// a hash of the raw tools bytes plus the policy's catalog key). Concurrent
// Gets of the same missing key compile once. It is safe for concurrent use and
// starts no goroutines. Failed compiles are not cached.
//
// It is bounded twice: by catalogs, and by the tools they hold in all
// (CacheTools), for a compiled catalog's memory grows with its tools
// (BenchmarkCompile's MB-held: 1.7 MB at 500 tools, 3.2 at 2,000; a
// realistic 4,096-tool catalog held some 50 MB) and clients, or tenants,
// that send a changed catalog with every request would fill a count
// bound with the largest ones.
type Cache struct {
	lru      *lru.Cache[string, *Catalog]
	group    singleflight.Group
	hits     atomic.Int64
	misses   atomic.Int64
	tools    atomic.Int64 // tools of the catalogs held
	maxTools int64
}

// CacheTools is the most tools the catalogs a Cache holds may have in
// all: a few hundred megabytes of compiled catalogs. The catalog last
// compiled is held whatever its size.
const CacheTools = 1 << 15

// CacheStats are a Cache's counters since it was created.
type CacheStats struct {
	Hits   int64 // Gets answered from the cache
	Misses int64 // Gets that compiled or waited on another Get's compile
	Len    int   // catalogs held now
	Tools  int64 // their tools
}

// NewCache returns a cache holding up to size catalogs (<= 0 means 64),
// least recently used evicted first.
func NewCache(size int) *Cache { return newCache(size, CacheTools) }

func newCache(size, maxTools int) *Cache {
	if size <= 0 {
		size = 64
	}
	c := &Cache{maxTools: int64(maxTools)}
	c.lru, _ = lru.NewWithEvict(size, func(_ string, cat *Catalog) { c.tools.Add(-int64(cat.Len())) }) // errors only for size <= 0
	return c
}

// add holds cat, then lets the least recently used catalogs go until the
// tools held fit the bound (cat itself stays).
func (c *Cache) add(key string, cat *Catalog) {
	if prev, ok := c.lru.Peek(key); ok { // replaced without an eviction
		c.tools.Add(-int64(prev.Len()))
	}
	c.tools.Add(int64(cat.Len()))
	c.lru.Add(key, cat)
	for c.tools.Load() > c.maxTools && c.lru.Len() > 1 {
		if k, _, ok := c.lru.GetOldest(); !ok || k == key {
			return
		}
		c.lru.RemoveOldest()
	}
}

// Get returns the catalog for key, compiling build's tools and config on a
// miss. build runs at most once per key among concurrent callers; a caller
// whose ctx ends stops waiting (the compile itself finishes for the
// others and is cached).
func (c *Cache) Get(ctx context.Context, key string, build func() ([]Tool, Config)) (*Catalog, error) {
	if cat, ok := c.lru.Get(key); ok {
		c.hits.Add(1)
		return cat, nil
	}
	c.misses.Add(1)
	ch := c.group.DoChan(key, func() (any, error) {
		if cat, ok := c.lru.Get(key); ok {
			return cat, nil
		}
		tools, cfg := build()
		// Detached from the first caller's ctx: other callers share this
		// compile, and one client leaving must not fail it for them.
		cat, err := Compile(context.WithoutCancel(ctx), tools, cfg)
		if err != nil {
			return nil, err
		}
		c.add(key, cat)
		return cat, nil
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for catalog compile: %w", ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, fmt.Errorf("compiling catalog %s: %w", key, r.Err)
		}
		return r.Val.(*Catalog), nil
	}
}

// Purge lets every catalog go, counting them as evicted. A policy reload
// that changes what catalogs compile from calls it: the catalogs compiled
// under the old rules are keyed by them and never asked for again, yet each would hold its memory, and its
// index's goroutine, until the LRU got round to it. A caller that still
// holds a catalog keeps using it; it is collected when the last one is
// done. The hit and miss counters stay.
func (c *Cache) Purge() {
	c.lru.Purge() // runs the evict callback for each, so tools drops with them
}

// Stats returns the hit and miss counters and the current size.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Len: c.lru.Len(), Tools: c.tools.Load()}
}
