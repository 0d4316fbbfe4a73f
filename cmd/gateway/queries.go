package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolgate/toolgate/selector"
)

// queryFile is an eval queries file (JSONL, the shared format) as eval and
// demo --queries use it: the queries that have gold tools, each with the
// line it came from, so that a problem with one is reported as FILE:LINE.
type queryFile struct {
	path    string
	queries []selector.EvalQuery
	lines   []int // lines[i] is the line of queries[i]
	// skipped are the lines of queries without gold tools: there is
	// nothing to measure or replay for them, and they are reported, not
	// dropped silently.
	skipped []int
}

// loadQueries reads a queries file. A file without a single query (empty,
// or blank lines only) is an error: run on it, eval printed a table of
// zeros and demo fell back to its bundled tasks, both exiting 0.
func loadQueries(path string) (*queryFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading queries: %w", err)
	}
	qf := &queryFile{path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var q selector.EvalQuery
		if err := json.Unmarshal(text, &q); err != nil {
			return nil, fmt.Errorf("reading queries %s:%d: %w", path, line, err)
		}
		if len(q.Gold) == 0 {
			qf.skipped = append(qf.skipped, line)
			continue
		}
		qf.queries = append(qf.queries, q)
		qf.lines = append(qf.lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading queries %s: %w", path, err)
	}
	switch {
	case len(qf.queries) == 0 && len(qf.skipped) == 0:
		return nil, fmt.Errorf("queries %s: the file holds no queries", path)
	case len(qf.queries) == 0:
		return nil, fmt.Errorf("queries %s: none of its %d queries has gold tools (first at line %d), so there is nothing to measure",
			path, len(qf.skipped), qf.skipped[0])
	}
	return qf, nil
}

// at returns where query i is, as FILE:LINE.
func (qf *queryFile) at(i int) string { return fmt.Sprintf("%s:%d", qf.path, qf.lines[i]) }

// skippedNote says how many queries were left out for having no gold
// tools, or "" when none were.
func (qf *queryFile) skippedNote() string {
	if len(qf.skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("skipped %d of %d queries with no gold tools (first at %s:%d): nothing to measure or replay for them",
		len(qf.skipped), len(qf.skipped)+len(qf.queries), qf.path, qf.skipped[0])
}
