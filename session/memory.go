package session

import (
	"context"
	"sync"
	"time"
)

var (
	_ Store  = (*Memory)(nil)
	_ Merger = (*Memory)(nil)
)

// Memory is the in-process store: at most a fixed number of sessions,
// each kept until a TTL after its last write (a Put renews it; a Get does
// not). When it is full, a new session replaces the least recently used
// one of the tenant holding the most sessions (the tenant being the label
// Key puts in front of every key; keys not of Key's making are one
// tenant; of tenants holding as many, the one whose session is idle
// longest), so one tenant's many sessions push out its own, never those
// of a tenant holding fewer; with one tenant, or tenants of one session
// each, it is a plain LRU. Expired sessions are dropped by the next call of any method
// (least recently written first, without a scan): nothing runs in the
// background, so a Memory needs no closing, and an idle one keeps its
// expired sessions' memory (never over its bound) until it is next used.
type Memory struct {
	// writes orders Put and PutMerged: a merge's read and write must
	// have no other write between them. A merge runs holding it, not mu,
	// so Gets do not wait for one.
	writes sync.Mutex
	mu     sync.Mutex // guards lru
	lru    fairLRU
}

// NewMemory returns a store of at most size sessions (10,000 when size
// <= 0) that each expire ttl (an hour when ttl <= 0) after their last
// write.
func NewMemory(size int, ttl time.Duration) *Memory {
	if size <= 0 {
		size = 10000
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &Memory{lru: newFairLRU(size, ttl)}
}

// Get returns a copy of the state under key, or ErrNotFound. It marks the
// session used, and does not renew its expiry.
func (m *Memory) Get(_ context.Context, key string) (State, error) {
	now := time.Now() // read outside the lock: a get sets no expiry
	m.mu.Lock()
	s, ok := m.lru.get(key, now)
	m.mu.Unlock()
	if !ok {
		return State{}, ErrNotFound
	}
	// The store's copy is never changed in place, so it is copied
	// outside the lock.
	return s.Clone(), nil
}

// Put stores a copy of s under key.
func (m *Memory) Put(_ context.Context, key string, s State) error {
	s = s.Clone()
	m.writes.Lock()
	defer m.writes.Unlock()
	// Read holding writes, so writes' expiries follow their order.
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.put(key, s, now)
	return nil
}

// PutMerged stores a copy of s merged into the state under key (Merge),
// with no other write in between.
func (m *Memory) PutMerged(_ context.Context, key string, base, s State, keep int) error {
	m.writes.Lock()
	defer m.writes.Unlock()
	m.mu.Lock()
	cur, _ := m.lru.peek(key, time.Now())
	m.mu.Unlock()
	merged := Merge(cur, base, s, keep).Clone()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.put(key, merged, now)
	return nil
}

// Delete forgets key. It is a write: one that came between a merge's
// read and its write would be undone by the merge.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.writes.Lock()
	defer m.writes.Unlock()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.delete(key, now)
	return nil
}

// Len returns the number of sessions held, none of them expired.
func (m *Memory) Len() int {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.expire(now)
	return len(m.lru.items)
}

// Keys returns the keys held, none of them expired, least recently used
// (by Get or a write) first, whatever their tenant. It sorts them, for
// tests and debugging; it is not for a request's path.
func (m *Memory) Keys() []string {
	now := time.Now()
	m.mu.Lock()
	held := m.lru.held(now)
	m.mu.Unlock()
	return oldestFirst(held)
}
