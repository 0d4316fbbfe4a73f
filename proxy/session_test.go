package proxy

import (
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// TestLaterTurnsKeepTheToolsAlreadyUsed: after a first turn that had to
// search, the next turn of the same conversation starts with the found tool
// already offered, whether the session is named by X-Session-ID, found by
// fingerprint, or lost (the history is the truth).
func TestLaterTurnsKeepTheToolsAlreadyUsed(t *testing.T) {
	task := fakellm.Task{
		Prompt: "Let everyone know the deploy finished.",
		Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{}`)}},
		Answer: "Done.",
	}
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		forget bool
	}{
		{"a session named by X-Session-ID keeps the tool", map[string]string{"X-Session-ID": "s-1"}, false},
		{"a session found by fingerprint keeps the tool", nil, false},
		{"a lost session still offers the tool called in the history", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{task}}
			mem := session.NewMemory(100, 0)
			base := newTestGateway(t, model, searchOnly(t), func(g *Gateway) { g.Sessions = mem })
			tools := testCatalog(30)
			msgs := []map[string]any{{"role": "system", "content": "agent"}, {"role": "user", "content": task.Prompt}}
			resp := post(t, base, chatRequest(t, msgs, tools, false, nil), tc.hdr)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
				t.Fatalf("first turn: %s", b)
			}
			first := model.Records()
			if slices.Contains(first[0].Names, "chat_post_message") {
				t.Fatalf("the tool was offered before any search; the test needs a search to mean anything")
			}
			if tc.forget {
				for _, k := range mem.Keys() {
					_ = mem.Delete(t.Context(), k)
				}
			}
			model.Reset()
			msgs = append(msgs, out.Choices[0].Message, map[string]any{"role": "tool", "tool_call_id": out.Choices[0].Message["tool_calls"].([]any)[0].(map[string]any)["id"], "content": "ok"})
			msgs = append(msgs, map[string]any{"role": "user", "content": "Thanks. Anything else?"})
			resp = post(t, base, chatRequest(t, msgs, tools, false, nil), tc.hdr)
			resp.Body.Close()
			recs := model.Records()
			if len(recs) == 0 || !slices.Contains(recs[0].Names, "chat_post_message") {
				t.Fatalf("second turn's first upstream request offered %v, want chat_post_message among them", recs[0].Names)
			}
			if tc.forget {
				return
			}
			// With the session, everything turn 1 ended with is offered again,
			// in the same order (a stable prefix keeps upstream prompt caches
			// warm), including tools found but never called.
			last := first[len(first)-1].Names
			if got := recs[0].Names; len(got) < len(last) || !slices.Equal(got[:len(last)], last) {
				t.Errorf("second turn offered %v, want it to start with turn 1's %v", got, last)
			}
		})
	}
}
