package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// namedFunction is a tool_choice (or allowed_tools entry) naming a function.
func namedFunction(name string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": name}}
}

func TestTheToolsToolChoiceNamesReachTheUpstream(t *testing.T) {
	// The user asks about files; tool_choice names tools the ranking
	// would not pick for that.
	msgs := []map[string]any{{"role": "user", "content": "read the file notes.txt"}}
	for _, tc := range []struct {
		name   string
		choice any
		want   []string
	}{
		{"a forced function is offered", namedFunction("calendar_create_event"), []string{"calendar_create_event"}},
		{"every tool allowed_tools allows is offered", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{
			"mode": "required", "tools": []any{namedFunction("calendar_create_event"), namedFunction("cms_publish_page")}}}, []string{"calendar_create_event", "cms_publish_page"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			base := newTestGateway(t, up)
			resp := post(t, base, chatRequest(t, msgs, testCatalog(40), false, map[string]any{"tool_choice": tc.choice}), nil)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			offered := map[string]bool{}
			gjson.GetBytes(up.body, "tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
				offered[n.String()] = true
				return true
			})
			if len(offered) >= 40 {
				t.Fatalf("upstream got %d tools; want the gateway's short list", len(offered))
			}
			for _, name := range tc.want {
				if !offered[name] {
					t.Errorf("upstream was not offered %s, which tool_choice names; got %v", name, offered)
				}
			}
			if gjson.GetBytes(up.body, "tool_choice").Raw == "" {
				t.Errorf("tool_choice did not reach the upstream")
			}
		})
	}
}

func TestAToolChoiceOfAToolThePolicyHidesIsRefused(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "tell the team"}}
	const deny = "deny: [\"mail_*\"]\n"
	for _, tc := range []struct {
		name   string
		choice any
		policy string
		status int
	}{
		{"forcing a denied tool gets a 400 that names the rule", namedFunction("mail_send"), deny, http.StatusBadRequest},
		{"allowing a denied tool gets a 400 too", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{
			"mode": "auto", "tools": []any{namedFunction("chat_post_message"), namedFunction("mail_send")}}}, deny, http.StatusBadRequest},
		{"a request that passes through is refused the same", namedFunction("mail_send"), deny + "gateway:\n  min_tools: 50\n", http.StatusBadRequest},
		{"forcing a visible tool goes through", namedFunction("chat_post_message"), deny, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)))
			resp := post(t, base, chatRequest(t, msgs, testCatalog(40), false, map[string]any{"tool_choice": tc.choice}), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s; want %d", resp.StatusCode, b, tc.status)
			}
			if tc.status != http.StatusBadRequest {
				return
			}
			e := gjson.GetBytes(b, "error")
			if e.Get("type").String() != "invalid_request_error" || !strings.Contains(e.Get("message").String(), `deny "mail_*"`) || e.Get("param").String() != "tool_choice" {
				t.Errorf("error %s; want an invalid_request_error of param tool_choice naming the rule", b)
			}
			if up.body != nil {
				t.Errorf("the upstream was called")
			}
		})
	}
}

// TestAToolChoiceOfNoToolOfTheRequestGoesUpstreamUnchanged: the upstream
// refuses such a request at once, as it would direct. Through the loop,
// a choice of tool_search (the gateway's own tool, not the client's)
// forced the model into search round after round before failing.
func TestAToolChoiceOfNoToolOfTheRequestGoesUpstreamUnchanged(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "tell the team"}}
	for _, tc := range []struct {
		name   string
		choice any
	}{
		{"forcing the gateway's tool_search", namedFunction(SearchToolName)},
		{"forcing a tool the client did not send", namedFunction("weather_forecast")},
		{"allowing tool_search among the client's tools", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{
			"mode": "required", "tools": []any{namedFunction("chat_post_message"), namedFunction(SearchToolName)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var got atomic.Value
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				b, _ := io.ReadAll(r.Body)
				got.Store(b)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"Invalid value for 'tool_choice'","type":"invalid_request_error","param":"tool_choice","code":null}}`)
			})
			base := newTestGateway(t, up)
			body := chatRequest(t, msgs, testCatalog(40), false, map[string]any{"tool_choice": tc.choice})
			x := send(t, base, body, nil)
			sent, _ := got.Load().([]byte)
			if x.status != http.StatusBadRequest || calls.Load() != 1 || !bytes.Equal(sent, body) {
				t.Errorf("status %d, upstream calls %d, upstream body unchanged %v; want the upstream's 400 after one call with the client's request", x.status, calls.Load(), bytes.Equal(sent, body))
			}
		})
	}
}
