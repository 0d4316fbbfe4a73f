package proxy

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unsafe"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// within reports whether s's bytes lie inside b's memory.
func within(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < lo+uintptr(cap(b))
}

// stateStrings lists every string a session state keeps.
func stateStrings(st session.State) []string {
	out := append([]string{st.Last, st.Focus, st.Turn, st.Explored}, st.Active...)
	out = append(out, st.Recent...)
	out = append(out, st.Preselected...)
	return append(out, st.Guesses...)
}

func TestTheSessionNeverKeepsAStringOfARequestOrResponseBody(t *testing.T) {
	// Names read from a body alias it (rewrite parses without copying),
	// and the session outlives the request: a kept name would hold the
	// whole body in memory for as long as the session lives.
	u, _ := url.Parse("http://upstream.invalid/v1")
	g := &Gateway{Upstream: u, Policy: policy.Default, Sessions: session.NewMemory(10, 0), Catalogs: selector.NewCache(2)}
	g.init()
	msgs := []map[string]any{
		{"role": "user", "content": "create an issue for the login bug"},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "c1", "type": "function", "function": map[string]any{"name": "repo_create_issue", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "c1", "content": "created #7"},
		{"role": "user", "content": "now tell the team in chat"},
	}
	tools := testCatalog(40)
	tools[3] = map[string]any{"type": "function", "function": map[string]any{"name": "repo_merge_pull_request"}}
	body := chatRequest(t, msgs, tools, false, map[string]any{
		"tool_choice": map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "auto", "tools": []any{namedFunction("chat_post_message"), namedFunction("repo_merge_pull_request")}}}})
	req, err := rewrite.ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	req.ToolsKey = g.parsed.space(routeChat).keyOf(req.ToolsRaw.Raw) // as serveTurn keys every array
	in := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	turn, err := g.newTurn(context.Background(), in, g.policy(), req, rewrite.Chat{}, session.Thread{})
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"c2","type":"function","function":{"name":"chat_post_message","arguments":"{}"}},` +
		`{"id":"c3","type":"function","function":{"name":"a_tool_the_client_never_sent","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	resp, err := rewrite.ParseResponse(answer)
	if err != nil {
		t.Fatal(err)
	}
	turn.answer(context.Background(), resp.Calls, 0)
	kept := stateStrings(turn.st)
	if !strings.Contains(strings.Join(kept, ","), "repo_create_issue") || turn.st.Last != "chat_post_message" {
		t.Fatalf("the session lacks what the test looks at: %q", kept)
	}
	if strings.Contains(strings.Join(kept, ","), "a_tool_the_client_never_sent") {
		t.Errorf("the session keeps a name the catalog does not have: %q", kept)
	}
	for _, s := range kept {
		if within(s, body) {
			t.Errorf("the session keeps %q from the request body", s)
		}
		if within(s, answer) {
			t.Errorf("the session keeps %q from the upstream's answer", s)
		}
	}
}
