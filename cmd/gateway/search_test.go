package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// resultRow matches a result row of gateway search's table: rank, score,
// tool.
var resultRow = regexp.MustCompile(`(?m)^(\d+)\s+[\d.]+\s+(\S+)`)

func TestSearchReadsItsArguments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		rows  int    // result rows printed; 0 means a usage error
		first string // the first tool ranked, when rows > 0
	}{
		{"flags before the query are honoured", []string{"--limit", "2", "take a screenshot"}, 2, "browser_screenshot"},
		{"flags after the query are honoured, not read as query words", []string{"take a screenshot", "--limit", "2"}, 2, "browser_screenshot"},
		{"flags between query words are honoured", []string{"take", "--limit=3", "a", "screenshot"}, 3, "browser_screenshot"},
		{"after -- every word is query, even one that starts with -", []string{"--limit", "1", "--", "take", "-a", "screenshot"}, 1, "browser_screenshot"},
		{"a limit of 0 is a usage error", []string{"--limit", "0", "take a screenshot"}, 0, ""},
		{"a negative limit is a usage error", []string{"take a screenshot", "--limit", "-1"}, 0, ""},
		{"an empty query is a usage error", []string{""}, 0, ""},
		{"a blank query is a usage error", []string{"  ", "\t"}, 0, ""},
		{"no query is a usage error", []string{"--limit", "2"}, 0, ""},
		{"an unknown flag after the query is a usage error", []string{"take a screenshot", "--limt", "2"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"search", "--catalog", bundledCatalog}, tc.args...)
			out, errOut, code := runGateway(t, context.Background(), args...)
			if tc.rows == 0 {
				if code != 2 || out != "" {
					t.Errorf("exit %d, stdout %q; want a usage error (2) and no table", code, out)
				}
				return
			}
			rows := resultRow.FindAllStringSubmatch(out, -1)
			if code != 0 || len(rows) != tc.rows || rows[0][2] != tc.first {
				t.Errorf("exit %d (%s), %d rows; want 0 and %d rows led by %s:\n%s", code, errOut, len(rows), tc.rows, tc.first, out)
			}
		})
	}
	t.Run("the help names the query argument", func(t *testing.T) {
		_, errOut, code := runGateway(t, context.Background(), "search", "-h")
		if code != 0 || !strings.Contains(errOut, "QUERY") {
			t.Errorf("exit %d, help %q; want 0 and QUERY in it", code, errOut)
		}
	})
}
