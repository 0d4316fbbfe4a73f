package selector

import (
	"context"
	"testing"
	"unsafe"
)

// within reports whether s's bytes lie inside buf's memory.
func within(s string, buf []byte) bool {
	if len(s) == 0 || len(buf) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&buf[0]))
	return p >= lo && p < lo+uintptr(len(buf))
}

func TestLearnedTransitionsKeepNoStringOfTheCaller(t *testing.T) {
	// The proxy observes names read from request and response bodies;
	// a kept key that aliased one would hold the whole body.
	buf := []byte("fs_read_file chat_post_message")
	last, next := unsafe.String(&buf[0], 12), unsafe.String(&buf[13], 17)
	learned := NewTransitions(8)
	learned.Observe(last, next)
	learned.Observe(last, next)
	learned.mu.Lock()
	defer learned.mu.Unlock()
	for _, key := range learned.rows.Keys() {
		if within(key, buf) {
			t.Errorf("the table keeps the caller's %q as a source", key)
		}
		r, _ := learned.rows.Peek(key)
		for n, c := range r.next {
			if within(n, buf) {
				t.Errorf("the table keeps the caller's %q as a successor", n)
			}
			if c != 2 {
				t.Errorf("%s -> %s counted %v times; want 2", key, n, c)
			}
		}
	}
	if learned.rows.Len() != 1 {
		t.Errorf("%d sources; want 1", learned.rows.Len())
	}
}

func TestACatalogKeepsNoStringOfARequestsText(t *testing.T) {
	// Request texts alias their bodies; the compiled catalog is cached
	// and outlives them, so what it remembers of a query (stems, whole-
	// name tokens, postings) must be its own.
	c := compileTest(t, testTools(t), Config{Weights: DefaultWeights()})
	buf := []byte("open acme-web/readme.md and post it to chat-ops")
	text := unsafe.String(&buf[0], len(buf))
	ctx := context.Background()
	if _, err := c.Preselect(ctx, []string{text}, 7, Query{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Search(ctx, Query{Text: text, Limit: 5}); err != nil {
		t.Fatal(err)
	}
	for _, ft := range c.postingsCache.Keys() {
		if within(ft.term, buf) {
			t.Errorf("the postings cache keeps %q from the request's text", ft.term)
		}
	}
	c.an.stem.mu.RLock()
	defer c.an.stem.mu.RUnlock()
	for w := range c.an.stem.m {
		if within(w, buf) {
			t.Errorf("the stem memo keeps %q from the request's text", w)
		}
	}
}
