package proxy

import (
	"slices"
	"testing"
)

// TestFollowUpsJoinAtATurnsFirstToolResultOnly walks one session through a
// user turn, three tool results and a second user turn. Follow-ups join
// after the first tool result of each user turn; later results leave the
// tools array as it was, because a provider's prompt cache serves a prompt
// only up to its first change, and the tools come before the conversation:
// joining two tools at every step put the whole conversation back at full
// price on every call.
func TestFollowUpsJoinAtATurnsFirstToolResultOnly(t *testing.T) {
	const (
		ask  = "Create an issue in the repository about the login crash and tell the team in the chat channel."
		next = "Take a screenshot of the browser page, publish the draft page of the website, email it to the team and create a calendar event for the review."
		done = "Now take a screenshot of the browser page."
	)
	tools := testCatalog(40)
	call := func(id, name string) []map[string]any { return toolStep(id, name, "{}", "done") }
	rec := &toolRecorder{}
	base := newTestGateway(t, rec, withPolicy(loadPolicy(t, "gateway: {mode: hybrid, preselect: 3, follow_up: 2}\n")))
	send := func(t *testing.T, msgs []map[string]any) []string {
		t.Helper()
		return rec.offer(t, base, tools, msgs, map[string]string{"X-Session-ID": "task"})
	}
	// added is what offer holds beyond before.
	added := func(offer, before []string) []string {
		var out []string
		for _, n := range offer {
			if !slices.Contains(before, n) {
				out = append(out, n)
			}
		}
		return out
	}

	msgs := []map[string]any{{"role": "user", "content": ask}}
	turn := send(t, msgs)
	msgs = append(msgs, call("c1", "repo_create_issue")...)
	first := send(t, msgs)
	t.Run("the first tool result of a turn brings two follow-ups", func(t *testing.T) {
		if got := added(first, append(slices.Clone(turn), "repo_create_issue")); len(got) != 2 {
			t.Errorf("the first tool result added %v; want two follow-ups (turn %v, then %v)", got, turn, first)
		}
	})

	t.Run("later tool results of the turn leave the tools array as it was", func(t *testing.T) {
		m := msgs
		for i, name := range []string{first[len(first)-1], first[len(first)-2]} { // the follow-ups, called in turn
			m = append(m, call("c"+string(rune('2'+i)), name)...)
			if got := send(t, m); !slices.Equal(got, first) {
				t.Fatalf("tool result %d (calling %s) was offered %v, the first %v", i+2, name, got, first)
			}
		}
	})

	// newTurnAdds starts a user turn with ask after the first turn, calls
	// the screenshot tool, and returns what that first tool result added
	// to the turn's tools, and both offers.
	newTurnAdds := func(t *testing.T, ask, id string) (extra, turn, got []string) {
		t.Helper()
		m := append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": "Filed and posted."},
			map[string]any{"role": "user", "content": ask})
		turn = send(t, m)
		got = send(t, append(m, call(id, "browser_screenshot")...))
		return added(got, append(slices.Clone(turn), "browser_screenshot")), turn, got
	}
	for _, tc := range []struct {
		name, ask, id string
		want          int
	}{
		{"the next user turn's first tool result brings follow-ups again", next, "c9", 2},
		{"a first tool result that leaves nothing of the request to find brings no follow-ups", done, "c10", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if extra, turn, got := newTurnAdds(t, tc.ask, tc.id); len(extra) != tc.want {
				t.Errorf("the first tool result added %v; want %d follow-ups (turn %v, then %v)", extra, tc.want, turn, got)
			}
		})
	}
}
