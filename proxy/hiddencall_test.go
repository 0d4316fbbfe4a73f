package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// hiddenCaller is an upstream whose model calls the tool name, whatever
// it was offered, until the conversation holds a tool message; then it
// answers in text. It keeps every request body.
type hiddenCaller struct {
	name   string
	mu     sync.Mutex
	bodies [][]byte
}

func (u *hiddenCaller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, b)
	u.mu.Unlock()
	answered := gjson.GetBytes(b, `messages.#(role=="tool")`).Exists()
	if gjson.GetBytes(b, "stream").Bool() {
		w.Header().Set("Content-Type", "text/event-stream")
		if answered {
			_, _ = io.WriteString(w, textChunk("done")+finishChunk("stop")+doneEvent)
			return
		}
		_, _ = io.WriteString(w, callChunk(0, "call_h", u.name, "{}")+finishChunk("tool_calls")+doneEvent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if answered {
		_, _ = io.WriteString(w, plainAnswer)
		return
	}
	_, _ = fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_h","type":"function","function":{"name":%q,"arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, u.name)
}

// TestACallOfAHiddenToolNeverReachesTheClient: tools.yaml promises that a
// model's call of a tool the policy hides is answered by the gateway with
// a tool error, and the client never sees it. A request that passed
// through for its size (fewer than min_tools, a long conversation) came
// back unread, the call in it. Such a request now goes through the loop
// with every tool the policy shows and no tool_search; one the policy
// hides nothing of still passes through byte for byte, and one that
// cannot take rounds (n > 1) still passes through, the call in it, as
// the README says.
func TestACallOfAHiddenToolNeverReachesTheClient(t *testing.T) {
	user := []map[string]any{{"role": "user", "content": "what branches are there?"}}
	long := append([]map[string]any{{"role": "system", "content": strings.Repeat("Be brief. ", 40)}}, user...)
	for _, tc := range []struct {
		name, policy, hidden string
		msgs                 []map[string]any
		tools                int
		extra                map[string]any
		// reaches: the client gets the call of the hidden tool; passes:
		// the request reaches the upstream byte for byte.
		reaches, passes bool
	}{
		{"a denied tool of a request with fewer than min_tools", "deny: [repo_list_issues]\n", "repo_list_issues", user, 5, nil, false, false},
		{"a tool the risk gate hides from a request with fewer than min_tools",
			"tools:\n  repo_delete_branch: {risk: destructive}\n", "repo_delete_branch", user, 5, nil, false, false},
		{"a denied tool of a conversation past passthrough_history_tokens",
			"deny: [repo_list_issues]\ngateway: {passthrough_history_tokens: 50}\n", "repo_list_issues", long, 40, nil, false, false},
		{"a request the policy hides nothing of passes through byte for byte, the call in its answer",
			"deny: [mail_send]\n", "repo_list_issues", user, 5, nil, true, true},
		{"a request with n > 1 passes through, and the call of the tool it lost reaches the client",
			"deny: [repo_list_issues]\n", "repo_list_issues", user, 5, map[string]any{"n": 2}, true, false},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += ", streamed"
			}
			t.Run(name, func(t *testing.T) {
				up := &hiddenCaller{name: tc.hidden}
				base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)))
				body := chatRequest(t, tc.msgs, testCatalog(tc.tools), stream, tc.extra)
				x := send(t, base, body, nil)
				if x.status != http.StatusOK {
					t.Fatalf("status %d: %s", x.status, x.body)
				}
				var calls []string
				if stream {
					for _, c := range readStream(t, bytes.NewReader(x.body)).calls {
						calls = append(calls, c.Get("name").String())
					}
				} else {
					gjson.GetBytes(x.body, "choices.0.message.tool_calls.#.function.name").ForEach(func(_, n gjson.Result) bool {
						calls = append(calls, n.String())
						return true
					})
				}
				if got := slices.Contains(calls, tc.hidden); got != tc.reaches {
					t.Errorf("the client got the call of %s: %v, want %v (answer %s)", tc.hidden, got, tc.reaches, x.body)
				}
				up.mu.Lock()
				defer up.mu.Unlock()
				first := up.bodies[0]
				if got := bytes.Equal(first, body); got != tc.passes {
					t.Errorf("the upstream got the client's body byte for byte: %v, want %v", got, tc.passes)
				}
				if tc.reaches {
					return
				}
				// Every tool the policy shows, in the client's order, and
				// no search: what the passthrough sent.
				var want []string
				for _, tool := range testCatalog(tc.tools) {
					if n := tool["function"].(map[string]any)["name"].(string); n != tc.hidden {
						want = append(want, n)
					}
				}
				if got := toolNames(first); !slices.Equal(got, want) {
					t.Errorf("the upstream was offered %v; want every tool but %s, in the client's order", got, tc.hidden)
				}
				if len(up.bodies) != 2 || !strings.Contains(gjson.GetBytes(up.bodies[1], `messages.#(role=="tool").content`).String(), "blocked by policy") {
					t.Errorf("the upstream got %d requests; want a second whose tool message says the call is blocked", len(up.bodies))
				}
			})
		}
	}
}
