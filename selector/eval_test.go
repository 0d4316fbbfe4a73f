package selector

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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

func TestEvaluateCountsAlternativesAndListsMisses(t *testing.T) {
	ranked := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
	rank := func(context.Context, EvalQuery) ([]string, error) { return ranked, nil }
	tests := []struct {
		name        string
		q           EvalQuery
		wantR10     float64
		wantMissing []string
	}{
		{"a gold tool in the top 10 is found", EvalQuery{ID: "1", Gold: []string{"c"}}, 1, nil},
		{"a gold tool found through its alternative counts", EvalQuery{ID: "2", Gold: []string{"x"}, GoldAlts: map[string][]string{"x": {"y", "d"}}}, 1, nil},
		{"a gold tool at rank 11 is missed", EvalQuery{ID: "3", Gold: []string{"k"}}, 0, []string{"k"}},
		{"only the missing half of two gold tools is listed", EvalQuery{ID: "4", Gold: []string{"a", "z"}}, 0.5, []string{"z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Evaluate(context.Background(), []EvalQuery{tt.q}, rank)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Overall.Recall10 != tt.wantR10 {
				t.Errorf("R@10 = %v, want %v", rep.Overall.Recall10, tt.wantR10)
			}
			if tt.wantMissing == nil {
				if len(rep.Misses) != 0 {
					t.Errorf("misses = %+v, want none", rep.Misses)
				}
				return
			}
			if len(rep.Misses) != 1 || !slices.Equal(rep.Misses[0].Missing, tt.wantMissing) || len(rep.Misses[0].Top) != 10 {
				t.Errorf("misses = %+v, want %v missing with the top 10", rep.Misses, tt.wantMissing)
			}
		})
	}
}
