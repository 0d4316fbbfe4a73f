package selector

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
		e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{BaseURL: f.srv.URL, Model: "m", CacheDir: filepath.Join(file, "cache")})
		if err != nil {
			t.Fatalf("NewOpenAIEmbedder: %v", err)
		}
		if _, err := e.Embed(ctx, []string{"read a file"}); err != nil {
			t.Errorf("Embed: %v", err)
		}
	})
	t.Run("gateways writing one key in a shared dir while another reads it never show a torn file", func(t *testing.T) {
		dir := t.TempDir()
		mk := func() *OpenAIEmbedder { return newTestEmbedder(t, "http://x/v1", dir) }
		a, b, r := mk(), mk(), mk()
		v := make([]float32, 3072)
		for i := range v {
			v[i] = 1
		}
		var seen atomic.Bool
		var bad atomic.Int64
		deadline := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for _, e := range []*OpenAIEmbedder{a, b} {
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
