package selector

import (
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
// single LRU would make it. It is safe for concurrent use.
type catalogStore struct {
	mu          sync.Mutex
	fresh, kept *simplelru.LRU[string, *Catalog]
	seen        *simplelru.LRU[string, struct{}] // keys an accepted request used, held or not

	maxLen, maxFresh        int   // catalogs: in all, in fresh
	maxTools, maxFreshTools int64 // their tools: in all, in fresh
	tools, freshTools       int64
}

func newCatalogStore(size int, maxTools int64) *catalogStore {
	s := &catalogStore{maxLen: size, maxFresh: max(size/4, 1), maxTools: maxTools, maxFreshTools: maxTools / 4}
	// Both lists could hold every catalog; add trims them to the bounds
	// itself, so simplelru's own eviction never runs. Errors only for
	// sizes <= 0.
	s.fresh, _ = simplelru.NewLRU[string, *Catalog](size+1, nil)
	s.kept, _ = simplelru.NewLRU[string, *Catalog](size+1, nil)
	s.seen, _ = simplelru.NewLRU[string, struct{}](max(4*size, 1024), nil)
	return s
}

// get returns key's catalog, if held. A fresh one stays fresh: only an
// accepted request moves it (accept).
func (s *catalogStore) get(key string) (*Catalog, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cat, ok := s.kept.Get(key); ok {
		return cat, true
	}
	return s.fresh.Get(key)
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
		s.kept.Add(key, cat)
	}
	return cat
}

// add holds cat under key in fresh, then lets the least recently used
// catalogs go until the bounds hold: fresh ones past fresh's share first,
// then fresh ones before kept ones. cat itself stays, whatever its size.
func (s *catalogStore) add(key string, cat *Catalog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(key)
	n := int64(cat.Len())
	s.tools += n
	s.fresh.Add(key, cat)
	s.freshTools += n
	for (s.freshTools > s.maxFreshTools || s.fresh.Len() > s.maxFresh) && s.dropOldest(s.fresh, key) {
	}
	for s.tools > s.maxTools || s.fresh.Len()+s.kept.Len() > s.maxLen {
		if !s.dropOldest(s.fresh, key) && !s.dropOldest(s.kept, key) {
			return
		}
	}
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

// remove lets key's catalog go, if held, and stops its background work.
func (s *catalogStore) remove(key string) {
	if cat, ok := s.fresh.Peek(key); ok {
		s.fresh.Remove(key)
		s.freshTools -= int64(cat.Len())
		s.tools -= int64(cat.Len())
		cat.stopBackground()
	}
	if cat, ok := s.kept.Peek(key); ok {
		s.kept.Remove(key)
		s.tools -= int64(cat.Len())
		cat.stopBackground()
	}
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
	s.tools, s.freshTools = 0, 0
}

// size returns the catalogs held and their tools.
func (s *catalogStore) size() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fresh.Len() + s.kept.Len(), s.tools
}
