package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// bundledCatalog is the repository's sample catalog, the demo's default.
var bundledCatalog = filepath.Join("..", "..", "testdata", "catalog.json")

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

func TestDemoRefusesStepsWhoseToolsTheCatalogLacks(t *testing.T) {
	tasks := writeFile(t, "tasks.json", `[{"name":"t1","prompt":"read it","steps":[{"tool":"fs_read_file","query":"read","args":{}},
		{"tool":"nosuch_tool","query":"x","args":{}}],"answer":"Done."}]`)
	unrelated := writeFile(t, "unrelated.json", `[{"type":"function","function":{"name":"FinanceTool","description":"Stocks."}},
		{"type":"function","function":{"name":"CourseTool","description":"Courses."}}]`)
	queries := writeFile(t, "q.jsonl", `{"id":"q1","query":"Take a screenshot of the web page.","gold":["browser_screenshot"],"subset":"ok"}
{"id":"q2","query":"Screenshot the page and water the plants.","gold":["browser_screenshot","no_such_tool"],"subset":"bad"}
`)
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr; none means the demo runs
	}{
		{"a task's step naming a tool the bundled catalog lacks is an error", []string{"--tasks", tasks},
			[]string{tasks, "over catalog (bundled)", "nosuch_tool (task t1, step 2)"}},
		{"the bundled tasks over a catalog of unrelated tools are an error", []string{"--catalog", unrelated},
			[]string{unrelated, "fs_read_file (task bug_notes_to_issue, step 1)"}},
		{"a query with a gold tool the catalog lacks is an error at its line", []string{"--queries", queries, "--catalog", bundledCatalog},
			[]string{queries + ":2: query q2: gold tools not in catalog " + bundledCatalog + ": no_such_tool"}},
		{"a query left out by --subset is not checked", []string{"--queries", queries, "--catalog", bundledCatalog, "--subset", "ok"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runGateway(t, context.Background(), append([]string{"demo"}, tc.args...)...)
			if tc.want == nil {
				if code != 0 || !strings.Contains(out, "1/1") {
					t.Errorf("exit %d, stderr %q; want the demo run:\n%s", code, errOut, out)
				}
				return
			}
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing run", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q; want %q in it", errOut, w)
				}
			}
		})
	}
}

func TestDemoReportsAnInterruption(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as Ctrl-C would, before the first request
	t.Run("an interrupted demo exits 130 and says it was interrupted", func(t *testing.T) {
		out, errOut, code := runGateway(t, ctx, "demo")
		if code != 130 || !strings.Contains(errOut, "interrupted") || out != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 130 and an interruption reported", code, out, errOut)
		}
	})
}
