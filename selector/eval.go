package selector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// EvalQuery is one line of the shared query format.
type EvalQuery struct {
	ID       string              `json:"id"`
	Catalog  string              `json:"catalog"`
	Query    string              `json:"query"`
	Gold     []string            `json:"gold"`
	GoldAlts map[string][]string `json:"gold_alts"`
	Subset   string              `json:"subset"`
	// Line is the query's line in the file LoadQueries read, for messages.
	Line int `json:"-"`
}

// EvalMetrics are recall numbers averaged over queries.
type EvalMetrics struct {
	N        int
	Recall1  float64
	Recall5  float64
	Recall10 float64
	All5     float64 // share of queries with every gold tool in the top 5
}

// EvalReport is the result of Evaluate: overall and per subset, and the
// queries that missed.
type EvalReport struct {
	Overall  EvalMetrics
	BySubset map[string]EvalMetrics
	Misses   []EvalMiss // in query order
}

// EvalMiss is a query with a gold tool outside the first 10 ranked: what
// someone tuning a catalog's keywords and examples needs to read.
type EvalMiss struct {
	Query   EvalQuery
	Missing []string // gold tools found neither as themselves nor as an alternative
	Top     []string // the ranking's first 10
}

// LoadQueries reads a JSONL file of EvalQuery lines, skipping blank ones.
func LoadQueries(path string) ([]EvalQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading queries: %w", err)
	}
	defer f.Close()
	var out []EvalQuery
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var q EvalQuery
		if err := json.Unmarshal(text, &q); err != nil {
			return nil, fmt.Errorf("reading queries %s:%d: %w", path, line, err)
		}
		q.Line = line
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading queries %s: %w", path, err)
	}
	return out, nil
}

// Ranker returns the top tool names for a query (at least 10 when the
// catalog has them); Evaluate measures it.
type Ranker func(ctx context.Context, q EvalQuery) ([]string, error)

// SearchRanker ranks with Catalog.Search at limit k, picking the catalog by
// the query's catalog id (or the only catalog).
func SearchRanker(cats map[string]*Catalog, k int) Ranker {
	return func(ctx context.Context, q EvalQuery) ([]string, error) {
		c := cats[q.Catalog]
		if c == nil && len(cats) == 1 {
			for _, only := range cats {
				c = only
			}
		}
		if c == nil {
			return nil, fmt.Errorf("query %s: unknown catalog %q", q.ID, q.Catalog)
		}
		res, err := c.Search(ctx, Query{Text: q.Query, Limit: k})
		if err != nil {
			return nil, err
		}
		names := make([]string, len(res.Items))
		for i, it := range res.Items {
			names[i] = it.Name
		}
		return names, nil
	}
}

// Evaluate computes recall@1/5/10 and all@5 of rank over qs, overall and per
// subset. A gold tool counts as found when it or one of its gold_alts is in
// the cut.
func Evaluate(ctx context.Context, qs []EvalQuery, rank Ranker) (EvalReport, error) {
	type acc struct {
		n               int
		r1, r5, r10, a5 float64
	}
	total := &acc{}
	subs := map[string]*acc{}
	var rep EvalReport
	for _, q := range qs {
		if len(q.Gold) == 0 {
			continue
		}
		top, err := rank(ctx, q)
		if err != nil {
			return EvalReport{}, fmt.Errorf("evaluating: %w", err)
		}
		// Each cut's share of gold found, once per query; both the overall
		// and the subset accumulators add the same numbers.
		share := func(missing []string) float64 {
			return float64(len(q.Gold)-len(missing)) / float64(len(q.Gold))
		}
		miss5, miss10 := goldMissing(q, top, 5), goldMissing(q, top, 10)
		r1, r5, r10 := share(goldMissing(q, top, 1)), share(miss5), share(miss10)
		if len(miss10) > 0 {
			rep.Misses = append(rep.Misses, EvalMiss{Query: q, Missing: miss10, Top: top[:min(len(top), 10)]})
		}
		sub := subs[q.Subset]
		if sub == nil {
			sub = &acc{}
			subs[q.Subset] = sub
		}
		for _, a := range []*acc{total, sub} {
			a.n++
			a.r1 += r1
			a.r5 += r5
			a.r10 += r10
			if len(miss5) == 0 {
				a.a5++
			}
		}
	}
	m := func(a *acc) EvalMetrics {
		n := float64(max(a.n, 1))
		return EvalMetrics{N: a.n, Recall1: a.r1 / n, Recall5: a.r5 / n, Recall10: a.r10 / n, All5: a.a5 / n}
	}
	rep.Overall, rep.BySubset = m(total), map[string]EvalMetrics{}
	for k, a := range subs {
		rep.BySubset[k] = m(a)
	}
	return rep, nil
}

// Subsets returns the report's subset names in order.
func (r EvalReport) Subsets() []string {
	out := make([]string, 0, len(r.BySubset))
	for k := range r.BySubset {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// goldMissing returns q's gold tools that neither they nor one of their
// gold_alts made top's first k.
func goldMissing(q EvalQuery, top []string, k int) []string {
	in := make(map[string]bool, k)
	for i, n := range top {
		if i >= k {
			break
		}
		in[n] = true
	}
	var missing []string
	for _, g := range q.Gold {
		found := in[g]
		for _, a := range q.GoldAlts[g] {
			found = found || in[a]
		}
		if !found {
			missing = append(missing, g)
		}
	}
	return missing
}
