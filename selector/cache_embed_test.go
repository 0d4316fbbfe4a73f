package selector

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedEmbedder embeds a catalog once open is closed, or fails when its
// ctx ends first; it counts the calls running and those cancelled, and
// remembers each call's first text.
type gatedEmbedder struct {
	open                             chan struct{}
	started, live, peak, interrupted atomic.Int64
	mu                               sync.Mutex
	firsts                           []string
}

func newGatedEmbedder() *gatedEmbedder { return &gatedEmbedder{open: make(chan struct{})} }

func (e *gatedEmbedder) Model() string { return "gated" }

func (e *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 1 { // a query
		return [][]float32{{1, 0}}, nil
	}
	e.mu.Lock()
	e.firsts = append(e.firsts, texts[0])
	e.mu.Unlock()
	e.started.Add(1)
	l := e.live.Add(1)
	defer e.live.Add(-1)
	for p := e.peak.Load(); l > p && !e.peak.CompareAndSwap(p, l); p = e.peak.Load() {
	}
	select {
	case <-ctx.Done():
		e.interrupted.Add(1)
		return nil, ctx.Err()
	case <-e.open:
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, float32(i + 1)}
	}
	return out, nil
}

// embeddedFor reports whether a call embedded the catalog marked m.
func (e *gatedEmbedder) embeddedFor(m string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.firsts {
		if strings.Contains(f, m) {
			return true
		}
	}
	return false
}

// markedTools are n tools whose texts all carry marker m.
func markedTools(m string, n int) []Tool {
	tools := syntheticTools(n)
	for i := range tools {
		tools[i].Name = m + "_" + tools[i].Name
		tools[i].Description = m + " " + tools[i].Description
	}
	return tools
}

func TestCacheBoundsTheBackgroundEmbeddingOfCatalogs(t *testing.T) {
	// get is a request that used key's catalog and was accepted.
	get := func(t *testing.T, c *Cache, e Embedder, key string) {
		t.Helper()
		if _, err := c.Get(context.Background(), key, func() ([]Tool, Config) { return markedTools(key, 20), Config{Embedder: e} }); err != nil {
			t.Fatal(err)
		}
		c.Accepted(key)
	}
	t.Run("six catalogs compiled at once embed two at a time", func(t *testing.T) {
		e := newGatedEmbedder()
		c := NewCacheWith(CacheOptions{Catalogs: 64, CatalogEmbeddings: 2}) // room for six fresh catalogs
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() { get(t, c, e, fmt.Sprint("cat", i)) })
		}
		wg.Wait()
		waitFor(t, "two catalogs embed", func() bool { return e.live.Load() >= 2 })
		time.Sleep(20 * time.Millisecond) // time for any others to start, were they let
		if p := e.peak.Load(); p != 2 {
			t.Errorf("%d catalog embeddings ran at once, want 2", p)
		}
		close(e.open)
		waitFor(t, "every catalog embedded", func() bool { return e.started.Load() == 6 })
		if p := e.peak.Load(); p != 2 {
			t.Errorf("%d catalog embeddings ran at once, want 2", p)
		}
	})
	t.Run("a catalog the cache lets go stops embedding", func(t *testing.T) {
		e := newGatedEmbedder()
		defer close(e.open)
		c := newCache(CacheOptions{Catalogs: 16, CatalogEmbeddings: 1}, 100) // one 20-tool catalog compiled once fits
		get(t, c, e, "first")
		waitFor(t, "the first catalog embeds", func() bool { return e.live.Load() == 1 })
		get(t, c, e, "second") // lets the first go
		waitFor(t, "the first catalog's embedding stops", func() bool { return e.interrupted.Load() == 1 })
		waitFor(t, "the second catalog embeds in the slot it freed", func() bool { return e.embeddedFor("second") })
	})
	t.Run("a catalog no accepted request used embeds nothing until one is", func(t *testing.T) {
		e := newGatedEmbedder()
		close(e.open)
		c := NewCacheWith(CacheOptions{Catalogs: 16})
		for range 2 { // refused twice: searched, never accepted
			cat, err := c.Get(context.Background(), "refused", func() ([]Tool, Config) { return markedTools("refused", 20), Config{Embedder: e} })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cat.Search(context.Background(), Query{Text: "refused tool"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond) // time for an embedding to start, were it let
		if n := e.started.Load(); n != 0 {
			t.Fatalf("%d catalog embeddings started for a catalog no accepted request used", n)
		}
		c.Accepted("refused")
		waitFor(t, "the catalog embeds once a request that used it is accepted", func() bool { return e.embeddedFor("refused") })
	})
	t.Run("a catalog let go while it waits for a slot never embeds", func(t *testing.T) {
		e := newGatedEmbedder()
		c := newCache(CacheOptions{Catalogs: 16, CatalogEmbeddings: 1}, 100)
		get(t, c, e, "kept")
		get(t, c, e, "kept") // asked for again: the new catalogs below do not let it go
		waitFor(t, "the kept catalog embeds", func() bool { return e.live.Load() == 1 })
		get(t, c, e, "waiting")
		get(t, c, e, "newer") // lets "waiting" go before a slot was free
		close(e.open)
		waitFor(t, "the newer catalog embeds", func() bool { return e.embeddedFor("newer") })
		if e.embeddedFor("waiting") {
			t.Error("a catalog let go before its turn was embedded")
		}
	})
}
