package selector

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCacheCompilesEachKeyOnce(t *testing.T) {
	tools := testTools(t)
	c := NewCache(2)
	var builds atomic.Int32
	build := func() ([]Tool, Config) {
		builds.Add(1)
		return tools, Config{}
	}
	t.Run("concurrent gets of one key share one compile", func(t *testing.T) {
		var wg sync.WaitGroup
		cats := make([]*Catalog, 8)
		for i := range cats {
			wg.Go(func() {
				cat, err := c.Get(context.Background(), "k1", build)
				if err != nil {
					t.Error(err)
				}
				cats[i] = cat
			})
		}
		wg.Wait()
		if n := builds.Load(); n != 1 {
			t.Errorf("built %d times, want 1", n)
		}
		for _, cat := range cats[1:] {
			if cat != cats[0] {
				t.Error("callers got different catalogs for one key")
			}
		}
	})
	t.Run("a later get is a hit", func(t *testing.T) {
		before := c.Stats()
		if _, err := c.Get(context.Background(), "k1", build); err != nil {
			t.Fatal(err)
		}
		after := c.Stats()
		if after.Hits != before.Hits+1 || builds.Load() != 1 {
			t.Errorf("stats %+v -> %+v, builds %d", before, after, builds.Load())
		}
	})
	t.Run("the least recently used catalog is evicted", func(t *testing.T) {
		for _, k := range []string{"k2", "k2", "k3", "k3"} { // each used twice by accepted requests: kept
			if _, err := c.Get(context.Background(), k, build); err != nil {
				t.Fatal(err)
			}
			c.Accepted(k)
		}
		n := builds.Load()
		if _, err := c.Get(context.Background(), "k1", build); err != nil {
			t.Fatal(err)
		}
		if builds.Load() != n+1 || c.Stats().Len != 2 {
			t.Errorf("k1 was not recompiled after eviction (builds %d -> %d)", n, builds.Load())
		}
	})
	t.Run("a failed compile is reported and not cached", func(t *testing.T) {
		empty := func() ([]Tool, Config) { return nil, Config{} }
		for range 2 {
			if _, err := c.Get(context.Background(), "bad", empty); !errors.Is(err, ErrEmptyCatalog) {
				t.Errorf("err = %v, want ErrEmptyCatalog", err)
			}
		}
	})
	t.Run("a cancelled caller stops waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Get(ctx, "k9", build); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestCacheHoldsNoMoreToolsThanItsBound(t *testing.T) {
	c := newCache(CacheOptions{Catalogs: 10}, 300)
	get := func(key string, n int) {
		t.Helper()
		for range 2 { // asked for again, as a client re-sending its tools does
			if _, err := c.Get(context.Background(), key, func() ([]Tool, Config) { return syntheticTools(n), Config{} }); err != nil {
				t.Fatal(err)
			}
			c.Accepted(key)
		}
	}
	steps := []struct {
		name      string
		key       string
		tools     int
		wantLen   int
		wantTools int64
	}{
		{"a first catalog is held", "a", 200, 1, 200},
		{"a second that goes over the bound lets the first go", "b", 150, 1, 150},
		{"a third that fits is held with it", "c", 100, 2, 250},
		{"one larger than the bound is held alone", "d", 400, 1, 400},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			get(st.key, st.tools)
			if s := c.Stats(); s.Len != st.wantLen || s.Tools != st.wantTools {
				t.Errorf("%d catalogs, %d tools; want %d, %d", s.Len, s.Tools, st.wantLen, st.wantTools)
			}
		})
	}
}

func TestCachePurgeLetsEveryCatalogGo(t *testing.T) {
	c := NewCache(8)
	var builds atomic.Int32
	build := func() ([]Tool, Config) {
		builds.Add(1)
		return syntheticTools(20), Config{}
	}
	held, err := c.Get(context.Background(), "a", build)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "b", build); err != nil {
		t.Fatal(err)
	}
	c.Purge()
	t.Run("the cache holds no catalog and no tools", func(t *testing.T) {
		if s := c.Stats(); s.Len != 0 || s.Tools != 0 {
			t.Errorf("%d catalogs, %d tools after Purge; want 0, 0", s.Len, s.Tools)
		}
	})
	t.Run("a catalog a caller holds still answers", func(t *testing.T) {
		if n := len(held.Names()); n != 20 {
			t.Errorf("held catalog has %d names, want 20", n)
		}
	})
	t.Run("the next get of a purged key compiles again", func(t *testing.T) {
		before := builds.Load()
		if _, err := c.Get(context.Background(), "a", build); err != nil {
			t.Fatal(err)
		}
		if builds.Load() != before+1 {
			t.Errorf("builds %d -> %d, want one compile", before, builds.Load())
		}
		if s := c.Stats(); s.Len != 1 || s.Tools != 20 {
			t.Errorf("%d catalogs, %d tools; want 1, 20", s.Len, s.Tools)
		}
	})
}

func TestCacheKeepsTheCatalogsClientsSendAgain(t *testing.T) {
	// Room for 1,000 tools: fresh catalogs may hold 250 of them.
	type step struct {
		key     string
		tools   int
		refused bool // the upstream refused the request: no Accepted
	}
	ok := func(key string, tools int) step { return step{key, tools, false} }
	no := func(key string, tools int) step { return step{key, tools, true} }
	tests := []struct {
		name      string
		steps     []step // Gets, each Accepted unless refused, in order
		then      string // a key asked for after them
		wantBuild bool   // whether that Get compiles
	}{
		{"a client re-sending its tools compiles once and hits from its second request",
			[]step{ok("agent", 100)}, "agent", false},
		{"one client's stream of new catalogs does not evict a catalog another client re-sends",
			[]step{ok("victim", 200), ok("victim", 200), ok("f1", 240), ok("f2", 240), ok("f3", 240), ok("f4", 240), ok("f5", 240), ok("f6", 240)}, "victim", false},
		{"new catalogs hold no more than a quarter of the bound: the oldest of them goes first",
			[]step{ok("f1", 200), ok("f2", 200)}, "f1", true},
		{"a catalog let go before it was asked again is kept once compiled again",
			[]step{ok("slow", 200), ok("f1", 200), ok("slow", 200), ok("f2", 200), ok("f3", 200)}, "slow", false},
		{"catalogs asked for again still go least recently used first when they fill the bound",
			[]step{ok("a", 400), ok("a", 400), ok("b", 400), ok("b", 400), ok("c", 400), ok("c", 400)}, "a", true},
		{"catalogs re-sent by requests the upstream refused do not evict one an accepted client re-sends",
			[]step{ok("victim", 200), ok("victim", 200), no("r1", 240), no("r1", 240), no("r2", 240), no("r2", 240),
				no("r3", 240), no("r3", 240), no("r4", 240), no("r4", 240)}, "victim", false},
		{"a catalog re-sent only by refused requests stays among the fresh ones, the oldest of them going first",
			[]step{no("r1", 200), no("r1", 200), no("r2", 200), no("r2", 200)}, "r1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(CacheOptions{Catalogs: 16}, 1000)
			sizes := map[string]int{}
			var builds atomic.Int32
			get := func(key string) {
				t.Helper()
				if _, err := c.Get(context.Background(), key, func() ([]Tool, Config) {
					builds.Add(1)
					return syntheticTools(sizes[key]), Config{}
				}); err != nil {
					t.Fatal(err)
				}
			}
			for _, st := range tt.steps {
				sizes[st.key] = st.tools
				get(st.key)
				if !st.refused {
					c.Accepted(st.key)
				}
			}
			before := builds.Load()
			get(tt.then)
			if built := builds.Load() > before; built != tt.wantBuild {
				t.Errorf("asking for %q again compiled: %v, want %v (stats %+v)", tt.then, built, tt.wantBuild, c.Stats())
			}
			if s := c.Stats(); s.Tools > 1000 && s.Len > 1 {
				t.Errorf("%d catalogs hold %d tools, over the bound of 1000", s.Len, s.Tools)
			}
		})
	}
}

func TestCacheRetainPurgesOnlyWhenARuleKeyIsGone(t *testing.T) {
	c := NewCache(8)
	build := func() ([]Tool, Config) { return syntheticTools(20), Config{} }
	c.Retain(1, 2) // the first call only records
	for _, tc := range []struct {
		name    string
		keys    []uint64
		wantLen int
	}{
		{"the same keys keep the catalogs", []uint64{1, 2}, 1},
		{"the same keys in another order keep them", []uint64{2, 1}, 1},
		{"a key that joined keeps them", []uint64{2, 1, 3}, 1},
		{"a key that is gone lets them go", []uint64{2, 3}, 0},
		{"a key replaced by another lets them go", []uint64{2, 4}, 0},
		{"no keys at all let them go", nil, 0},
		{"keys after none keep them", []uint64{5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Get(context.Background(), "tools:rules", build); err != nil {
				t.Fatal(err)
			}
			c.Retain(tc.keys...)
			if n := c.Stats().Len; n != tc.wantLen {
				t.Errorf("%d catalogs cached after Retain(%v), want %d", n, tc.keys, tc.wantLen)
			}
		})
	}
}

// TestWarmLoadsWhatTheFirstCatalogNeeds: Warm compiles and ranks once, so
// it fails where a first catalog would, and runs again at no harm.
func TestWarmLoadsWhatTheFirstCatalogNeeds(t *testing.T) {
	for i := range 2 {
		if err := Warm(context.Background()); err != nil {
			t.Fatalf("warm-up %d: %v", i+1, err)
		}
	}
}
