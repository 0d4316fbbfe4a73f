package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestAPathWithEmptySegmentsReachesTheTurnItNames: a client that joins a
// base URL ending in /v1/ with /chat/completions asks for
// /v1//chat/completions, and one may add a trailing slash. Matched as
// written, those turns went upstream raw: every tool, past the policy.
// They reach the turn's handler and the upstream gets the canonical path;
// a path the gateway does not serve still passes through as written.
func TestAPathWithEmptySegmentsReachesTheTurnItNames(t *testing.T) {
	chat := chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(40), false, nil)
	responses, err := json.Marshal(map[string]any{"model": "gpt-test", "input": twoStepTask.Prompt, "tools": sdkResponseTools(40)})
	if err != nil {
		t.Fatal(err)
	}
	messages := anthropicRequest(t, 40)
	tests := []struct {
		name, method, path string
		body               []byte
		want               string // the path the upstream gets
		turn               bool   // the gateway rewrote the request
	}{
		{"a chat turn after an empty segment is rewritten", http.MethodPost, "/v1//chat/completions", chat, "/v1/chat/completions", true},
		{"a chat turn with a trailing slash is rewritten", http.MethodPost, "/v1/chat/completions/", chat, "/v1/chat/completions", true},
		{"a chat turn with both is rewritten", http.MethodPost, "/v1//chat//completions/", chat, "/v1/chat/completions", true},
		{"a Responses turn after an empty segment is rewritten", http.MethodPost, "/v1//responses", responses, "/v1/responses", true},
		{"a Messages turn with a trailing slash is rewritten", http.MethodPost, "/v1/messages/", messages, "/v1/messages", true},
		{"a path the gateway does not serve passes through as written", http.MethodGet, "/v1//models", nil, "/v1//models", false},
		{"so does one with a trailing slash", http.MethodGet, "/v1/models/", nil, "/v1/models/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			var mu sync.Mutex
			var paths []string
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.EscapedPath())
				mu.Unlock()
				model.ServeHTTP(w, r)
			})
			base := strings.TrimSuffix(newTestGateway(t, up), "/v1")
			req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(string(tt.body)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if len(paths) == 0 || paths[0] != tt.want {
				t.Fatalf("the upstream got paths %v, want %s", paths, tt.want)
			}
			if !tt.turn {
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
			if recs := model.Records(); len(recs) == 0 || recs[0].Tools >= 40 || !slices.Contains(recs[0].Names, SearchToolName) {
				t.Errorf("the upstream's first requests %+v; want the gateway's short list with %s", recs, SearchToolName)
			}
		})
	}
}

// TestAResponseRetrievedByAPathWithAnEmptySegmentIsTheTurnShown: a
// streamed turn that searched shows its first round's id, which the
// upstream stores as a call of tool_search; retrieved through
// /v1//responses/{id}, it went upstream raw and the client got that
// round.
func TestAResponseRetrievedByAPathWithAnEmptySegmentIsTheTurnShown(t *testing.T) {
	for _, path := range []string{"/v1//responses/", "/v1/responses//"} {
		t.Run("a GET of "+path+"{id} gets the turn's answer, not its search round", func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			base := newTestGateway(t, model)
			_, shown := storedSearchedTurn(t, model, base, true)
			req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(base, "/v1")+path+shown.ID, nil)
			req.Header.Set("Authorization", "Bearer sk-sdk")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got responses.Response
			if err := json.Unmarshal(b, &got); resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
			}
			names, _ := callOutputs(&got)
			if want, _ := callOutputs(shown); got.ID != shown.ID || !slices.Equal(names, want) {
				t.Errorf("retrieved %s calling %v; the client was shown %s calling %v", got.ID, names, shown.ID, want)
			}
		})
	}
}
