package proxy

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// weighedLRU is an LRU bounded by its entries and by the bytes its values
// hold in all, as weigh estimates them when each is added. A count alone
// bounds nothing when one value may be a 4,096-tool array's: a review
// filled two caches of 256 such entries, names of 256 bytes, to 690 MB.
// It is safe for concurrent use.
type weighedLRU[K comparable, V any] struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[K, weighed[V]]
	bytes   int
	maxSize int
}

type weighed[V any] struct {
	v     V
	bytes int
}

func newWeighedLRU[K comparable, V any](size, maxBytes int) *weighedLRU[K, V] {
	c := &weighedLRU[K, V]{maxSize: maxBytes}
	c.lru, _ = simplelru.NewLRU(max(size, 1), func(_ K, w weighed[V]) { c.bytes -= w.bytes }) // errors only on size <= 0
	return c
}

// Get returns the value under k and marks it used.
func (c *weighedLRU[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.lru.Get(k)
	return w.v, ok
}

// Add keeps v under k, weighing bytes, and lets the least recently used
// go while the entries weigh more than the bound. A value heavier than
// the whole bound is not kept: it would push out everything else.
func (c *weighedLRU[K, V]) Add(k K, v V, bytes int) {
	if bytes > c.maxSize {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(k); ok {
		c.bytes -= old.bytes // a replaced value leaves without the eviction callback
	}
	c.lru.Add(k, weighed[V]{v: v, bytes: bytes})
	c.bytes += bytes
	for c.bytes > c.maxSize {
		c.lru.RemoveOldest()
	}
}
