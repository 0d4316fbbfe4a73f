package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestAToolTheAgentKeepsCallingStaysOffered plays one long conversation
// in which every user turn reads a file first, then uses one of many
// other tools, so the session holds more tools than max_active lets it
// offer. The tool called in every turn must be offered in every turn's
// first upstream call: evicting it costs a search round that resends
// the whole conversation. The session's recent tools are what eviction
// spares, so they must be the tools called last, not the tools first
// called last.
func TestAToolTheAgentKeepsCallingStaysOffered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string
	}{
		{"in search mode the tool called every turn is never evicted", "gateway: {mode: search, max_active: 12}\n"},
		{"in hybrid mode the tool called every turn is never evicted", "gateway: {mode: hybrid, max_active: 12}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nouns := []string{"invoice", "ticket", "contact", "branch", "page", "event", "order", "refund", "user", "group", "dashboard", "report"}
			verbs := []string{"create", "list", "delete", "update"}
			var tools []map[string]any
			for _, n := range nouns {
				for _, v := range verbs {
					tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
						"name": n + "_" + v, "description": fmt.Sprintf("%s a %s record in the %s service.", v, n, n),
						"parameters": map[string]any{"type": "object", "properties": map[string]any{}},
					}})
				}
			}
			const workhorse = "fs_read_file"
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
				"name": workhorse, "description": "Read the contents of a file from the local workspace.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{}},
			}})
			var tasks []fakellm.Task
			for i := range 30 {
				noun, verb := nouns[i%len(nouns)], verbs[(i/len(nouns))%len(verbs)]
				tasks = append(tasks, fakellm.Task{
					Prompt: fmt.Sprintf("Turn %d: please take care of item %d for me.", i, i),
					Steps: []fakellm.Step{
						{Tool: workhorse, Query: "read file workspace", Args: json.RawMessage(`{}`)},
						{Tool: noun + "_" + verb, Query: verb + " " + noun + " record", Args: json.RawMessage(`{}`)},
					},
					Answer: fmt.Sprintf("done %d", i),
				})
			}
			model := &fakellm.Model{Tasks: tasks}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, tc.policy)))
			hdr := map[string]string{"X-Session-ID": "workhorse"}
			msgs := []map[string]any{{"role": "system", "content": "You are an agent."}}
			missed := 0
			for i, task := range tasks {
				first := len(model.Records())
				msgs = append(msgs, map[string]any{"role": "user", "content": task.Prompt})
				for step := 0; ; step++ {
					if step == 5 {
						t.Fatalf("turn %d did not end", i)
					}
					resp := post(t, base, chatRequest(t, msgs, tools, false, nil), hdr)
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("turn %d: status %d: %s", i, resp.StatusCode, b)
					}
					msg := gjson.GetBytes(b, "choices.0.message")
					calls := msg.Get("tool_calls").Array()
					if len(calls) == 0 {
						if got := msg.Get("content").String(); got != task.Answer {
							t.Fatalf("turn %d answered %q, want %q", i, got, task.Answer)
						}
						msgs = append(msgs, map[string]any{"role": "assistant", "content": msg.Get("content").String()})
						break
					}
					var m map[string]any
					if err := json.Unmarshal([]byte(msg.Raw), &m); err != nil {
						t.Fatal(err)
					}
					msgs = append(msgs, m)
					for _, c := range calls {
						msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.Get("id").String(), "content": "ok"})
					}
				}
				if i > 0 && !slices.Contains(model.Records()[first].Names, workhorse) {
					missed++
					t.Errorf("turn %d: the first upstream call offered %v, without %s, which every earlier turn called", i, model.Records()[first].Names, workhorse)
				}
			}
			if missed > 0 {
				t.Logf("%d of %d turns had to search again for the tool every turn calls", missed, len(tasks)-1)
			}
		})
	}
}
