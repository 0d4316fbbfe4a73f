package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestNodeClientsWorkUnchanged runs agents on the official `openai`,
// `@anthropic-ai/sdk` and `ai` npm packages (the last with its OpenAI and
// Anthropic providers; testdata/e2e/agent.mjs) against the gateway,
// streamed and not. Without node or the packages it skips on a
// developer's machine and fails in CI (CI set, as .ci/run sets it), where a
// skip would hide that the clients were never run; .ci/run installs them
// with `npm ci --prefix testdata/e2e`.
func TestNodeClientsWorkUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("node end-to-end tests are slow; skipped in -short")
	}
	missing := t.Skipf
	if os.Getenv("CI") != "" {
		missing = t.Fatalf
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed (%v): the official npm clients cannot run; install node, then: npm ci --prefix testdata/e2e", err)
	}
	dir := filepath.Join("..", "testdata", "e2e")
	for _, pkg := range []string{"openai", "ai", "@ai-sdk/openai", "@anthropic-ai/sdk", "@ai-sdk/anthropic"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			missing("the npm package %s is not installed (%v); run: npm ci --prefix testdata/e2e", pkg, err)
		}
	}
	tasks := loadTasks(t)
	var tools []map[string]any
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	// The reference: what a plain HTTP agent gets through a fresh gateway.
	// Every client must see exactly the same calls and answers: the gateway
	// is transparent whatever the client library.
	refBase := newTestGateway(t, &fakellm.Model{Tasks: tasks})
	want := map[string]agentRun{}
	for _, task := range tasks {
		want[task.Name] = runAgent(t, refBase, task, tools, false, nil)
	}
	for _, tc := range []struct {
		name, client, stream string
		// reasoning makes the upstream think before each call (or, with
		// thinkOnce, once a turn, as Claude's models do without
		// interleaved thinking), and refuse a call sent back without its
		// signed thinking block.
		reasoning, thinkOnce bool
	}{
		{"an agent on the openai package sees what a plain HTTP agent sees, without streaming", "openai", "0", false, false},
		{"an agent on the openai package sees what a plain HTTP agent sees, with streaming", "openai", "1", false, false},
		{"an agent on the ai package sees what a plain HTTP agent sees, without streaming", "ai", "0", false, false},
		{"an agent on the ai package sees what a plain HTTP agent sees, with streaming", "ai", "1", false, false},
		{"an agent on the openai package's Responses API sees what a plain HTTP agent sees, without streaming", "openai-responses", "0", false, false},
		{"an agent on the openai package's Responses API sees what a plain HTTP agent sees, with streaming", "openai-responses", "1", false, false},
		{"an agent on the ai package's Responses API sees what a plain HTTP agent sees, without streaming", "ai-responses", "0", false, false},
		{"an agent on the ai package's Responses API sees what a plain HTTP agent sees, with streaming", "ai-responses", "1", false, false},
		{"an agent on Anthropic's own SDK package sees what a plain HTTP agent sees, without streaming", "anthropic", "0", true, false},
		{"an agent on Anthropic's own SDK package sees what a plain HTTP agent sees, with streaming", "anthropic", "1", true, false},
		{"an agent on the ai package's Anthropic provider sees what a plain HTTP agent sees, without streaming", "ai-anthropic", "0", true, true},
		{"an agent on the ai package's Anthropic provider sees what a plain HTTP agent sees, with streaming", "ai-anthropic", "1", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: tasks, Reasoning: tc.reasoning, ThinkOnce: tc.thinkOnce}
			base := newTestGateway(t, model)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "agent.mjs", base, tc.client, tc.stream, "../catalog.json", "../tasks.json")
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node agent: %v\n%s", err, stderr.String())
			}
			seen := 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var got struct {
					Name         string   `json:"name"`
					Calls        []string `json:"calls"`
					Answer       string   `json:"answer"`
					PromptTokens int64    `json:"promptTokens"`
				}
				if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
					t.Fatalf("agent output %q: %v", sc.Text(), err)
				}
				seen++
				ref := want[got.Name]
				wantJSON, _ := json.Marshal(append([]string{}, ref.calls...))
				gotJSON, _ := json.Marshal(append([]string{}, got.Calls...))
				if !bytes.Equal(wantJSON, gotJSON) || got.Answer != ref.answer {
					t.Errorf("%s: calls %s answer %q; a plain HTTP agent got %s and %q", got.Name, gotJSON, got.Answer, wantJSON, ref.answer)
				}
				if got.PromptTokens <= 0 {
					t.Errorf("%s: the client saw no usage", got.Name)
				}
			}
			if seen != len(tasks) {
				t.Errorf("agent reported %d tasks, want %d", seen, len(tasks))
			}
		})
	}
}
