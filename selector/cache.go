package selector

import (
	"context"
	"fmt"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Cache holds compiled catalogs keyed by a caller-given key (the proxy uses
// a hash of the raw tools bytes plus the policy generation). Concurrent Gets
// of the same missing key compile once. It is safe for concurrent use and
// starts no goroutines. Failed compiles are not cached.
type Cache struct {
	lru    *lru.Cache[string, *Catalog]
	group  singleflight.Group
	hits   atomic.Int64
	misses atomic.Int64
}

// CacheStats are a Cache's counters since it was created.
type CacheStats struct {
	Hits   int64 // Gets answered from the cache
	Misses int64 // Gets that compiled or waited on another Get's compile
	Len    int   // catalogs held now
}

// NewCache returns a cache holding up to size catalogs (<= 0 means 64),
// least recently used evicted first.
func NewCache(size int) *Cache {
	if size <= 0 {
		size = 64
	}
	l, _ := lru.New[string, *Catalog](size) // errors only for size <= 0
	return &Cache{lru: l}
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
		c.lru.Add(key, cat)
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

// Stats returns the hit and miss counters and the current size.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Len: c.lru.Len()}
}
