package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// writeEpisodeQueries writes two eval queries over the bundled catalog's
// tools (three steps in all) to a file in dir and returns its path.
func writeEpisodeQueries(t *testing.T, dir string) string {
	t.Helper()
	queries := filepath.Join(dir, "q.jsonl")
	lines := `{"id":"q1","query":"Create an issue about the crash, then post a message in the chat channel.","gold":["repo_create_issue","chat_post_message"],"subset":"multi"}
{"id":"q2","query":"Take a screenshot of the web page.","gold":["browser_screenshot"],"subset":"single"}
`
	if err := os.WriteFile(queries, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return queries
}

func TestDemoReplaysEvalQueriesAsEpisodes(t *testing.T) {
	dir := t.TempDir()
	queries := writeEpisodeQueries(t, dir)
	var out, errOut bytes.Buffer
	decisions := filepath.Join(dir, "decisions.jsonl")
	args := []string{"demo", "--queries", queries, "--catalog", filepath.Join("..", "..", "testdata", "catalog.json"), "--decision-log", decisions}
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	steps := regexp.MustCompile(`tool steps completed\s+3/3\s+(\d)/3`).FindStringSubmatch(out.String())
	if steps == nil || !strings.Contains(out.String(), "2 scripted agent tasks (3 tool steps)") {
		t.Fatalf("want 2 tasks of 3 steps replayed both ways:\n%s", out.String())
	}
	if steps[1] != "3" {
		t.Errorf("through the gateway %s of 3 steps completed with the tools' names as step queries:\n%s", steps[1], out.String())
	}
	t.Run("the decision log has a record of every request through the gateway", func(t *testing.T) {
		b, err := os.ReadFile(decisions)
		if err != nil {
			t.Fatal(err)
		}
		agent := regexp.MustCompile(`agent requests\s+(\d+)\s+(\d+)`).FindStringSubmatch(out.String())
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if agent == nil || fmt.Sprint(len(lines)) != agent[2] {
			t.Fatalf("%d decision records, want one per agent request through the gateway (%v):\n%s", len(lines), agent, out.String())
		}
		var rec struct {
			Msg    string `json:"msg"`
			Active []struct {
				Name, Reason string
			} `json:"active"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec.Msg != "decision" || len(rec.Active) == 0 || rec.Active[0].Reason == "" {
			t.Errorf("first record %s: want a decision naming its active tools and why (err %v)", lines[0], err)
		}
	})
}

func TestDemoSweepsAgentSizesOneRowEach(t *testing.T) {
	queries := writeEpisodeQueries(t, t.TempDir())
	catalog := filepath.Join("..", "..", "testdata", "catalog.json")
	sweep := func(t *testing.T, sizes string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{"demo", "--queries", queries, "--catalog", catalog, "--agent-tools", sizes}
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		return out.String()
	}
	out := sweep(t, "40, 90,150")
	row := regexp.MustCompile(`(?m)^\s+(\d+)\s+[\d.]+\s+(\d)/3\s+([\d.]+)x\s+([-+][\d.]+)%\s+([-+][\d.]+)%\s*$`)
	rows := row.FindAllStringSubmatch(out, -1)
	t.Run("each size gets its own row, in the order given", func(t *testing.T) {
		var got []string
		for _, r := range rows {
			got = append(got, r[1])
		}
		if !slices.Equal(got, []string{"40", "90", "150"}) {
			t.Fatalf("rows for %v, want 40, 90, 150:\n%s", got, out)
		}
	})
	t.Run("every row completes every step", func(t *testing.T) {
		for _, r := range rows {
			if r[2] != "3" {
				t.Errorf("agent of %s tools: %s/3 steps:\n%s", r[1], r[2], out)
			}
		}
	})
	t.Run("a row is the run of that size alone", func(t *testing.T) {
		alone := sweep(t, "90")
		calls := regexp.MustCompile(`upstream calls\s+\d+\s+\d+\s+([\d.]+)x`).FindStringSubmatch(alone)
		tokens := regexp.MustCompile(`input tokens, all calls\s+[\d,]+\s+[\d,]+\s+([-+][\d.]+)%`).FindStringSubmatch(alone)
		if calls == nil || tokens == nil || len(rows) < 2 {
			t.Fatalf("no calls or tokens in the single run:\n%s", alone)
		}
		if rows[1][3] != calls[1] || rows[1][4] != tokens[1] {
			t.Errorf("the sweep's 90-tool row says %sx and %s%%, the run alone %sx and %s%%", rows[1][3], rows[1][4], calls[1], tokens[1])
		}
	})
}

func TestDemoRefusesAnAgentItsTasksCannotRunOn(t *testing.T) {
	queries := writeEpisodeQueries(t, t.TempDir())
	catalog := filepath.Join("..", "..", "testdata", "catalog.json")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"an agent smaller than the tools the tasks call is a usage error saying how many they call",
			[]string{"--agent-tools", "2"}, "--agent-tools 2: the tasks call 3 tools of the catalog; want at least that many"},
		{"a step query the scripted model cannot make is a usage error",
			[]string{"--step-query", "guess"}, `--step-query is "guess"; want prompt or name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"demo", "--queries", queries, "--catalog", catalog}, tc.args...)
			err := run(context.Background(), args, &out, &errOut)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a usage error with %q", err, tc.want)
			}
		})
	}
}

func TestDemoRefusesFlagsItWouldIgnore(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"an agent size without --queries is a usage error", []string{"demo", "--agent-tools", "120"}},
		{"a negative agent size is a usage error", []string{"demo", "--agent-tools", "-1", "--queries", "q.jsonl", "--catalog", "c.json"}},
		{"a list with a size that is not a number is a usage error", []string{"demo", "--agent-tools", "120,many", "--queries", "q.jsonl", "--catalog", "c.json"}},
		{"a list with an empty size is a usage error", []string{"demo", "--agent-tools", "120,,150", "--queries", "q.jsonl", "--catalog", "c.json"}},
		{"a subset without --queries is a usage error", []string{"demo", "--subset", "live"}},
		{"a step query without --queries is a usage error", []string{"demo", "--step-query", "prompt"}},
		{"the bundled step query given without --queries is a usage error too", []string{"demo", "--step-query=name"}},
		{"an argument after the flags is a usage error, not ignored", []string{"demo", "--stream", "tasks.json"}},
		{"an argument before the flags is a usage error, not ignored", []string{"demo", "extra", "--stream"}},
		{"an API the demo cannot speak is a usage error", []string{"demo", "--api", "completions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), tc.args, &out, &errOut); !errors.Is(err, errUsage) {
				t.Errorf("err = %v, want a usage error", err)
			}
		})
	}
}

func TestDemoCacheRateMustBeAShareOfThePrice(t *testing.T) {
	// One bundled task is enough to print the table; all twelve took
	// seconds under -race and show the row no better.
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all []json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil || len(all) == 0 {
		t.Fatalf("the bundled tasks: %d, %v", len(all), err)
	}
	tasks := filepath.Join(t.TempDir(), "tasks.json")
	if err := os.WriteFile(tasks, []byte("["+string(all[0])+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rate string
		ok   bool
	}{
		{"the gpt-5 family's rate prints the billed row at 10%", "0.1", true},
		{"zero is a usage error, not a free cache", "0", false},
		{"more than the input price is a usage error", "1.5", false},
		{"NaN is a usage error, not a crash", "NaN", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"demo", "--tasks", tasks, "--cache-rate", tc.rate}, &out, &errOut)
			if tc.ok {
				if err != nil {
					t.Fatalf("%v\n%s", err, errOut.String())
				}
				if !strings.Contains(out.String(), "input billed, hits at 10%") {
					t.Errorf("no billed row at 10%%:\n%s", out.String())
				}
				return
			}
			if !errors.Is(err, errUsage) {
				t.Errorf("err = %v, want a usage error", err)
			}
		})
	}
}
