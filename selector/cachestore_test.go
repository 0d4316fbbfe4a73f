package selector

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// prebuilt compiles catalogs of the sizes given, once each, for
// useCatalogs.
func prebuilt(t *testing.T, sizes ...int) map[int]*Catalog {
	t.Helper()
	cats := map[int]*Catalog{}
	for _, n := range sizes {
		cats[n] = compileTest(t, syntheticTools(n), Config{})
	}
	return cats
}

// useCatalogs makes c's compiles return the catalog of cats with as many
// tools as asked for, and counts them: the store's tests need many
// catalogs of known heap, not their compiles. One catalog may then be
// held under several keys.
func useCatalogs(c *Cache, cats map[int]*Catalog) (compiles *atomic.Int64) {
	compiles = new(atomic.Int64)
	c.compile = func(_ context.Context, tools []Tool, _ Config) (*Catalog, error) {
		compiles.Add(1)
		return cats[len(tools)], nil
	}
	return compiles
}

// getTools asks c for key, whose catalog has n tools, for a request the
// upstream accepts.
func getTools(t *testing.T, c *Cache, key string, n int) {
	t.Helper()
	if _, err := c.Get(context.Background(), key, func() ([]Tool, Config) { return make([]Tool, n), Config{} }); err != nil {
		t.Fatal(err)
	}
	c.Accepted(key)
}

func TestCacheHoldsNoMoreBytesThanItsBound(t *testing.T) {
	// A catalog's estimate counts its bleve index as scorch reports it,
	// which its merges change while the catalog compiles: a 20-tool one
	// measured 125 to 175 KB. Twenty times the tools keeps the large one
	// well over three times the small.
	cats := prebuilt(t, 20, 400)
	small, large := cats[20].heldBytes(), cats[400].heldBytes()
	if large < 3*small {
		t.Fatalf("catalogs of %d and %d bytes: the test needs the large one three times the small", small, large)
	}
	bound := large + 2*small
	newStore := func(t *testing.T) (*Cache, *atomic.Int64) {
		c := newCache(CacheOptions{Catalogs: 100, Bytes: bound}, CacheTools)
		return c, useCatalogs(c, cats)
	}
	t.Run("catalogs asked for again are let go, least recently used first, to keep their heap under the bound", func(t *testing.T) {
		c, _ := newStore(t)
		for i := range 10 {
			key := fmt.Sprint("s", i)
			getTools(t, c, key, 20)
			getTools(t, c, key, 20)
			if s := c.Stats(); s.Bytes > bound {
				t.Fatalf("after %d catalogs: %d bytes held, over the bound of %d", i+1, s.Bytes, bound)
			}
		}
		getTools(t, c, "big", 400)
		getTools(t, c, "big", 400)
		if s := c.Stats(); s.Bytes > bound || s.Len != 3 {
			t.Errorf("after a large catalog: %d catalogs of %d bytes; want the large one and the two newest small ones, %d bytes", s.Len, s.Bytes, large+2*small)
		}
	})
	t.Run("catalogs compiled once hold a quarter of the bound", func(t *testing.T) {
		c, _ := newStore(t)
		for i := range 20 {
			getTools(t, c, fmt.Sprint("once", i), 20)
		}
		if s := c.Stats(); s.Bytes > bound/4+small {
			t.Errorf("%d one-off catalogs hold %d bytes; want a quarter of %d", s.Len, s.Bytes, bound)
		}
	})
	t.Run("a catalog larger than the bound alone is compiled and returned, not held", func(t *testing.T) {
		c := newCache(CacheOptions{Catalogs: 100, Bytes: large / 2}, CacheTools)
		compiles := useCatalogs(c, cats)
		getTools(t, c, "small", 20)
		getTools(t, c, "small", 20)
		for range 2 {
			cat, err := c.Get(context.Background(), "huge", func() ([]Tool, Config) { return make([]Tool, 400), Config{} })
			if err != nil || cat == nil || cat.Len() != 400 {
				t.Fatalf("Get = %v, %v; want the compiled catalog", cat, err)
			}
		}
		s := c.Stats()
		if s.Len != 1 || s.Bytes != small || s.TooLarge != 2 {
			t.Errorf("stats %+v: want the small catalog alone held and two too large", s)
		}
		if n := compiles.Load(); n != 3 {
			t.Errorf("%d compiles; want 3: the small catalog once, the large one on each Get", n)
		}
	})
	t.Run("a catalog's memos growing are counted when it is asked for, and others let go", func(t *testing.T) {
		c := newCache(CacheOptions{Catalogs: 100, Bytes: 1 << 30}, CacheTools)
		grows := compileTest(t, syntheticTools(30), Config{})
		other := compileTest(t, syntheticTools(20), Config{})
		c.compile = func(_ context.Context, tools []Tool, _ Config) (*Catalog, error) {
			if len(tools) == 30 {
				return grows, nil
			}
			return other, nil
		}
		getTools(t, c, "other", 20)
		getTools(t, c, "other", 20)
		getTools(t, c, "grows", 30)
		getTools(t, c, "grows", 30)
		before := c.Stats().Bytes
		for i := range 50 {
			if _, err := grows.Search(context.Background(), Query{Text: fmt.Sprintf("archive the %d drafts of the quarterly report %d", i, i*7)}); err != nil {
				t.Fatal(err)
			}
		}
		grown := grows.heldBytes() + other.heldBytes()
		if grown <= before {
			t.Fatalf("searching did not grow the catalog's heap (%d -> %d bytes)", before, grown)
		}
		c.held.maxBytes = grown - 1 // the bound the grown catalogs pass
		getTools(t, c, "grows", 30)
		if s := c.Stats(); s.Len != 1 || s.Bytes != grows.heldBytes() {
			t.Errorf("after the grown catalog was asked for: %d catalogs of %d bytes; want it alone, %d", s.Len, s.Bytes, grows.heldBytes())
		}
	})
}

func TestCacheHitsCatalogsAskedForInRotation(t *testing.T) {
	const capacity = 40
	cats := prebuilt(t, 5)
	// rotate asks for keys in turn, rounds times, and returns the share
	// of hits over the rounds after the first two (which fill the cache).
	// Between two keys of the rotation it asks for each of hot, whose
	// hits it returns apart.
	rotate := func(t *testing.T, keys, rounds int, hot []string, byBytes bool) (rotating, hotHits float64) {
		o := CacheOptions{Catalogs: capacity}
		if byBytes {
			o = CacheOptions{Catalogs: 10 * capacity, Bytes: capacity * cats[5].heldBytes()}
		}
		c := newCache(o, CacheTools)
		useCatalogs(c, cats)
		var hits, gets, hHits, hGets int64
		for r := range rounds {
			for k := range keys {
				before := c.Stats().Hits
				getTools(t, c, fmt.Sprint("tenant", k), 5)
				if r >= 2 {
					gets++
					hits += c.Stats().Hits - before
				}
				for _, h := range hot {
					before := c.Stats().Hits
					getTools(t, c, h, 5)
					if r >= 2 {
						hGets++
						hHits += c.Stats().Hits - before
					}
				}
			}
		}
		rotating = float64(hits) / float64(gets)
		if hGets > 0 {
			hotHits = float64(hHits) / float64(hGets)
		}
		t.Logf("%d keys in rotation over room for %d: %.2f of their gets hit; hot keys %.2f", keys, capacity, rotating, hotHits)
		return rotating, hotHits
	}
	tests := []struct {
		name         string
		keys         int
		hot          []string
		byBytes      bool    // the byte bound makes the room, not the count
		wantRotating float64 // at least
		wantHot      float64 // at least
	}{
		{"a rotation that fits hits every time", capacity - 2, nil, false, 1, 0},
		// Least recently used gets none here; random picks among the
		// older three quarters give about 0.55 on average.
		{"a rotation a fifth larger than the bound still hits", capacity * 6 / 5, nil, false, 0.4, 0},
		{"a rotation a fifth larger than the byte bound still hits", capacity * 6 / 5, nil, true, 0.4, 0},
		{"a rotation twice the bound hits some", capacity * 2, nil, false, 0.05, 0},
		{"catalogs in steady use keep their hits beside a rotation past the bound", capacity * 3 / 2, []string{"hot1", "hot2", "hot3"}, false, 0.1, 0.99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rotating, hot := rotate(t, tt.keys, 30, tt.hot, tt.byBytes)
			if rotating < tt.wantRotating {
				t.Errorf("rotation hit rate %.2f, want at least %.2f", rotating, tt.wantRotating)
			}
			if hot < tt.wantHot {
				t.Errorf("hot keys' hit rate %.2f, want at least %.2f", hot, tt.wantHot)
			}
		})
	}
}

// TestACatalogWhoseMemosOutgrowTheBoundIsLetGo: a catalog held under the
// byte bound whose memos then grow past the bound alone is let go, as one
// compiled over it is never held; it would let every other catalog go.
func TestACatalogWhoseMemosOutgrowTheBoundIsLetGo(t *testing.T) {
	cats := prebuilt(t, 20, 200)
	small, large := cats[20].heldBytes(), cats[200].heldBytes()
	bound := large + 3*small
	c := newCache(CacheOptions{Catalogs: 100, Bytes: bound}, CacheTools)
	c.compile = func(_ context.Context, tools []Tool, _ Config) (*Catalog, error) {
		return compileTest(t, syntheticTools(len(tools)), Config{}), nil
	}
	for i := range 3 {
		getTools(t, c, fmt.Sprint("s", i), 20)
		getTools(t, c, fmt.Sprint("s", i), 20)
	}
	getTools(t, c, "big", 200)
	getTools(t, c, "big", 200)
	big, ok := c.held.get("big")
	if !ok {
		t.Fatal("the large catalog is not held before its memos grow")
	}
	big.memoBytes.Add(bound) // its memos fill as it ranks requests
	getTools(t, c, "big", 200)
	s := c.Stats()
	if s.Bytes > bound {
		t.Errorf("%d catalogs hold %d bytes, over the bound of %d", s.Len, s.Bytes, bound)
	}
	if _, ok := c.held.get("big"); ok {
		t.Error("the catalog past the bound alone is still held")
	}
	if s.TooLarge == 0 {
		t.Error("the catalog let go is not counted as too large")
	}
}
