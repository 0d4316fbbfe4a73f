package session

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

var (
	_ Store  = (*Memory)(nil)
	_ Merger = (*Memory)(nil)
)

// Memory is the in-process store: an expirable LRU. Create one per process;
// its expiry goroutine lives as long as the process. A Put renews the TTL; a
// Get does not.
type Memory struct {
	lru *expirable.LRU[string, State]
	// writes orders Put and PutMerged: a merge's read and write must
	// have no other write between them.
	writes sync.Mutex
}

// NewMemory returns a store of at most size sessions that each expire ttl
// after their last write.
func NewMemory(size int, ttl time.Duration) *Memory {
	if size <= 0 {
		size = 10000
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &Memory{lru: expirable.NewLRU[string, State](size, nil, ttl)}
}

// Get returns a copy of the state under key, or ErrNotFound.
func (m *Memory) Get(_ context.Context, key string) (State, error) {
	s, ok := m.lru.Get(key)
	if !ok {
		return State{}, ErrNotFound
	}
	return s.Clone(), nil
}

// Put stores a copy of s under key.
func (m *Memory) Put(_ context.Context, key string, s State) error {
	m.writes.Lock()
	defer m.writes.Unlock()
	m.lru.Add(key, s.Clone())
	return nil
}

// PutMerged stores a copy of s merged into the state under key (Merge),
// with no other write in between.
func (m *Memory) PutMerged(_ context.Context, key string, base, s State, keep int) error {
	m.writes.Lock()
	defer m.writes.Unlock()
	cur, _ := m.lru.Peek(key)
	m.lru.Add(key, Merge(cur, base, s, keep).Clone())
	return nil
}

// Delete forgets key.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.lru.Remove(key)
	return nil
}

// Len returns the number of sessions held.
func (m *Memory) Len() int { return m.lru.Len() }

// Keys returns the keys held, oldest first.
func (m *Memory) Keys() []string { return m.lru.Keys() }
