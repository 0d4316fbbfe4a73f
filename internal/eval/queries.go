package eval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// QueryFile is an eval queries file (JSONL, the shared format) as eval and
// demo --queries use it: the queries that have gold tools, each knowing
// its line, so that a problem with one is reported as FILE:LINE.
type QueryFile struct {
	path string
	// Queries are the file's queries that have gold tools, in file order.
	Queries []selector.EvalQuery
	// skipped are the lines of queries without gold tools: there is
	// nothing to measure or replay for them, and they are reported, not
	// dropped silently.
	skipped []int
}

// LoadQueries reads a queries file. A file without a single query (empty,
// or blank lines only) is an error: run on it, eval would print a table of
// zeros and demo fall back to its bundled tasks, both exiting 0.
func LoadQueries(path string) (*QueryFile, error) {
	all, err := selector.LoadQueries(path)
	if err != nil {
		return nil, err
	}
	qf := &QueryFile{path: path}
	for _, q := range all {
		if strings.TrimSpace(q.Query) == "" {
			// Ranked, an empty query is a miss that says nothing; search
			// refuses one too.
			return nil, fmt.Errorf("queries %s:%d: query %s has no text", path, q.Line, q.ID)
		}
		if len(q.Gold) == 0 {
			qf.skipped = append(qf.skipped, q.Line)
			continue
		}
		qf.Queries = append(qf.Queries, q)
	}
	switch {
	case len(qf.Queries) == 0 && len(qf.skipped) == 0:
		return nil, fmt.Errorf("queries %s: the file holds no queries", path)
	case len(qf.Queries) == 0:
		return nil, fmt.Errorf("queries %s: none of its %d queries has gold tools (first at line %d), so there is nothing to measure",
			path, len(qf.skipped), qf.skipped[0])
	}
	return qf, nil
}

// at returns where query i is, as FILE:LINE.
func (qf *QueryFile) at(i int) string { return fmt.Sprintf("%s:%d", qf.path, qf.Queries[i].Line) }

// WithSubset returns the queries whose subset starts with prefix, as
// Episodes picks them.
func (qf *QueryFile) WithSubset(prefix string) *QueryFile {
	out := &QueryFile{path: qf.path, skipped: qf.skipped}
	for _, q := range qf.Queries {
		if strings.HasPrefix(q.Subset, prefix) {
			out.Queries = append(out.Queries, q)
		}
	}
	return out
}

// SkippedNote says how many queries were left out for having no gold
// tools, or "" when none were.
func (qf *QueryFile) SkippedNote() string {
	if len(qf.skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("skipped %d of %d queries with no gold tools (first at %s:%d): nothing to measure or replay for them",
		len(qf.skipped), len(qf.skipped)+len(qf.Queries), qf.path, qf.skipped[0])
}

// catalogOf returns the tools of catalog id in a catalog file's defs: the
// catalog of that id, or the file's only catalog when the query names none
// or the file is a plain tools array (which has no id to match). A query
// naming a catalog that a file of named catalogs lacks gets none: measured
// against the only one, a queries file for another catalog would score 0
// on every query and exit 0.
func catalogOf(defs map[string][]rewrite.Tool, id string) ([]rewrite.Tool, bool) {
	if tools, ok := defs[id]; ok {
		return tools, true
	}
	if len(defs) != 1 {
		return nil, false
	}
	for only, tools := range defs {
		if id == "" || only == "" {
			return tools, true
		}
	}
	return nil, false
}

// CatalogIDs lists a catalog file's ids for a message.
func CatalogIDs(defs map[string][]rewrite.Tool) string {
	ids := make([]string, 0, len(defs))
	for id := range defs {
		ids = append(ids, fmt.Sprintf("%q", id))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// CheckGold checks, before anything runs, that every query's catalog is in
// the catalog file at catalogPath (read into defs) and holds its gold
// tools. A gold tool the catalog lacks can never be ranked or called, so
// it only counts as a miss, which hides a queries file paired with the
// wrong catalog behind a recall of 0. With everyGold (demo, whose scripted
// model calls each gold tool by its own name), any gold tool missing is an
// error. Without it (eval), a gold tool counts as present when it or one
// of its gold_alts is in the catalog; a query with none of its gold tools
// present is an error, and one with some missing is returned as a warning
// (its recall is still a measurement, capped by what is there). Errors
// name the first query's FILE:LINE and count the others.
func (qf *QueryFile) CheckGold(defs map[string][]rewrite.Tool, catalogPath string, everyGold bool) (warning string, err error) {
	names := map[string]map[string]bool{} // catalog id -> its tool names
	var fatal, partial []string           // a message per query
	for i, q := range qf.Queries {
		tools, ok := catalogOf(defs, q.Catalog)
		if !ok {
			what := fmt.Sprintf("names catalog %q, which %s does not hold (it holds %s)", q.Catalog, catalogPath, CatalogIDs(defs))
			if q.Catalog == "" {
				what = fmt.Sprintf("names no catalog, and %s holds several (%s)", catalogPath, CatalogIDs(defs))
			}
			fatal = append(fatal, fmt.Sprintf("%s: query %s %s", qf.at(i), q.ID, what))
			continue
		}
		in := names[q.Catalog]
		if in == nil {
			in = make(map[string]bool, len(tools))
			for _, t := range tools {
				in[t.Name] = true
			}
			names[q.Catalog] = in
		}
		var missing []string
		for _, g := range q.Gold {
			found := in[g]
			for _, alt := range q.GoldAlts[g] {
				found = found || !everyGold && in[alt]
			}
			if !found {
				missing = append(missing, g)
			}
		}
		msg := fmt.Sprintf("%s: query %s: gold tools not in catalog %s: %s", qf.at(i), q.ID, catalogPath, strings.Join(missing, ", "))
		switch {
		case len(missing) == 0:
		case len(missing) == len(q.Gold):
			fatal = append(fatal, fmt.Sprintf("%s: query %s: none of its gold tools is in catalog %s (%s)",
				qf.at(i), q.ID, catalogPath, strings.Join(missing, ", ")))
		case everyGold:
			fatal = append(fatal, msg)
		default:
			partial = append(partial, msg)
		}
	}
	if len(fatal) > 0 {
		more := ""
		switch {
		case len(fatal) == len(qf.Queries) && len(fatal) > 1:
			more = fmt.Sprintf("; all %d queries fail this check: were they written for another catalog?", len(fatal))
		case len(fatal) > 1:
			more = fmt.Sprintf("; %d of the %d queries fail this check", len(fatal), len(qf.Queries))
		}
		return "", fmt.Errorf("%s%s", fatal[0], more)
	}
	if len(partial) > 0 {
		warning = fmt.Sprintf("%d of %d queries have gold tools that are not in the catalog, each counted as a miss; the first: %s",
			len(partial), len(qf.Queries), partial[0])
	}
	return warning, nil
}
