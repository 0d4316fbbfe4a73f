package selector

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// devDir is the shared dev sets, beside the repository root.
const devDir = "../../shared/eval"

// TestDevSetsBeatTheBM25Floor guards against regressions: the selector must
// stay above plain BM25 (the floor the dev README records) at recall@5.
func TestDevSetsBeatTheBM25Floor(t *testing.T) {
	if testing.Short() {
		t.Skip("dev-set evaluation skipped in -short mode")
	}
	floors := map[string]float64{"bfcl": 0.800, "metatool": 0.526, "mcp": 0.713}
	for src, floor := range floors {
		t.Run(src+" recall@5 is above the BM25 floor", func(t *testing.T) {
			catPath := filepath.Join(devDir, src+".catalog.json")
			if _, err := os.Stat(catPath); err != nil {
				t.Skipf("dev set not available: %v", err)
			}
			raw := loadCatalogFile(t, catPath)
			cats := map[string]*Catalog{}
			for id, tools := range raw {
				cats[id] = compileTest(t, tools, Config{})
			}
			qs, err := LoadQueries(filepath.Join(devDir, src+".dev.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Evaluate(context.Background(), qs, SearchRanker(cats, 10))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: R@1 %.3f R@5 %.3f R@10 %.3f all@5 %.3f", src, rep.Overall.Recall1, rep.Overall.Recall5, rep.Overall.Recall10, rep.Overall.All5)
			if rep.Overall.Recall5 <= floor {
				t.Errorf("recall@5 %.3f <= floor %.3f", rep.Overall.Recall5, floor)
			}
		})
	}
}
