package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// bigCatalog returns the real 650-tool MCP catalog of the shared eval data
// with the project's own 183-tool catalog appended, or skips when the
// shared data is absent.
func bigCatalog(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "eval", "mcp.catalog.json"))
	if err != nil {
		t.Skip("shared eval data not present:", err)
	}
	var shared map[string][]map[string]any
	if err := json.Unmarshal(raw, &shared); err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join("..", "testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []map[string]any
	if err := json.Unmarshal(own, &tools); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tl := range tools {
		seen[tl["function"].(map[string]any)["name"].(string)] = true
	}
	for _, tl := range shared["mcp"] {
		if !seen[tl["function"].(map[string]any)["name"].(string)] {
			tools = append(tools, tl)
		}
	}
	return tools
}

func loadTasks(t *testing.T) []fakellm.Task {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []fakellm.Task
	if err := json.Unmarshal(raw, &tasks); err != nil {
		t.Fatal(err)
	}
	return tasks
}

// ownCatalog returns the project's 183-tool catalog.
func ownCatalog(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []map[string]any
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

// TestAgentTasksCompleteThroughTheGateway replays the project's multi-step
// agent tasks against an upstream that refuses more than 128 tools: nearly
// every tool step must complete, the first upstream request must carry a
// small share of the catalog, and the extra search rounds must stay close to
// the upstream calls of a direct run. At 183 tools the bounds are the
// product's targets (95% of steps, 1.3x; measured 46/46 at 1.22x); at 833
// they guard what selection achieves today (42/46 at 1.39x).
func TestAgentTasksCompleteThroughTheGateway(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tools    func(*testing.T) []map[string]any
		minSteps float64
		maxCalls float64 // upstream calls over a direct run's
	}{
		{"an agent with 183 tools completes at least 95% of its steps within 1.3x the calls", ownCatalog, 0.95, 1.3},
		{"an agent with 800+ real MCP tools completes at least 80% of its steps", bigCatalog, 0.80, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := tc.tools(t)
			full, _ := json.Marshal(tools)
			tasks := loadTasks(t)
			model := &fakellm.Model{Tasks: tasks}
			base := newTestGateway(t, model)
			steps, total, upstreamCalls, directCalls := 0, 0, 0, 0
			for i, task := range tasks {
				model.Reset()
				run := runAgent(t, base, task, tools, i%2 == 1, nil)
				done := 0
				for _, c := range run.calls {
					if done < len(task.Steps) && c == task.Steps[done].Tool {
						done++
					}
				}
				steps += done
				total += len(task.Steps)
				recs := model.Records()
				upstreamCalls += len(recs)
				directCalls += done + 1
				if done < len(task.Steps) {
					t.Logf("%s: completed %d of %d steps (calls %v)", task.Name, done, len(task.Steps), run.calls)
				}
				if r := recs[0]; r.ToolsBytes*10 > len(full) {
					t.Errorf("%s: first upstream request carried %d tool bytes, over 10%% of %d", task.Name, r.ToolsBytes, len(full))
				}
			}
			ratio := float64(upstreamCalls) / float64(directCalls)
			t.Logf("%d tools: %d/%d steps; %d upstream calls vs %d direct (%.2fx)", len(tools), steps, total, upstreamCalls, directCalls, ratio)
			if float64(steps) < tc.minSteps*float64(total) {
				t.Errorf("completed %d of %d steps, under %.0f%%", steps, total, 100*tc.minSteps)
			}
			if ratio > tc.maxCalls {
				t.Errorf("upstream calls %d exceed %.1fx the direct run's %d", upstreamCalls, tc.maxCalls, directCalls)
			}
		})
	}
}
