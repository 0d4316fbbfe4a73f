package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

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

// TestAgentTasksOverAnEightHundredToolCatalog replays the project's agent
// tasks over the real MCP catalog plus the project's own, against an
// upstream that refuses more than 128 tools: every step must complete, the
// upstream must see a small share of the catalog, and the extra search
// rounds must stay within 1.3x the calls of a direct run.
func TestAgentTasksOverAnEightHundredToolCatalog(t *testing.T) {
	tools := bigCatalog(t)
	full, _ := json.Marshal(tools)
	tasks := loadTasks(t)
	model := &fakellm.Model{Tasks: tasks}
	base := newTestGateway(t, model)
	steps, upstreamCalls, directCalls := 0, 0, 0
	for i, task := range tasks {
		name := task.Name
		t.Run(name, func(t *testing.T) {
			model.Reset()
			run := runAgent(t, base, task, tools, i%2 == 1, nil)
			done := 0
			for _, c := range run.calls {
				if done < len(task.Steps) && c == task.Steps[done].Tool {
					done++
				}
			}
			steps += done
			recs := model.Records()
			upstreamCalls += len(recs)
			directCalls += len(task.Steps) + 1
			if done != len(task.Steps) || run.answer != task.Answer {
				t.Errorf("completed %d of %d steps (calls %v), answer %q", done, len(task.Steps), run.calls, run.answer)
			}
			if r := recs[0]; r.ToolsBytes*10 > len(full) {
				t.Errorf("first upstream request carried %d tool bytes, over 10%% of %d", r.ToolsBytes, len(full))
			}
		})
	}
	total := 0
	for _, task := range tasks {
		total += len(task.Steps)
	}
	t.Logf("%d tools; %d/%d steps; upstream calls %d vs direct %d (%.2fx)", len(tools), steps, total, upstreamCalls, directCalls, float64(upstreamCalls)/float64(directCalls))
	if float64(upstreamCalls) > 1.3*float64(directCalls) {
		t.Errorf("upstream calls %d exceed 1.3x the direct run's %d", upstreamCalls, directCalls)
	}
	_ = gjson.Valid
}
