package embeddings

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOpenAIEmbedderCachesVectors(t *testing.T) {
	f := newFakeEndpoint(t, letters(26))
	dir := t.TempDir()
	ctx := context.Background()
	texts := []string{"read a file", "send a message"}
	if _, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, texts); err != nil {
		t.Fatal(err)
	}
	t.Run("a second embedder reads the disk cache instead of the service", func(t *testing.T) {
		before := f.texts.Load()
		v, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, texts)
		if err != nil || len(v) != 2 || len(v[0]) != 26 {
			t.Fatalf("Embed = %d vectors, %v", len(v), err)
		}
		if f.texts.Load() != before {
			t.Errorf("service embedded %d more texts, want 0", f.texts.Load()-before)
		}
	})
}

func TestEmbedderDiskCacheFiles(t *testing.T) {
	ctx := context.Background()
	t.Run("the cache dir and its files are readable by their owner only", func(t *testing.T) {
		f := newFakeEndpoint(t, letters(8))
		dir := filepath.Join(t.TempDir(), "cache")
		if _, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, []string{"read a file"}); err != nil {
			t.Fatal(err)
		}
		modes := map[string]fs.FileMode{dir: 0o700}
		for _, p := range cacheFiles(t, dir) {
			modes[p] = 0o600
		}
		for p, want := range modes {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("%s has mode %v, want %v", filepath.Base(p), got, want)
			}
		}
	})
	t.Run("a cache dir that cannot be created leaves the embedder without a disk cache instead of failing", func(t *testing.T) {
		f := newFakeEndpoint(t, letters(8))
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, Model: "m", CacheDir: filepath.Join(file, "cache")})
		if err != nil {
			t.Fatalf("NewOpenAI: %v", err)
		}
		if _, err := e.Embed(ctx, []string{"read a file"}); err != nil {
			t.Errorf("Embed: %v", err)
		}
	})
	t.Run("gateways writing one key in a shared dir while another reads it never show a torn file", func(t *testing.T) {
		dir := t.TempDir()
		mk := func() *OpenAI { return newTestEmbedder(t, "http://x/v1", dir) }
		a, b, r := mk(), mk(), mk()
		v := make([]float32, 3072)
		for i := range v {
			v[i] = 1
		}
		var seen atomic.Bool
		var bad atomic.Int64
		deadline := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for _, e := range []*OpenAI{a, b} {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					e.writeDisk("k", v)
				}
			})
		}
		wg.Go(func() {
			for time.Now().Before(deadline) {
				got, ok := r.readDisk("k")
				switch {
				case ok && len(got) == len(v):
					seen.Store(true)
				case seen.Load():
					bad.Add(1) // once written, the file must stay whole
				}
			}
		})
		wg.Wait()
		if bad.Load() > 0 {
			t.Errorf("%d reads found the file missing or torn after it was first written", bad.Load())
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) > 0 {
			t.Errorf("%d temporary files left", len(tmps))
		}
	})
}

func TestEmbedderDiskCacheBound(t *testing.T) {
	ctx := context.Background()
	const dims = 8
	const fileSize = diskHeader + 4*dims
	const bound = int64(10 * fileSize) // sweeps keep 9 files (90 %)
	base := time.Now().Add(-time.Hour)
	texts := make([]string, 30)
	for i := range texts {
		texts[i] = "tool " + strconv.Itoa(i)
	}
	// embed embeds texts one by one, waiting for the sweep each write may
	// start, then dates each file base+i seconds: file timestamps are too
	// coarse to order writes that close together.
	embed := func(t *testing.T, e *OpenAI, dir string, from int, texts []string) {
		t.Helper()
		for i, s := range texts {
			if _, err := e.Embed(ctx, []string{s}); err != nil {
				t.Fatal(err)
			}
			e.disk.sweeps.Wait()
			at := base.Add(time.Duration(from+i) * time.Second)
			_ = os.Chtimes(filepath.Join(dir, e.key4(s)+".f32"), at, at) // a removed file stays removed
		}
	}
	newEmbedder := func(t *testing.T, url, dir string) *OpenAI {
		t.Helper()
		e, err := NewOpenAI(OpenAIOptions{BaseURL: url, Model: "m", CacheDir: dir, CacheMaxBytes: bound})
		if err != nil {
			t.Fatal(err)
		}
		e.disk.sweeps.Wait()
		return e
	}
	// recording answers like letters and records the texts asked for.
	recording := func(asked *[]string) func([]string) fakeAnswer {
		return func(in []string) fakeAnswer {
			*asked = append(*asked, in...)
			return letters(dims)(in)
		}
	}
	dirBytes := func(t *testing.T, dir string) int64 {
		t.Helper()
		var n int64
		for _, p := range cacheFiles(t, dir) {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
		return n
	}

	t.Run("many vectors leave the directory under the bound with the newest kept, and an evicted one is recomputed", func(t *testing.T) {
		dir := t.TempDir()
		var asked []string
		f := newFakeEndpoint(t, recording(&asked))
		e := newEmbedder(t, f.srv.URL, dir)
		embed(t, e, dir, 0, texts)
		if n := dirBytes(t, dir); n > bound {
			t.Errorf("cache dir holds %d bytes of vectors, want at most %d", n, bound)
		}
		if got := e.disk.bytes.Load(); got != dirBytes(t, dir) {
			t.Errorf("estimate is %d bytes, the directory holds %d", got, dirBytes(t, dir))
		}
		newest := texts[len(texts)-9:]
		for _, s := range newest {
			if _, err := os.Stat(filepath.Join(dir, e.key4(s)+".f32")); err != nil {
				t.Errorf("newest vector %q was evicted: %v", s, err)
			}
		}

		// A fresh embedder (a restart) has only the disk to go by.
		f.mu.Lock()
		asked = nil
		f.mu.Unlock()
		r := newEmbedder(t, f.srv.URL, dir)
		got, err := r.Embed(ctx, []string{texts[0], newest[0]})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(got[0]) != dims || len(got[1]) != dims {
			t.Fatalf("Embed returned %v", got)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if !slices.Equal(asked, []string{texts[0]}) {
			t.Errorf("endpoint asked for %q, want only the evicted %q", asked, texts[0])
		}
	})

	t.Run("a vector read from disk outlives older ones written after it was first written", func(t *testing.T) {
		dir := t.TempDir()
		var asked []string
		f := newFakeEndpoint(t, recording(&asked))
		embed(t, newEmbedder(t, f.srv.URL, dir), dir, 0, texts[:9])
		r := newEmbedder(t, f.srv.URL, dir)
		if _, err := r.Embed(ctx, texts[:1]); err != nil { // a disk hit
			t.Fatal(err)
		}
		embed(t, r, dir, 100, texts[9:11])
		for i, s := range texts[:11] {
			_, err := os.Stat(filepath.Join(dir, r.key4(s)+".f32"))
			if kept, wantKept := err == nil, i == 0 || i > 2; kept != wantKept {
				t.Errorf("vector %q kept = %v, want %v", s, kept, wantKept)
			}
		}
	})
}
