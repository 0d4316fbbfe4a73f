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
			resp := post(t, base, chatRequest(t, msgs, tools, false, nil), map[string]string{"X-Session-ID": "conv"})
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			return rec.last()
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

		t.Run(mode+": the next user turn is ranked for its own message", func(t *testing.T) {
			grown := append(slices.Clone(turn),
				map[string]any{"role": "assistant", "content": "Filed it."},
				map[string]any{"role": "user", "content": next})
			got := send(t, grown)
			if !slices.Contains(got, "browser_screenshot") {
				t.Errorf("the new turn was offered %v, without the screenshot tool it asks for", got)
			}
			if len(got) <= len(first) {
				t.Errorf("the new turn added nothing to %v: %v", first, got)
			}
		})
	}
}
