package proxy

import (
	"net/http"
	"slices"
	"testing"
)

// TestRetriedTurnOffersTheSameTools sends one user turn twice on one
// session, then a new turn. Before the session remembered its turn's
// preselection, a retry ranked again with the first attempt's tools
// excluded (they were active by then) and added the next-best ones.
func TestRetriedTurnOffersTheSameTools(t *testing.T) {
	const (
		ask  = "Create an issue in the repository about the login crash."
		next = "Now take a screenshot of the browser page."
	)
	tools := testCatalog(40)
	for _, mode := range []string{"hybrid", "preselect"} {
		rec := &toolRecorder{}
		base := newTestGateway(t, rec, withPolicy(loadPolicy(t, "gateway: {mode: "+mode+", preselect: 3, explore: true}\n")))
		send := func(t *testing.T, msgs []map[string]any) []string {
			t.Helper()
			return rec.offer(t, base, tools, msgs, map[string]string{"X-Session-ID": "conv"})
		}
		turn := []map[string]any{{"role": "user", "content": ask}}
		first := send(t, turn)

		t.Run(mode+": a retried turn is offered exactly the tools of the first attempt", func(t *testing.T) {
			if len(first) < 3 {
				t.Fatalf("first attempt offered %v", first)
			}
			for range 3 {
				if again := send(t, turn); !slices.Equal(again, first) {
					t.Fatalf("first attempt %v, retry %v", first, again)
				}
			}
		})

		t.Run(mode+": the next user turn is ranked for its own message and drops the guesses never called", func(t *testing.T) {
			grown := append(slices.Clone(turn),
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "c1", "type": "function",
					"function": map[string]any{"name": "repo_create_issue", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": "c1", "content": "created #7"},
				map[string]any{"role": "assistant", "content": "Filed it."},
				map[string]any{"role": "user", "content": next})
			if !slices.Contains(first, "repo_create_issue") {
				t.Fatalf("the first turn was not offered the tool its history calls: %v", first)
			}
			got := send(t, grown)
			if !slices.Contains(got, "browser_screenshot") {
				t.Errorf("the new turn was offered %v, without the screenshot tool it asks for", got)
			}
			if !slices.Contains(got, "repo_create_issue") {
				t.Errorf("the new turn was offered %v, without the tool the conversation called", got)
			}
			// A fresh session sees the same conversation: what it is
			// offered is what the turn needs; the first turn's other
			// guesses must not ride along.
			resp := post(t, base, chatRequest(t, grown, tools, false, nil), map[string]string{"X-Session-ID": "fresh"})
			resp.Body.Close()
			fresh := rec.last()
			for _, n := range first {
				if n != "repo_create_issue" && slices.Contains(got, n) && !slices.Contains(fresh, n) {
					t.Errorf("the first turn's unused guess %s rides along: %v (a fresh session: %v)", n, got, fresh)
				}
			}
		})
	}

	t.Run("a retried tool-result turn is offered the same tools, and follow_up: 0 adds none", func(t *testing.T) {
		offered := func(t *testing.T, policyText string) (first, again []string) {
			t.Helper()
			rec := &toolRecorder{}
			base := newTestGateway(t, rec, withPolicy(loadPolicy(t, policyText)))
			msgs := []map[string]any{
				{"role": "user", "content": ask},
				{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "c1", "type": "function",
					"function": map[string]any{"name": "repo_create_issue", "arguments": "{}"}}}},
				{"role": "tool", "tool_call_id": "c1", "content": "created #7"},
			}
			for i := range 2 {
				resp := post(t, base, chatRequest(t, msgs, tools, false, nil), map[string]string{"X-Session-ID": "conv"})
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
				if i == 0 {
					first = rec.last()
				}
			}
			return first, rec.last()
		}
		first, again := offered(t, "gateway: {mode: hybrid, follow_up: 2}\n")
		if want := 1 + 1 + 2; len(first) != want || !slices.Equal(again, first) {
			t.Errorf("offered %v then %v; want tool_search, the called tool and 2 follow-ups, twice", first, again)
		}
		if off, _ := offered(t, "gateway: {mode: hybrid, follow_up: 0}\n"); len(off) != 2 {
			t.Errorf("with follow_up 0 the tool-result turn was offered %v; want tool_search and the called tool", off)
		}
	})
}
