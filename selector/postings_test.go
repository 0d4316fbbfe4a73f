package selector

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// bleveScores is the reference lexScores must match: the clauses as a
// bleve disjunction of term queries, run by bleve's own searcher with the
// catalog's BM25 statistics, each matching tool's score.
func bleveScores(t *testing.T, c *Catalog, clauses []lexClause) map[int32]float64 {
	t.Helper()
	ds := make([]query.Query, len(clauses))
	for i, cl := range clauses {
		tq := query.NewTermQuery(cl.ft.term)
		tq.SetField(cl.ft.field)
		tq.SetBoost(cl.boost)
		ds[i] = tq
	}
	r, err := c.bleveIdx.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	ctx := bm25Context{Context: context.Background(), stats: c.stats}
	s, err := query.NewDisjunctionQuery(ds).Searcher(ctx, r, c.idx.Mapping(), search.SearcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	mctx := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(s.DocumentMatchPoolSize()+1, 0)}
	out := map[int32]float64{}
	for {
		dm, err := s.Next(mctx)
		if err != nil {
			t.Fatal(err)
		}
		if dm == nil {
			return out
		}
		out[c.docOf[dm.IndexInternalID.Value()]] = dm.Score
		mctx.DocumentMatchPool.Put(dm)
	}
}

// cachedScores runs lexScores and returns its scores, leaving the scratch
// as it found it.
func cachedScores(t *testing.T, c *Catalog, clauses []lexClause) map[int32]float64 {
	t.Helper()
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	if err := c.lexScores(context.Background(), clauses, sc); err != nil {
		t.Fatal(err)
	}
	out := map[int32]float64{}
	for _, d := range sc.hits {
		out[d] = sc.bm25[d]
		sc.bm25[d] = 0
	}
	sc.hits = sc.hits[:0]
	for d, n := range sc.coord {
		if n != 0 {
			t.Fatalf("coord[%d] = %d left behind", d, n)
		}
	}
	return out
}

func TestRememberedPostingsScoreAsBlevesDisjunction(t *testing.T) {
	c := compileTest(t, loadCatalogFile(t, "../testdata/catalog.json")[""], Config{})
	clausesOf := func(text string) []lexClause {
		q, _ := c.analyzeQuery(text, 1)
		return c.lexClauses(q, c.indexedTerms(q))
	}
	tests := []struct {
		name    string
		clauses []lexClause
		// exact: at most 10 clauses, which bleve sums in clause order as
		// lexScores does; past that its heap sums in another order, so
		// only the last bits may differ.
		exact bool
	}{
		{"a short request scores the same to the bit", clausesOf("open a pull request"), true},
		{"a verbatim tool name adds its whole-name clause", clausesOf("call github.create_issue now"), true},
		{"a clause no tool matches still counts in norm and coord", []lexClause{
			{fieldTerm{fAll, "issu"}, 1, nil}, {fieldTerm{fAll, "zzzznotaterm"}, 1, nil}, {fieldTerm{fWhole, "no.such.tool"}, wholeBoost, nil},
		}, true},
		{"weights below one scale the clauses as bleve's boosts do", []lexClause{
			{fieldTerm{fAll, "file"}, 0.35, nil}, {fieldTerm{fAll, "read"}, 1, nil}, {fieldTerm{fAll, "channel"}, 0.175, nil},
		}, true},
		{"a long request (bleve's heap) scores the same up to rounding", clausesOf(
			"Summarise the open issues in the repository, post the summary in the team channel, " +
				"then take a screenshot of the dashboard and email it to the design team with the release notes"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.exact && len(tt.clauses) > 10 {
				t.Fatalf("%d clauses: bleve uses its heap past 10", len(tt.clauses))
			}
			want := bleveScores(t, c, tt.clauses)
			if len(want) == 0 {
				t.Fatal("the reference matched nothing: the case tests nothing")
			}
			for _, name := range []string{"first (from bleve)", "second (remembered)"} {
				got := cachedScores(t, c, tt.clauses)
				if len(got) != len(want) {
					t.Fatalf("%s pass: %d tools matched, bleve %d", name, len(got), len(want))
				}
				for d, w := range want {
					g, ok := got[d]
					switch {
					case !ok:
						t.Errorf("%s pass: %s not matched", name, c.tools[d].Name)
					case tt.exact && g != w:
						t.Errorf("%s pass: %s scores %v, bleve %v", name, c.tools[d].Name, g, w)
					case math.Abs(g-w) > 1e-12*math.Abs(w):
						t.Errorf("%s pass: %s scores %v, bleve %v", name, c.tools[d].Name, g, w)
					}
				}
			}
		})
	}
}

func TestRememberedPostingsAreSafeForConcurrentSearches(t *testing.T) {
	c := compileTest(t, loadCatalogFile(t, "../testdata/catalog.json")[""], Config{})
	texts := []string{"open a pull request", "send a message to the channel", "read the file", "take a screenshot"}
	want := make([][]Result, len(texts))
	for i, text := range texts {
		res, err := c.Search(context.Background(), Query{Text: text, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Items
	}
	c.postingsCache.Purge()
	for _, ts := range c.fields.terms {
		ts.bleve.Store(nil)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				k := (g + i) % len(texts)
				res, err := c.Search(context.Background(), Query{Text: texts[k], Limit: 10})
				if err != nil {
					t.Error(err)
					return
				}
				for j, it := range res.Items {
					if it.Name != want[k][j].Name || it.Score != want[k][j].Score {
						t.Errorf("%q #%d: %s %v, want %s %v", texts[k], j, it.Name, it.Score, want[k][j].Name, want[k][j].Score)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestPostingsMemoCountsEachTermOnceUnderConcurrentSearches: two searches
// that miss one term at once both read its postings; one copy is kept,
// and counted once.
func TestPostingsMemoCountsEachTermOnceUnderConcurrentSearches(t *testing.T) {
	for _, workers := range []int{1, 8} {
		t.Run(fmt.Sprint(workers, " searching at once count what the memo holds"), func(t *testing.T) {
			c := compileTest(t, syntheticTools(50), Config{})
			held := func() int64 {
				var n int64
				for _, k := range c.postingsCache.Keys() {
					p, _ := c.postingsCache.Peek(k)
					n += cachedPostingsBytes(k, p)
				}
				for _, ts := range c.fields.terms {
					if p := ts.bleve.Load(); p != nil {
						n += p.heapBytes()
					}
				}
				return n
			}
			base := c.memoBytes.Load() - held()
			for round := range 10 {
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for i := range 30 {
							// words no tool has: their postings go to the memo
							q := fmt.Sprintf("zqx%d_%d frobnicate%d", round, i, i%7)
							if _, err := c.Search(context.Background(), Query{Text: q}); err != nil {
								t.Error(err)
							}
						}
					})
				}
				wg.Wait()
			}
			if counted := c.memoBytes.Load() - base; counted != held() {
				t.Errorf("the postings memo counts %d bytes, its entries hold %d", counted, held())
			}
		})
	}
}
