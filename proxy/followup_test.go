package proxy

import (
	"net/http"
	"slices"
	"testing"
)

// TestFollowUpsGiveWayToTheNextStepsOnes walks one session through a user
// turn and two tool results. Each tool result brings two follow-up tools;
// before, the first result's follow-ups stayed for every later step of the
// task, so each step sent two more tools than the one before.
func TestFollowUpsGiveWayToTheNextStepsOnes(t *testing.T) {
	const ask = "Create an issue in the repository about the login crash and tell the team in the chat channel."
	tools := testCatalog(40)
	call := func(id, name string) []map[string]any {
		return []map[string]any{
			{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function",
				"function": map[string]any{"name": name, "arguments": "{}"}}}},
			{"role": "tool", "tool_call_id": id, "content": "done"},
		}
	}
	// run sends the user turn, a first tool result (repo_create_issue) and
	// a second one calling pick(what the first result offered), on one
	// session; it returns what the upstream was offered each time and the
	// second call's tool.
	run := func(t *testing.T, pick func(turn, first []string) string) (turn, first, second []string, second2 string) {
		t.Helper()
		rec := &toolRecorder{}
		base := newTestGateway(t, rec, withPolicy(loadPolicy(t, "gateway: {mode: hybrid, preselect: 3, follow_up: 2}\n")))
		send := func(msgs []map[string]any) []string {
			t.Helper()
			resp := post(t, base, chatRequest(t, msgs, tools, false, nil), map[string]string{"X-Session-ID": "task"})
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			return rec.last()
		}
		msgs := []map[string]any{{"role": "user", "content": ask}}
		turn = send(msgs)
		msgs = append(msgs, call("c1", "repo_create_issue")...)
		first = send(msgs)
		second2 = pick(turn, first)
		msgs = append(msgs, call("c2", second2)...)
		second = send(msgs)
		if again := send(msgs); !slices.Equal(again, second) {
			t.Errorf("a retried second tool result was offered %v, the first attempt %v", again, second)
		}
		return turn, first, second, second2
	}
	// extra is what an offer holds beyond tool_search, the user turn's
	// picks and the tools called so far: the latest follow-ups.
	extra := func(offer, turn []string, called ...string) []string {
		var out []string
		for _, n := range offer {
			if n != SearchToolName && !slices.Contains(turn, n) && !slices.Contains(called, n) {
				out = append(out, n)
			}
		}
		return out
	}

	t.Run("a follow-up never called leaves when the next tool result brings its own", func(t *testing.T) {
		turn, first, second, other := run(t, func(turn, first []string) string {
			// A tool no request of the task was offered: the agent knew it.
			for _, tl := range tools {
				n := tl["function"].(map[string]any)["name"].(string)
				if !slices.Contains(turn, n) && !slices.Contains(first, n) {
					return n
				}
			}
			t.Fatal("every tool was offered")
			return ""
		})
		if got := extra(first, turn, "repo_create_issue"); len(got) != 2 {
			t.Fatalf("the first tool result brought %v; want two follow-ups (offered %v)", got, first)
		}
		got := extra(second, turn, "repo_create_issue", other)
		if len(got) > 2 {
			t.Errorf("after the second tool result the upstream saw %v beyond the turn's picks and called tools; want only the two new follow-ups (offered %v)", got, second)
		}
		if !slices.Contains(second, other) || !slices.Contains(second, "repo_create_issue") {
			t.Errorf("the called tools are not all offered: %v", second)
		}
	})

	t.Run("a follow-up the agent called stays", func(t *testing.T) {
		var used string
		turn, first, second, _ := run(t, func(turn, first []string) string {
			used = extra(first, turn, "repo_create_issue")[0]
			return used
		})
		if !slices.Contains(second, used) {
			t.Errorf("the follow-up %s was called but is no longer offered: %v", used, second)
		}
		if got := extra(second, turn, "repo_create_issue", used); len(got) > 2 {
			t.Errorf("after the second tool result the upstream saw %v beyond the turn's picks and called tools; want only the two new follow-ups (first offer %v)", got, first)
		}
	})
}
