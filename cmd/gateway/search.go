package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
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
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gateway search --catalog FILE [flags] QUERY...\n\n"+
			"QUERY is the rest of the arguments, joined by spaces; flags may come before or after it\n"+
			"(after --, everything is query, even words that start with -).\n\nflags:\n")
		fs.PrintDefaults()
	}
	words, err := parseInterspersed(fs, args)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	query := strings.TrimSpace(strings.Join(words, " "))
	switch {
	case *catalog == "":
		return fmt.Errorf("%w: search needs --catalog FILE (gateway search --catalog FILE [flags] QUERY...)", errUsage)
	case query == "":
		return fmt.Errorf("%w: search needs a query that is not blank (gateway search --catalog FILE [flags] QUERY...)", errUsage)
	case *limit <= 0:
		return fmt.Errorf("%w: --limit %d: want how many tools to print, at least 1", errUsage, *limit)
	}
	cats, err := loadCatalogs(ctx, *catalog, *config)
	if err != nil {
		return err
	}
	cat, err := pickCatalog(cats, *id, *catalog)
	if err != nil {
		return err
	}
	res, err := cat.Search(ctx, selector.Query{Text: query, Limit: *limit, Explain: true})
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

// parseInterspersed parses fs over args and returns the positional
// arguments, letting flags come after them as well as before: flag.Parse
// stops at the first positional argument, which read "search --catalog F
// read file --limit 2" as a search for "read file --limit 2". A "--" ends
// the flags; everything after it is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// pickCatalog returns the catalog of id from the catalog file at path: the
// only one when id is "" and there is one.
func pickCatalog(cats map[string]*selector.Catalog, id, path string) (*selector.Catalog, error) {
	if c, ok := cats[id]; ok {
		return c, nil
	}
	if id == "" && len(cats) == 1 {
		for _, c := range cats {
			return c, nil
		}
	}
	if _, plain := cats[""]; plain && len(cats) == 1 {
		return nil, fmt.Errorf("%w: --id %q: %s is a plain tools array, which has no catalog ids; leave --id out", errUsage, id, path)
	}
	ids := make([]string, 0, len(cats))
	for k := range cats {
		ids = append(ids, strconv.Quote(k))
	}
	sort.Strings(ids)
	if id == "" {
		return nil, fmt.Errorf("%w: %s holds several catalogs; pick one with --id (one of %s)", errUsage, path, strings.Join(ids, ", "))
	}
	return nil, fmt.Errorf("%w: --id %q: %s has no such catalog (it holds %s)", errUsage, id, path, strings.Join(ids, ", "))
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
