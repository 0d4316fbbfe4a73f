package selector

import (
	"math/rand/v2"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// catalogStore holds a Cache's compiled catalogs in two parts: fresh, the
// catalogs compiled and not yet used by two accepted requests (accept),
// and kept, those that were. A client that sends the same tools with
// every request compiles once and is kept from its second accepted
// request on; a client that sends a new tools array with every request
// (or a burst of one-off catalogs), or whose requests the upstream
// refuses however often it re-sends them, fills fresh only, which may
// hold a quarter of the bounds, so the catalogs other clients re-send are
// not let go for its sake. A key accepted before whose catalog was let go
// before it was used again (fresh was full of others) goes to kept on its
// next accepted use: a catalog pays at most one compile more than a
// single LRU would make it.
//
// The bounds are the catalogs' estimated heap (Catalog.heldBytes, read
// again whenever a catalog is asked for, as its memos grow), their number
// and their tools. A catalog whose heap alone passes the byte bound is
// not held at all: holding it would let every other catalog go, and two
// clients with such catalogs would take turns compiling them.
//
// Kept lets its least recently used catalog go first, except to make room
// for a key compiled again after an accepted request used it and the
// store let it go: that is the sign of a set of catalogs asked for in
// turn that is larger than the bounds (tenants' agents taking their steps
// in rotation), where least recently used lets go of exactly the catalog
// asked for next and no request hits. Such a key's room comes from a
// catalog picked at random among the least recently used three quarters
// of kept instead: each catalog of the rotation then survives a round
// with a fair chance (0.60 of the requests hit when the rotation is a
// fifth larger than the bounds, where least recently used hits none), and
// the quarter asked for most recently, where catalogs in steady use are,
// is never picked.
//
// It is safe for concurrent use.
type catalogStore struct {
	mu          sync.Mutex
	fresh, kept *simplelru.LRU[string, *Catalog]
	seen        *simplelru.LRU[string, struct{}] // keys an accepted request used, held or not

	maxLen, maxFresh        int   // catalogs: in all, in fresh
	maxTools, maxFreshTools int64 // their tools: in all, in fresh
	maxBytes, maxFreshBytes int64 // their heap: in all, in fresh; <= 0: no bound
	tools, freshTools       int64
	bytes, freshBytes       int64
	charged                 map[string]int64 // each held catalog's heap, as last read
	tooLarge                int64            // catalogs not held: over maxBytes alone
	rand                    *rand.Rand       // picks the catalog a recompiled key's room comes from
}

func newCatalogStore(size int, maxTools, maxBytes int64) *catalogStore {
	s := &catalogStore{maxLen: size, maxFresh: max(size/4, 1), maxTools: maxTools, maxFreshTools: maxTools / 4,
		maxBytes: maxBytes, maxFreshBytes: maxBytes / 4, charged: map[string]int64{},
		rand: rand.New(rand.NewPCG(uint64(size), uint64(maxBytes)))}
	// Both lists could hold every catalog; add trims them to the bounds
	// itself, so simplelru's own eviction never runs. Errors only for
	// sizes <= 0.
	s.fresh, _ = simplelru.NewLRU[string, *Catalog](size+1, nil)
	s.kept, _ = simplelru.NewLRU[string, *Catalog](size+1, nil)
	s.seen, _ = simplelru.NewLRU[string, struct{}](max(4*size, 1024), nil)
	return s
}

// get returns key's catalog, if held. A fresh one stays fresh: only an
// accepted request moves it (accept). The catalog's heap is read again,
// and others let go if it grew past the bounds.
func (s *catalogStore) get(key string) (*Catalog, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := false
	cat, ok := s.kept.Get(key)
	if !ok {
		if cat, ok = s.fresh.Get(key); !ok {
			return nil, false
		}
		fresh = true
	}
	if n := cat.heldBytes(); n != s.charged[key] {
		if s.maxBytes > 0 && n > s.maxBytes {
			// Its memos grew past the bound alone: kept, it would
			// let every other catalog go (add's rule). This request
			// still ranks with it.
			s.remove(key)
			s.tooLarge++
			return cat, true
		}
		d := n - s.charged[key]
		s.charged[key] = n
		s.bytes += d
		if fresh {
			s.freshBytes += d
		}
		s.trim(key, false)
	}
	return cat, true
}

// accept notes that a request that used key's catalog was accepted, and
// returns the catalog, if held: a fresh one moves to kept when an
// accepted request used its key before.
func (s *catalogStore) accept(key string) *Catalog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cat, ok := s.kept.Get(key); ok {
		return cat
	}
	again := s.seen.Contains(key)
	s.seen.Add(key, struct{}{})
	cat, ok := s.fresh.Peek(key)
	if ok && again {
		s.fresh.Remove(key)
		s.freshTools -= int64(cat.Len())
		s.freshBytes -= s.charged[key]
		s.kept.Add(key, cat)
	}
	return cat
}

// add holds cat under key in fresh, then lets catalogs go until the
// bounds hold (trim). cat itself stays whatever its tools, but not when
// its heap alone is over the byte bound: then it is not held.
func (s *catalogStore) add(key string, cat *Catalog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(key)
	size := cat.heldBytes()
	if s.maxBytes > 0 && size > s.maxBytes {
		// Not held, so no accepted request starts its background
		// work (accept finds nothing).
		s.tooLarge++
		return
	}
	n := int64(cat.Len())
	s.tools += n
	s.bytes += size
	s.charged[key] = size
	s.fresh.Add(key, cat)
	s.freshTools += n
	s.freshBytes += size
	s.trim(key, s.seen.Contains(key))
}

// trim lets catalogs go until the bounds hold, never keep's: fresh ones
// past fresh's share first, then fresh ones before kept ones, least
// recently used first. Kept's go least recently used first, or, when
// recompiled says keep was let go after an accepted request used it, at
// random among the least recently used three quarters.
func (s *catalogStore) trim(keep string, recompiled bool) {
	for s.freshOver() && s.dropOldest(s.fresh, keep) {
	}
	for s.over() {
		if s.dropOldest(s.fresh, keep) {
			continue
		}
		if recompiled && s.dropRandom(keep) || s.dropOldest(s.kept, keep) {
			continue
		}
		return
	}
}

// freshOver reports whether fresh holds more than its share.
func (s *catalogStore) freshOver() bool {
	return s.freshTools > s.maxFreshTools || s.fresh.Len() > s.maxFresh || s.maxBytes > 0 && s.freshBytes > s.maxFreshBytes
}

// over reports whether the catalogs held pass a bound.
func (s *catalogStore) over() bool {
	return s.tools > s.maxTools || s.fresh.Len()+s.kept.Len() > s.maxLen || s.maxBytes > 0 && s.bytes > s.maxBytes
}

// dropOldest lets l's least recently used catalog go, unless l is empty
// or that catalog is keep's.
func (s *catalogStore) dropOldest(l *simplelru.LRU[string, *Catalog], keep string) bool {
	k, _, ok := l.GetOldest()
	if !ok || k == keep {
		return false
	}
	s.remove(k)
	return true
}

// dropRandom lets a kept catalog go, picked at random among the least
// recently used three quarters (at least one), unless that is keep's.
func (s *catalogStore) dropRandom(keep string) bool {
	keys := s.kept.Keys() // oldest first
	if len(keys) == 0 {
		return false
	}
	k := keys[s.rand.IntN(max(len(keys)*3/4, 1))]
	if k == keep {
		return false
	}
	s.remove(k)
	return true
}

// remove lets key's catalog go, if held, and stops its background work.
func (s *catalogStore) remove(key string) {
	if cat, ok := s.fresh.Peek(key); ok {
		s.fresh.Remove(key)
		s.freshTools -= int64(cat.Len())
		s.freshBytes -= s.charged[key]
		s.release(key, cat)
	}
	if cat, ok := s.kept.Peek(key); ok {
		s.kept.Remove(key)
		s.release(key, cat)
	}
}

// release takes a catalog no longer held off the totals and stops its
// background work.
func (s *catalogStore) release(key string, cat *Catalog) {
	s.tools -= int64(cat.Len())
	s.bytes -= s.charged[key]
	delete(s.charged, key)
	cat.stopBackground()
}

// purge lets every catalog go, stopping their background work, and
// forgets the keys seen.
func (s *catalogStore) purge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range []*simplelru.LRU[string, *Catalog]{s.fresh, s.kept} {
		for _, cat := range l.Values() {
			cat.stopBackground()
		}
	}
	s.fresh.Purge()
	s.kept.Purge()
	s.seen.Purge()
	clear(s.charged)
	s.tools, s.freshTools = 0, 0
	s.bytes, s.freshBytes = 0, 0
}

// storeSize is what a catalogStore holds.
type storeSize struct {
	catalogs     int
	tools, bytes int64
	tooLarge     int64
}

// size returns the catalogs held, their tools and heap, and how many
// catalogs were too large to hold.
func (s *catalogStore) size() storeSize {
	s.mu.Lock()
	defer s.mu.Unlock()
	return storeSize{s.fresh.Len() + s.kept.Len(), s.tools, s.bytes, s.tooLarge}
}
