package selector

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// wordMemo remembers a value per word (a row of the public word table)
// from the word's second sighting on: requests share most of their words,
// and a value costs more than one use of it, so a word seen once is only
// noted. Two requests may compute the same value at once; both get the
// same. Max-sim's tool rows and the semantic signal's products use it.
type wordMemo[V any] struct {
	lru *lru.Cache[int32, memoEntry[V]]
}

// memoEntry is a noted word, with its value once it has come back.
type memoEntry[V any] struct {
	v    V
	full bool
}

func newWordMemo[V any](words int) *wordMemo[V] {
	c, _ := lru.New[int32, memoEntry[V]](max(words, 1)) // errors only on size <= 0
	return &wordMemo[V]{lru: c}
}

// get returns word r's value if r has been seen before, computing it with
// compute on r's second sighting; on the first it notes r and returns
// false.
func (m *wordMemo[V]) get(r int32, compute func() V) (V, bool) {
	e, ok := m.lru.Get(r)
	switch {
	case !ok:
		m.lru.Add(r, memoEntry[V]{})
		return e.v, false
	case e.full:
		return e.v, true
	}
	v := compute()
	m.lru.Add(r, memoEntry[V]{v: v, full: true})
	return v, true
}

// forget drops every remembered word.
func (m *wordMemo[V]) forget() { m.lru.Purge() }
