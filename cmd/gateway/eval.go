package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolgate/toolgate/internal/eval"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// runEval measures a catalog's recall against a query set in the shared
// format (gold, optional gold_alts, subset) and prints overall and
// per-subset numbers.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalog := fs.String("catalog", "", "catalog file: {id: [tools]} or a tools array")
	queries := fs.String("queries", "", "queries file (JSONL: id, catalog, query, gold, gold_alts, subset)")
	config := fs.String("config", "", "tools.yaml whose enrichment and weights apply (default: none)")
	misses := fs.Int("misses", 0, "after the table, list up to N queries with a gold tool outside the first 10: "+
		"the gold tools missed and the 10 ranked instead (what to read before adding keywords or examples in tools.yaml)")
	through := fs.Bool("http", false, "measure through an in-process gateway: a scripted model searches once with each query; "+
		"the ranking is the tools it was offered (preselected, then found)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *catalog == "" || *queries == "" {
		return fmt.Errorf("%w: eval needs --catalog and --queries", errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: eval takes no arguments, only flags; got %q", errUsage, fs.Args())
	}
	qf, err := eval.LoadQueries(*queries)
	if err != nil {
		return err
	}
	if note := qf.SkippedNote(); note != "" {
		fmt.Fprintln(stderr, "eval:", note)
	}
	defs, err := readCatalog(*catalog)
	if err != nil {
		return err
	}
	warning, err := qf.CheckGold(defs, *catalog, false)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if warning != "" {
		fmt.Fprintln(stderr, "eval: warning:", warning)
	}
	snap, err := policy.Load(*config)
	if err != nil {
		return err
	}
	var rank selector.Ranker
	var hr *eval.HTTPRanker
	if *through {
		var stop func()
		hr, stop = eval.NewHTTPRanker(snap, defs)
		defer stop()
		rank = hr.Rank
	} else {
		cats, err := compileCatalogs(ctx, snap, defs)
		if err != nil {
			return err
		}
		// The first 10 are all that recall@10 and the misses list read,
		// so there is no --limit flag: it could only raise this, which
		// changes nothing.
		rank = selector.SearchRanker(cats, 10)
	}
	rep, err := selector.Evaluate(ctx, qf.Queries, rank)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "subset\tn\tR@1\tR@5\tR@10\tall@5")
	row := func(name string, m selector.EvalMetrics) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\n", name, m.N, m.Recall1, m.Recall5, m.Recall10, m.All5)
	}
	row("ALL", rep.Overall)
	if len(rep.BySubset) > 1 {
		for _, s := range rep.Subsets() {
			row("  "+s, rep.BySubset[s])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *misses > 0 {
		printMisses(stdout, rep.Misses, *misses)
	}
	if hr != nil {
		if n, mean, most := hr.Offered(); n > 0 {
			fmt.Fprintf(stdout, "\nthrough the gateway: R@k = in the first k tools offered (preselected first, then what one\n"+
				"search with the query's text added); tools offered per query: mean %.1f, max %d\n", mean, most)
		}
	}
	return nil
}

// printMisses lists up to n of misses: each query with its subset, the
// gold tools it missed and the tools ranked first instead.
func printMisses(w io.Writer, misses []selector.EvalMiss, n int) {
	fmt.Fprintf(w, "\nmisses: %d queries with a gold tool outside the first 10", len(misses))
	if len(misses) > n {
		fmt.Fprintf(w, " (the first %d)", n)
	}
	fmt.Fprintln(w)
	for _, m := range misses[:min(n, len(misses))] {
		q := m.Query
		label := q.ID
		if q.Subset != "" {
			label += " [" + q.Subset + "]"
		}
		fmt.Fprintf(w, "\n%s %q\n  missed: %s\n  ranked: %s\n", label, q.Query,
			strings.Join(m.Missing, ", "), strings.Join(m.Top, ", "))
	}
}

// loadCatalogs reads and compiles every catalog of a catalog file, with the
// enrichment and weights of the policy at config ("" means built-in
// defaults), exactly as the gateway would compile them.
func loadCatalogs(ctx context.Context, path, config string) (map[string]*selector.Catalog, error) {
	snap, err := policy.Load(config)
	if err != nil {
		return nil, err
	}
	defs, err := readCatalog(path)
	if err != nil {
		return nil, err
	}
	return compileCatalogs(ctx, snap, defs)
}

// compileCatalogs compiles every catalog of a catalog file's defs with
// snap's enrichment and weights.
func compileCatalogs(ctx context.Context, snap *policy.Snapshot, defs map[string][]rewrite.Tool) (map[string]*selector.Catalog, error) {
	cats := make(map[string]*selector.Catalog, len(defs))
	for id, rts := range defs {
		tools, cfg := snap.Catalog(rts)
		c, err := selector.Compile(ctx, tools, cfg)
		if err != nil && id != "" {
			return nil, fmt.Errorf("catalog %q: %w", id, err)
		}
		if err != nil {
			return nil, err // a plain tools array's, whose id "" says nothing
		}
		cats[id] = c
	}
	return cats, nil
}
