package proxy

import (
	"fmt"
	"slices"
	"testing"
)

// TestTheGatewayLearnsWhatATenantsRequestsCall: once two conversations of
// a tenant asked in certain words and went on to call a tool the
// preselection did not offer, a later request of that tenant in the same
// words gets the tool up front. One conversation, even retried, is not
// enough, and another tenant learns nothing from it.
func TestTheGatewayLearnsWhatATenantsRequestsCall(t *testing.T) {
	const (
		taught = "Let the landlord know the heating is broken again."
		later  = "Tell the landlord the heating broke once more."
		tool   = "mail_send"
	)
	tools := testCatalog(40)
	setup := func(t *testing.T, policyText string) func(key, session string, msgs []map[string]any) []string {
		rec := &toolRecorder{}
		base := newTestGateway(t, rec, withPolicy(loadPolicy(t, policyText)), func(g *Gateway) { g.Learned = NewLearned(8) })
		return func(key, session string, msgs []map[string]any) []string {
			t.Helper()
			return rec.offer(t, base, tools, msgs, map[string]string{"Authorization": "Bearer " + key, "X-Session-ID": session})
		}
	}
	// conversation plays one task: the request, then the result of the
	// tool the model called (found by a search the client never sees),
	// sent times times (a client retrying it).
	conversation := func(t *testing.T, send func(string, string, []map[string]any) []string, key, session string, times int) {
		msgs := []map[string]any{{"role": "user", "content": taught}}
		if first := send(key, session, msgs); slices.Contains(first, tool) {
			t.Fatalf("the first request was offered %s (%v); the test needs a request the ranking misses", tool, first)
		}
		msgs = append(msgs, toolStep("c1", tool, `{"id":"landlord@example.com"}`, "sent")...)
		for range times {
			send(key, session, msgs)
		}
	}
	const policyText = "gateway: {mode: hybrid, preselect: 3, follow_up: 0}\n"
	for _, tc := range []struct {
		name      string
		policy    string
		sends     []int // per conversation of tenant A: how often its tool result is sent
		key       string
		wantsTool bool
	}{
		{"after two conversations the tenant's similar request is offered the tool", policyText, []int{1, 1}, "sk-a", true},
		{"one conversation is not enough", policyText, []int{1}, "sk-a", false},
		{"one conversation retried three times is still one", policyText, []int{3}, "sk-a", false},
		{"another tenant learns nothing from tenant A", policyText, []int{1, 1}, "sk-b", false},
		{"search.weights.habit: 0 switches it off", policyText + "search: {weights: {habit: 0}}\n", []int{1, 1}, "sk-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := setup(t, tc.policy)
			for i, times := range tc.sends {
				conversation(t, send, "sk-a", fmt.Sprintf("a-%d", i), times)
			}
			got := send(tc.key, "fresh", []map[string]any{{"role": "user", "content": later}})
			if slices.Contains(got, tool) != tc.wantsTool {
				t.Errorf("the later request was offered %v; %s among them = %v, want %v", got, tool, !tc.wantsTool, tc.wantsTool)
			}
		})
	}
}
