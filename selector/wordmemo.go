package selector

import (
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// wordMemo remembers a value per word (a row of the public word table)
// from the word's second sighting on: requests share most of their words,
// and a value costs more than one use of it, so a word seen once is only
// noted. Two requests may compute the same value at once; both get the
// same. Max-sim's tool rows and the semantic signal's products use it.
//
// A hit only peeks (a shared lock, nothing written): moving the entry to
// the front of the LRU list on every hit takes the exclusive lock and
// writes the entry's neighbours, cache misses each once a request's body
// has been through the caches, for a dozen words per preselection. An
// entry is moved to the front on a hit only once it has aged into the
// older half of the memo, so a word in use never reaches the end of the
// list, and eviction stays least recently used at that granularity.
//
// It counts the bytes it holds (bytes), which its catalog's cache reads:
// a catalog's memos fill as it is searched, up to a few megabytes.
type wordMemo[V any] struct {
	lru   *lru.Cache[int32, memoEntry[V]]
	clock atomic.Uint64 // counts adds: an entry's age is clock - its stamp
	half  uint64        // half the memo's size, in words
	size  func(V) int64 // a value's bytes; nil: values count nothing
	// bytes is what the entries and their values hold. The writes that
	// change them hold mu, so a word two requests note or compute at
	// once is counted once (a replacing Add calls no eviction, which is
	// what would take a second count back); hits take no lock.
	bytes atomic.Int64
	mu    sync.Mutex
}

// memoEntryBytes is about what a memo entry costs beside its value: the
// LRU's list element and map slot.
const memoEntryBytes = 128

// memoEntry is a noted word, with its value once it has come back, and
// the clock when it was last added or moved to the front.
type memoEntry[V any] struct {
	v     V
	full  bool
	stamp uint64
}

// newWordMemo returns a memo of words words; size, when not nil, is a
// value's bytes.
func newWordMemo[V any](words int, size func(V) int64) *wordMemo[V] {
	words = max(words, 1)
	m := &wordMemo[V]{half: uint64(words / 2), size: size}
	// Errors only on size <= 0.
	m.lru, _ = lru.NewWithEvict(words, func(_ int32, e memoEntry[V]) { m.bytes.Add(-memoEntryBytes - m.valueBytes(e)) })
	return m
}

// valueBytes is e's value's bytes, if it has one.
func (m *wordMemo[V]) valueBytes(e memoEntry[V]) int64 {
	if !e.full || m.size == nil {
		return 0
	}
	return m.size(e.v)
}

// get returns word r's value if r has been seen before, computing it with
// compute on r's second sighting; on the first it notes r and returns
// false.
func (m *wordMemo[V]) get(r int32, compute func() V) (V, bool) {
	e, ok := m.lru.Peek(r)
	switch {
	case !ok:
		m.mu.Lock()
		if _, ok := m.lru.Peek(r); !ok {
			m.put(r, memoEntry[V]{stamp: m.clock.Add(1)})
		}
		m.mu.Unlock()
		return e.v, false
	case e.full:
		if m.clock.Load()-e.stamp > m.half {
			e.stamp = m.clock.Add(1)
			m.mu.Lock()
			m.put(r, e) // to the front
			m.mu.Unlock()
		}
		return e.v, true
	}
	v := compute()
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.lru.Peek(r); ok && cur.full {
		return cur.v, true // another request computed it first
	}
	m.put(r, memoEntry[V]{v: v, full: true, stamp: m.clock.Add(1)})
	return v, true
}

// put stores e as r's entry and counts what that changes: a new entry's
// cost, or the difference between e's value and the one it replaces. The
// caller holds mu.
func (m *wordMemo[V]) put(r int32, e memoEntry[V]) {
	if cur, ok := m.lru.Peek(r); ok {
		m.bytes.Add(m.valueBytes(e) - m.valueBytes(cur))
	} else {
		m.bytes.Add(memoEntryBytes + m.valueBytes(e))
	}
	m.lru.Add(r, e)
}
