package selector

import (
	"testing"
	"unsafe"
)

func TestLearnedTransitionsKeepNoStringOfTheCaller(t *testing.T) {
	// The proxy observes names read from request and response bodies;
	// a kept key that aliased one would hold the whole body.
	buf := []byte("fs_read_file chat_post_message")
	last, next := unsafe.String(&buf[0], 12), unsafe.String(&buf[13], 17)
	learned := NewTransitions(8)
	learned.Observe(last, next)
	learned.Observe(last, next)
	within := func(s string) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&buf[0]))
		return p >= lo && p < lo+uintptr(len(buf))
	}
	learned.mu.Lock()
	defer learned.mu.Unlock()
	for _, key := range learned.rows.Keys() {
		if within(key) {
			t.Errorf("the table keeps the caller's %q as a source", key)
		}
		r, _ := learned.rows.Peek(key)
		for n, c := range r.next {
			if within(n) {
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
