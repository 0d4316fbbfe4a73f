package proxy

import (
	"slices"
	"testing"
)

func TestWeighedLRU(t *testing.T) {
	keys := func(c *weighedLRU[int, string]) []int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.lru.Keys()
	}
	for _, tc := range []struct {
		name      string
		size, max int
		adds      [][2]int // key, bytes
		want      []int    // keys held, oldest first
		wantBytes int
	}{
		{"entries within both bounds are all kept", 4, 100, [][2]int{{1, 10}, {2, 20}, {3, 30}}, []int{1, 2, 3}, 60},
		{"the least recently used go while the bytes are over the bound", 8, 100, [][2]int{{1, 40}, {2, 40}, {3, 40}}, []int{2, 3}, 80},
		{"the count bounds entries whatever their bytes", 2, 1000, [][2]int{{1, 1}, {2, 1}, {3, 1}}, []int{2, 3}, 2},
		{"a value replaced weighs what the new one weighs", 4, 100, [][2]int{{1, 60}, {1, 10}, {2, 80}}, []int{1, 2}, 90},
		{"a value heavier than the whole bound is not kept", 4, 100, [][2]int{{1, 10}, {2, 101}}, []int{1}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newWeighedLRU[int, string](tc.size, tc.max)
			for _, a := range tc.adds {
				c.Add(a[0], "v", a[1])
			}
			if got := keys(c); !slices.Equal(got, tc.want) {
				t.Errorf("held %v, want %v", got, tc.want)
			}
			if c.bytes != tc.wantBytes {
				t.Errorf("bytes = %d, want %d", c.bytes, tc.wantBytes)
			}
			for _, k := range tc.want {
				if _, ok := c.Get(k); !ok {
					t.Errorf("Get(%d) missed", k)
				}
			}
		})
	}
}
