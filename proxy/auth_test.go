package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
)

// headerRecorder serves next and keeps the headers of every request.
type headerRecorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerRecorder) headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// TestTheUpstreamKeyReplacesTheClientsCredentialWhereItsAPIReadsIt sends
// requests of each API and credential style through a gateway with and
// without gateway.upstream_key, and checks what the upstream received on
// every call: the operator's key in the header the client's API reads a
// key from, and nowhere a credential of the client's.
func TestTheUpstreamKeyReplacesTheClientsCredentialWhereItsAPIReadsIt(t *testing.T) {
	chat := chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(40), false, nil)
	messages := anthropicRequest(t, 40)
	for _, tc := range []struct {
		name       string
		method     string
		path       string
		body       []byte
		header     map[string]string
		key        string // the policy's upstream_key
		wantHeader string // where the upstream must find the credential
		want       string
	}{
		{"an OpenAI client's bearer key and account are replaced by the operator's key", "POST", "/v1/chat/completions", chat,
			map[string]string{"Authorization": "Bearer sk-client", "OpenAI-Organization": "org-client", "OpenAI-Project": "proj-client"}, "sk-operator", "Authorization", "Bearer sk-operator"},
		{"a passed-through request's bearer key is replaced too", "GET", "/v1/models", nil,
			map[string]string{"Authorization": "Bearer sk-client"}, "sk-operator", "Authorization", "Bearer sk-operator"},
		{"an Azure client's api-key is replaced in api-key", "POST", "/v1/deployments/gpt/chat/completions", chat,
			map[string]string{"Api-Key": "az-client"}, "az-operator", "Api-Key", "az-operator"},
		{"an Anthropic client's x-api-key is replaced in x-api-key", "POST", "/v1/messages", messages,
			map[string]string{"X-Api-Key": "sk-ant-client", "Anthropic-Version": "2023-06-01"}, "sk-ant-operator", "X-Api-Key", "sk-ant-operator"},
		{"an Anthropic client's OAuth token gives way to the key in x-api-key", "POST", "/v1/messages", messages,
			map[string]string{"Authorization": "Bearer oauth-client", "Anthropic-Version": "2023-06-01"}, "sk-ant-operator", "X-Api-Key", "sk-ant-operator"},
		{"without an upstream key the client's credential passes through", "POST", "/v1/messages", messages,
			map[string]string{"X-Api-Key": "sk-ant-client", "Anthropic-Version": "2023-06-01"}, "", "X-Api-Key", "sk-ant-client"},
		{"without an upstream key the client's account passes through", "POST", "/v1/chat/completions", chat,
			map[string]string{"Authorization": "Bearer sk-client", "OpenAI-Organization": "org-client"}, "", "OpenAI-Organization", "org-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &headerRecorder{next: &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}}
			yaml := "{}\n"
			if tc.key != "" {
				yaml = "gateway:\n  upstream_key: " + tc.key + "\n"
			}
			base := strings.TrimSuffix(newTestGateway(t, rec, withPolicy(loadPolicy(t, yaml))), "/v1")
			req, err := http.NewRequest(tc.method, base+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			seen := rec.headers()
			if len(seen) == 0 {
				t.Fatal("the upstream got no request")
			}
			for i, h := range seen {
				if got := h.Get(tc.wantHeader); got != tc.want {
					t.Errorf("call %d: %s = %q, want %q", i, tc.wantHeader, got, tc.want)
				}
				if tc.key == "" {
					continue
				}
				for name, vals := range h {
					for _, v := range vals {
						if strings.HasSuffix(v, "-client") {
							t.Errorf("call %d: the upstream got the client's credential in %s: %q", i, name, v)
						}
					}
				}
			}
		})
	}
}

// anthropicRequest is a Messages API request of the task's prompt with
// testCatalog(n) as Anthropic's tools.
func anthropicRequest(t *testing.T, n int) []byte {
	t.Helper()
	var tools []map[string]any
	for _, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, map[string]any{"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]})
	}
	b, err := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 256, "tools": tools,
		"messages": []map[string]any{{"role": "user", "content": twoStepTask.Prompt}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestATurnKeepsTheUpstreamKeyItStartedWithAcrossAReload rotates the
// policy's upstream_key while a turn's first round is being answered (a
// search round, so the turn has a second), and checks that every round
// of the turn went to the upstream with the key the turn started on: a
// turn split over two accounts loses the first account's stored rounds.
func TestATurnKeepsTheUpstreamKeyItStartedWithAcrossAReload(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "a whole answer's rounds all carry the first key"
		if stream {
			name = "a streamed answer's rounds all carry the first key"
		}
		t.Run(name, func(t *testing.T) {
			old := loadPolicy(t, "gateway: {mode: search, upstream_key: key-old}\n")
			rotated := loadPolicy(t, "gateway: {mode: search, upstream_key: key-new}\n")
			var live atomic.Pointer[policy.Snapshot]
			live.Store(old)
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			rec := &headerRecorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				live.Store(rotated) // the operator's reload lands mid-turn
				model.ServeHTTP(w, r)
			})}
			base := newTestGateway(t, rec, func(g *Gateway) { g.Policy = live.Load })
			resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(40), stream, nil), nil)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			seen := rec.headers()
			if len(seen) < 2 {
				t.Fatalf("the upstream got %d requests, want a search round and another", len(seen))
			}
			for i, h := range seen {
				if got := h.Get("Authorization"); got != "Bearer key-old" {
					t.Errorf("round %d: Authorization = %q, want the key the turn started with", i, got)
				}
			}
		})
	}
}
