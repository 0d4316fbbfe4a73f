package selector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wordyTools generates n tools whose descriptions (desc bytes) and
// parameters (params, 450 bytes each) are drawn from the 8,000 most
// common words of the word vectors, common ones more often: the shapes
// whose distinct words make a compiled catalog large.
func wordyTools(t testing.TB, n, desc, params int) []Tool {
	t.Helper()
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	vocab := wv.words[:min(8000, len(wv.words))]
	r := rand.New(rand.NewPCG(uint64(n), uint64(desc*100+params)))
	text := func(size int) string {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(vocab[int(float64(len(vocab))*r.Float64()*r.Float64())])
			b.WriteByte(' ')
		}
		return strings.Clone(b.String()) // the builder's spare capacity is not the tool's
	}
	out := make([]Tool, n)
	for i := range out {
		tl := Tool{Name: fmt.Sprintf("svc%d_%s_%s_%d", i%40, vocab[r.IntN(500)], vocab[r.IntN(500)], i), Description: text(desc)}
		for j := range params {
			tl.Params = append(tl.Params, Param{Name: fmt.Sprintf("%s_%d", vocab[r.IntN(2000)], j), Description: text(450)})
		}
		out[i] = tl
	}
	return out
}

// heapGrowth returns how much the live heap grew over f, and f's value,
// kept alive until measured. Collections run until the cleanups of
// earlier catalogs (their bleve indexes closing) have freed theirs.
func heapGrowth[V any](f func() V) (int64, V) {
	settle := func() {
		for range 3 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	var before, after runtime.MemStats
	settle()
	runtime.ReadMemStats(&before)
	v := f()
	settle()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), v
}

// TestCatalogSizeEstimateMatchesTheHeap holds heldBytes, which the cache
// bounds its catalogs by, to what compiling and then searching really
// leave on the heap, across the shapes that make catalogs small and
// large per tool.
func TestCatalogSizeEstimateMatchesTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and measures the heap")
	}
	if _, err := Compile(context.Background(), syntheticTools(3), Config{}); err != nil { // loads the shared tables first
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		tools func() []Tool
	}{
		{"one tool", func() []Tool { return syntheticTools(1) }},
		{"200 short tools", func() []Tool { return syntheticTools(200) }},
		{"6 tools of 4 KB and 60 parameters", func() []Tool { return wordyTools(t, 6, 4000, 60) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The tools are made inside the measurement: a catalog holds
			// their text too.
			held, c := heapGrowth(func() *Catalog { return compileTest(t, tt.tools(), Config{}) })
			within := func(what string, est, held int64) {
				t.Helper()
				t.Logf("%s: estimated %d KB, the heap holds %d KB", what, est>>10, held>>10)
				// 15 % and 64 KB: the estimate takes allocations' and
				// map slots' rounding as an average, counts a memo
				// entry's overhead as one figure, and a test's heap is
				// not still.
				if d := est - held; d > held*15/100+64<<10 || -d > held*15/100+64<<10 {
					t.Errorf("%s: estimated %d KB, the heap holds %d KB", what, est>>10, held>>10)
				}
			}
			within("compiled", c.heldBytes(), held)
			before := c.heldBytes()
			grown, _ := heapGrowth(func() int {
				r := rand.New(rand.NewPCG(1, 2))
				words := c.wv.words[:4000]
				for range 100 {
					var q strings.Builder
					for range 8 {
						q.WriteString(words[int(float64(len(words))*r.Float64()*r.Float64())] + " ")
					}
					if _, err := c.Search(context.Background(), Query{Text: q.String(), Limit: 10}); err != nil {
						t.Fatal(err)
					}
					if _, err := c.Preselect(context.Background(), []string{q.String()}, 7, Query{}); err != nil {
						t.Fatal(err)
					}
				}
				return 0
			})
			within("grown by 100 searches", c.heldBytes()-before, grown)
			runtime.KeepAlive(c)
		})
	}
}

// BenchmarkCatalogHeld reports the heap a compiled catalog holds per
// tool (what the catalog cache's byte bound counts), and its estimate,
// by shape: short synthetic tools, and tools whose long descriptions and
// parameter lists bring thousands of distinct words.
func BenchmarkCatalogHeld(b *testing.B) {
	for _, s := range []struct{ n, desc, params int }{{200, 0, 0}, {200, 300, 5}, {200, 4000, 0}, {128, 4000, 60}, {12, 4000, 60}} {
		b.Run(fmt.Sprintf("tools=%d/desc=%d/params=%d", s.n, s.desc, s.params), func(b *testing.B) {
			gen := func() []Tool { return wordyTools(b, s.n, s.desc, s.params) }
			if s.desc == 0 {
				gen = func() []Tool { return syntheticTools(s.n) }
			}
			var held, est int64
			for b.Loop() {
				var c *Catalog
				held, c = heapGrowth(func() *Catalog {
					c, err := Compile(context.Background(), gen(), Config{})
					if err != nil {
						b.Fatal(err)
					}
					return c
				})
				est = c.heldBytes()
			}
			b.ReportMetric(float64(held)/float64(s.n)/1024, "KB-held/tool")
			b.ReportMetric(float64(est)/float64(s.n)/1024, "KB-est/tool")
			b.ReportMetric(float64(held)/(1<<20), "MB-held")
		})
	}
}
