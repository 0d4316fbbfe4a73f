package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestInputErrorsNameTheFile(t *testing.T) {
	bundled, err := os.ReadFile(bundledCatalog)
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string) string {
		return `{"type":"function","function":{"name":"` + name + `","description":"d"}}`
	}
	queries := writeFile(t, "q.jsonl", `{"id":"q1","query":"send an email","gold":["mail_send"]}`+"\n")
	for _, tc := range []struct {
		name   string
		cmd    []string // the command and its flags; the file is appended as the value of the last flag
		file   string   // the file's content
		code   int
		want   string // in stderr, after the file's path
		banned string // not in stderr
	}{
		{"demo's empty catalog is named", []string{"demo", "--catalog"}, "", 1, ": the file is empty", ""},
		{"demo's catalog with broken JSON is named with its line and column", []string{"demo", "--catalog"}, "[\n  {\"type\": \"function\",,}\n]", 1, ":2:", ""},
		{"demo's catalog with a duplicate name is refused before any task runs", []string{"demo", "--catalog"}, "[" + tool("a") + "," + tool("a") + "]", 1,
			`: tools[1] "a": duplicate tool name`, "status 400"},
		{"demo's catalog file of several catalogs says it needs one", []string{"demo", "--catalog"}, `{"x":[` + tool("a") + `],"y":[` + tool("b") + `]}`, 1,
			` holds 2 catalogs ("x", "y"); the demo replays over one`, "cannot unmarshal"},
		{"demo's tasks file that is empty is named", []string{"demo", "--tasks"}, " \n", 1, ": the file is empty", ""},
		{"demo's tasks file that is not an array is named", []string{"demo", "--tasks"}, `{"name":"t"}`, 1, ": want a JSON array of tasks", "cannot unmarshal"},
		{"demo's tasks file with a wrong type is named with its line and column", []string{"demo", "--tasks"}, "[\n  {\"name\": \"t\", \"prompt\": 3}\n]", 1, ":2:", ""},
		{"demo's tasks file holding a tools array is refused for its prompts", []string{"demo", "--tasks"}, "[" + tool("a") + "]", 1, `: task 1 ("") has no prompt`, ""},
		{"search's empty tools array is named", []string{"search", "--limit", "1", "--catalog"}, "[]", 1, ": the tools array is empty", `catalog ""`},
		{"eval's empty tools array is named", []string{"eval", "--queries", queries, "--catalog"}, "[]", 1, ": the tools array is empty", `catalog ""`},
		{"eval's catalog without tools is named with its id", []string{"eval", "--queries", queries, "--catalog"}, `{"office":[]}`, 1, `: catalog "office" has no tools`, ""},
		{"search's --id on a plain tools array says it has no ids", []string{"search", "--id", "zzz", "--catalog"}, string(bundled), 2,
			" is a plain tools array, which has no catalog ids", "(one of )"},
		{"search's --id that the file lacks lists its ids", []string{"search", "--id", "zzz", "--catalog"}, `{"x":[` + tool("a") + `],"y":[` + tool("b") + `]}`, 2,
			` has no such catalog (it holds "x", "y")`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "input.json", tc.file)
			args := append(slices.Clone(tc.cmd), path)
			if tc.cmd[0] == "search" {
				args = append(args, "send an email")
			}
			out, errOut, code := runGateway(t, context.Background(), args...)
			if code != tc.code || !strings.Contains(errOut, path+tc.want) || tc.banned != "" && strings.Contains(errOut, tc.banned) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.code, path+tc.want)
			}
			if out != "" {
				t.Errorf("printed:\n%s", out)
			}
		})
	}
	t.Run("demo replays over a catalog file of one catalog", func(t *testing.T) {
		path := writeFile(t, "one.json", `{"office": `+string(bundled)+`}`)
		out, errOut, code := runGateway(t, context.Background(), "demo", "--catalog", path)
		if code != 0 || !strings.Contains(out, "12/12") {
			t.Errorf("exit %d, stderr %q; want the bundled tasks replayed:\n%s", code, errOut, out)
		}
	})
}
