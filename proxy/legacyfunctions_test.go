package proxy

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// legacyFunction is an entry of the legacy functions array.
func legacyFunction(name string) map[string]any {
	return map[string]any{"name": name, "description": "Does " + name + ".", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}
}

// TestTheLegacyFunctionsFieldIsHeldToThePolicy: a request with the legacy
// functions member passes through, and its functions went upstream as
// sent, a denied one too, while the README promised denied tools are
// removed; a function_call naming one went upstream as well.
func TestTheLegacyFunctionsFieldIsHeldToThePolicy(t *testing.T) {
	const pol = "deny: [\"mail_*\"]\nrisk: {destructive_names: \"(?i)delete\"}\n"
	msgs := []map[string]any{{"role": "user", "content": "what is in the workspace?"}}
	for _, tc := range []struct {
		name      string
		functions []string
		tools     int
		extra     map[string]any
		status    int
		want      []string // the functions the upstream gets; nil: no functions member
		unchanged bool     // the upstream gets the client's body byte for byte
	}{
		{"a denied function is removed and the others go as written", []string{"mail_send", "chat_post_message", "fs_read_file"}, 0, nil,
			http.StatusOK, []string{"chat_post_message", "fs_read_file"}, false},
		{"a function the risk gate hides without write intent is removed", []string{"fs_delete_file", "fs_read_file"}, 0, nil,
			http.StatusOK, []string{"fs_read_file"}, false},
		{"a request whose every function is hidden goes without functions and function_call", []string{"mail_send"}, 0, map[string]any{"function_call": "auto"},
			http.StatusOK, nil, false},
		{"a request with tools too has both filtered", []string{"mail_send", "chat_post_message"}, 40, nil,
			http.StatusOK, []string{"chat_post_message"}, false},
		{"a request whose functions the policy all shows reaches the upstream byte for byte", []string{"chat_post_message"}, 0, map[string]any{"function_call": map[string]any{"name": "chat_post_message"}},
			http.StatusOK, []string{"chat_post_message"}, true},
		{"a function_call naming a denied function gets a 400 naming function_call", []string{"mail_send", "chat_post_message"}, 0, map[string]any{"function_call": map[string]any{"name": "mail_send"}},
			http.StatusBadRequest, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, pol)))
			var fns []any
			for _, n := range tc.functions {
				fns = append(fns, legacyFunction(n))
			}
			extra := map[string]any{"functions": fns}
			for k, v := range tc.extra {
				extra[k] = v
			}
			var tools []map[string]any
			if tc.tools > 0 {
				tools = testCatalog(tc.tools)
			}
			body := chatRequest(t, msgs, tools, false, extra)
			x := send(t, base, body, nil)
			if x.status != tc.status {
				t.Fatalf("status %d %s; want %d", x.status, x.body, tc.status)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if tc.status == http.StatusBadRequest {
				e := gjson.GetBytes(x.body, "error")
				if e.Get("type").String() != "invalid_request_error" || e.Get("param").String() != "function_call" || !strings.Contains(e.Get("message").String(), `deny "mail_*"`) {
					t.Errorf("error %s; want an invalid_request_error of param function_call naming the rule", x.body)
				}
				if up.body != nil {
					t.Errorf("the upstream was called")
				}
				return
			}
			var got []string
			sent := gjson.GetBytes(up.body, "functions")
			sent.ForEach(func(_, f gjson.Result) bool {
				got = append(got, f.Get("name").String())
				return true
			})
			if !slices.Equal(got, tc.want) || (tc.want == nil) == sent.Exists() {
				t.Errorf("the upstream got functions %v (member present: %v); want %v", got, sent.Exists(), tc.want)
			}
			if tc.want == nil && gjson.GetBytes(up.body, "function_call").Exists() {
				t.Errorf("the upstream got a function_call without functions: %s", up.body)
			}
			if slices.Contains(toolNames(up.body), "mail_send") {
				t.Errorf("the upstream got the denied tool mail_send")
			}
			if tc.unchanged != bytes.Equal(up.body, body) {
				t.Errorf("the upstream got the client's body unchanged: %v, want %v", !tc.unchanged, tc.unchanged)
			}
		})
	}
}
