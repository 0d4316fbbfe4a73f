package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
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

// TestAToolChoiceThatNamesToolsIsSentThoseAlone: a tool_choice that names
// a function, or lists allowed_tools, restricts the model to those; it
// cannot call tool_search or the turn's guesses, yet both went upstream
// in every round, at their tokens. The rounds now carry the named tools
// alone, in each API's form of the choice.
func TestAToolChoiceThatNamesToolsIsSentThoseAlone(t *testing.T) {
	const prompt = "read the file notes.txt"
	task := fakellm.Task{Prompt: prompt, Answer: "Done.",
		Steps: []fakellm.Step{{Tool: "calendar_create_event", Query: "create calendar event", Args: json.RawMessage(`{}`)}}}
	var responsesTools []map[string]any
	for _, tool := range testCatalog(40) {
		fn := tool["function"].(map[string]any)
		responsesTools = append(responsesTools, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
	}
	chat := func(choice any) []byte {
		return chatRequest(t, []map[string]any{{"role": "user", "content": prompt}}, testCatalog(40), false, map[string]any{"tool_choice": choice})
	}
	body := func(v map[string]any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, path string
		body       []byte
		want       []string
	}{
		{"a Chat Completions choice of a function", "/chat/completions",
			chat(namedFunction("calendar_create_event")), []string{"calendar_create_event"}},
		{"a Chat Completions allowed_tools choice", "/chat/completions",
			chat(map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "auto",
				"tools": []any{namedFunction("calendar_create_event"), namedFunction("cms_publish_page")}}}), []string{"calendar_create_event", "cms_publish_page"}},
		{"a Responses choice of a function", "/responses",
			body(map[string]any{"model": "m", "input": prompt, "tools": responsesTools,
				"tool_choice": map[string]any{"type": "function", "name": "calendar_create_event"}}), []string{"calendar_create_event"}},
		{"a Responses allowed_tools choice", "/responses",
			body(map[string]any{"model": "m", "input": prompt, "tools": responsesTools,
				"tool_choice": map[string]any{"type": "allowed_tools", "mode": "required", "tools": []any{
					map[string]any{"type": "function", "name": "calendar_create_event"}, map[string]any{"type": "function", "name": "cms_publish_page"}}}}),
			[]string{"calendar_create_event", "cms_publish_page"}},
		{"a Messages choice of a tool", "/messages",
			body(map[string]any{"model": "claude-test", "max_tokens": 1024, "tools": anthropicTools(40),
				"messages":    []map[string]any{{"role": "user", "content": prompt}},
				"tool_choice": map[string]any{"type": "tool", "name": "calendar_create_event"}}), []string{"calendar_create_event"}},
	} {
		t.Run(tc.name+" sends the named tools alone", func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{task}}
			base := newTestGateway(t, model)
			x := sendTo(t, base, tc.path, tc.body, map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"})
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			recs := model.Records()
			if len(recs) != 1 || !sameSet(recs[0].Names, tc.want) {
				var names [][]string
				for _, r := range recs {
					names = append(names, r.Names)
				}
				t.Errorf("the upstream was offered %v; want one call offered %v", names, tc.want)
			}
		})
	}

	t.Run("the guesses for the request join the session for the client's next request", func(t *testing.T) {
		model := &fakellm.Model{Tasks: []fakellm.Task{task}}
		base := newTestGateway(t, model)
		hdr := map[string]string{"X-Session-ID": "forced"}
		if x := send(t, base, chat(namedFunction("calendar_create_event")), hdr); x.status != http.StatusOK {
			t.Fatalf("status %d: %s", x.status, x.body)
		}
		next := chatRequest(t, []map[string]any{{"role": "user", "content": prompt},
			{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "c1", "type": "function",
				"function": map[string]any{"name": "calendar_create_event", "arguments": "{}"}}}},
			{"role": "tool", "tool_call_id": "c1", "content": "created"}}, testCatalog(40), false, nil)
		if x := send(t, base, next, hdr); x.status != http.StatusOK {
			t.Fatalf("status %d: %s", x.status, x.body)
		}
		recs := model.Records()
		if last := recs[len(recs)-1].Names; !slices.Contains(last, SearchToolName) || !slices.Contains(last, "fs_read_file") {
			t.Errorf("the next request, without tool_choice, offered %v; want tool_search and fs_read_file, preselected for the forced one", last)
		}
	})
}
