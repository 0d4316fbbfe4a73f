package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/toolgate/toolgate/selector"
)

// runSearch ranks a catalog's tools for one query and prints each result
// with its per-signal scores: the debugging view of the selector.
func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalog := fs.String("catalog", "", "catalog file: {id: [tools]} or a tools array")
	config := fs.String("config", "", "tools.yaml whose enrichment and weights apply (default: none)")
	id := fs.String("id", "", "catalog id when the file holds several")
	limit := fs.Int("limit", 10, "how many tools to print")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *catalog == "" || fs.NArg() == 0 {
		return fmt.Errorf("%w: usage: gateway search --catalog FILE [--limit K] \"query\"", errUsage)
	}
	cats, err := loadCatalogs(ctx, *catalog, *config)
	if err != nil {
		return err
	}
	cat, err := pickCatalog(cats, *id)
	if err != nil {
		return err
	}
	res, err := cat.Search(ctx, selector.Query{Text: strings.Join(fs.Args(), " "), Limit: *limit, Explain: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "confidence %.2f  (%d tools)\n", res.Confidence, cat.Len())
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tscore\ttool\tsignals\tdescription")
	for i, it := range res.Items {
		fmt.Fprintf(tw, "%d\t%.3f\t%s\t%s\t%.70s\n", i+1, it.Score, it.Name, formatSignals(it.Signals), it.Description)
	}
	return tw.Flush()
}

func pickCatalog(cats map[string]*selector.Catalog, id string) (*selector.Catalog, error) {
	if c, ok := cats[id]; ok {
		return c, nil
	}
	if id == "" && len(cats) == 1 {
		for _, c := range cats {
			return c, nil
		}
	}
	ids := make([]string, 0, len(cats))
	for k := range cats {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	return nil, fmt.Errorf("%w: pick a catalog with --id (one of %s)", errUsage, strings.Join(ids, ", "))
}

func formatSignals(sig map[string]float64) string {
	keys := make([]string, 0, len(sig))
	for k := range sig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.2f", k, sig[k])
	}
	return strings.Join(parts, " ")
}
