package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// bundledCatalog is the repository's sample catalog, the demo's default.
var bundledCatalog = filepath.Join("..", "..", "testdata", "catalog.json")

func TestDemoRefusesAQueriesFileWithoutQueries(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // in the error
	}{
		{"an empty file is an error, not the bundled demo", "", "holds no queries"},
		{"a file of blank lines is an error, not the bundled demo", "\n   \n\t\n", "holds no queries"},
		{"a file whose queries have no gold tools is an error", `{"id":"q1","query":"hello","gold":[]}` + "\n", "none of its 1 queries has gold tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queries := writeFile(t, "q.jsonl", tc.text)
			out, errOut, code := runGateway(t, context.Background(), "demo", "--queries", queries, "--catalog", bundledCatalog)
			if code != 1 || !strings.Contains(errOut, queries) || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and an error naming %s: %s", code, errOut, queries, tc.want)
			}
			if out != "" {
				t.Errorf("printed a demo anyway:\n%s", out)
			}
		})
	}
}

func TestDemoSaysHowManyQueriesItSkipped(t *testing.T) {
	queries := writeFile(t, "q.jsonl", `{"id":"q1","query":"Take a screenshot of the web page.","gold":["browser_screenshot"]}
{"id":"q2","query":"nothing to do","gold":[]}
`)
	out, errOut, code := runGateway(t, context.Background(), "demo", "--queries", queries, "--catalog", bundledCatalog)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "skipped 1 of 2 queries with no gold tools (first at " + queries + ":2)"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q; want %q", errOut, want)
	}
	if !strings.Contains(out, "1 scripted agent tasks") {
		t.Errorf("want the one query with gold tools replayed:\n%s", out)
	}
}
