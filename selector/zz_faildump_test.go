package selector

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestZZFailDump(t *testing.T) {
	s := os.Getenv("FAILDUMP")
	if s == "" {
		t.Skip()
	}
	ctx := context.Background()
	defs, _ := LoadCatalogFile("/work/shared/eval/" + s + ".catalog.json")
	cats := map[string]*Catalog{}
	for id, tools := range defs {
		c, err := Compile(ctx, tools, Config{})
		if err != nil {
			t.Fatal(err)
		}
		cats[id] = c
	}
	qs, _ := LoadQueries("/work/shared/eval/" + s + ".dev.jsonl")
	r := SearchRanker(cats, 10)
	n := 0
	for _, q := range qs {
		top, _ := r(ctx, q)
		if goldHits(q, top, 10) == len(q.Gold) {
			continue
		}
		n++
		c := cats[q.Catalog]
		if c == nil {
			for _, o := range cats {
				c = o
			}
		}
		fmt.Printf("=== %s [%s] %q\n", q.ID, q.Subset, trunc(q.Query, 300))
		in := map[string]bool{}
		for _, x := range top {
			in[x] = true
		}
		for _, g := range q.Gold {
			mark := "MISS"
			if in[g] {
				mark = "ok"
			}
			tl, _ := c.Tool(g)
			fmt.Printf("  gold(%s) %s: %s\n", mark, g, trunc(tl.Description, 150))
		}
		for i, x := range top {
			if i >= 5 {
				break
			}
			tl, _ := c.Tool(x)
			fmt.Printf("  %d %s: %s\n", i+1, x, trunc(tl.Description, 90))
		}
	}
	fmt.Println("misses", n)
}

func trunc(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n]
	}
	return s
}
