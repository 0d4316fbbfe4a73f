package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// sameJSON reports whether a and b are the same JSON value, whitespace
// aside.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, []byte(a)); err != nil {
		t.Fatalf("compacting %q: %v", a, err)
	}
	if err := json.Compact(&cb, []byte(b)); err != nil {
		t.Fatalf("compacting %q: %v", b, err)
	}
	return ca.String() == cb.String()
}

func TestToolCacheKeepsEachToolCompact(t *testing.T) {
	long := strings.Repeat("word ", headLen/5)
	tests := []struct {
		name, tool string
	}{
		{"an indented tool loses its indentation", "{\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"a\",\n      \"description\": \"" + long + "\"\n    }\n  }"},
		{"spaces after separators go, spaces inside strings stay", `{"type": "function", "function": {"name": "a", "description": "` + long + ` {\"x\": 1}"}}`},
		{"a compact tool is kept as it is", `{"type":"function","function":{"name":"a","description":"` + long + `"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "[" + tt.tool + "]"
			req, err := rewrite.ParseRequestCached([]byte(`{"messages":[],"tools":`+raw+`}`), newToolCache(4).space(routeChat))
			if err != nil {
				t.Fatal(err)
			}
			got := req.Tools[0].Raw
			if !sameJSON(t, got, tt.tool) {
				t.Errorf("cached tool %s is not the client's %s", got, tt.tool)
			}
			var want bytes.Buffer
			_ = json.Compact(&want, []byte(tt.tool))
			if got != want.String() {
				t.Errorf("cached tool = %s, want it compact: %s", got, want.String())
			}
		})
	}
}

// TestUpstreamGetsCompactToolsOfAnIndentedCatalog sends a pretty-printed
// catalog, as some clients do: every tool the upstream receives is the
// client's definition, byte for byte apart from whitespace between tokens.
func TestUpstreamGetsCompactToolsOfAnIndentedCatalog(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	base := newTestGateway(t, up)
	tools := testCatalog(40)
	body, err := json.MarshalIndent(map[string]any{"model": "gpt-test", "tools": tools,
		"messages": []map[string]any{{"role": "user", "content": "Create an issue about the login bug"}}}, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	client := map[string]string{}
	gjson.GetBytes(body, "tools").ForEach(func(_, v gjson.Result) bool {
		client[v.Get("function.name").String()] = v.Raw
		return true
	})
	for turn := range 2 { // the first parses the catalog, the second hits the cache
		resp := post(t, base, body, map[string]string{"X-Session-ID": "compact"})
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: status %d", turn, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(bodies))
	}
	for i, b := range bodies {
		sent := gjson.Get(b, "tools").Array()
		if len(sent) < 2 {
			t.Fatalf("request %d: %d tools sent, want tool_search and preselected tools", i, len(sent))
		}
		for _, tl := range sent {
			name := tl.Get("function.name").String()
			orig, ok := client[name]
			if !ok {
				continue // tool_search
			}
			if strings.ContainsAny(tl.Raw, "\n") || strings.Contains(tl.Raw, `": `) {
				t.Errorf("request %d: %s sent with whitespace: %s", i, name, tl.Raw)
			}
			if !sameJSON(t, tl.Raw, orig) {
				t.Errorf("request %d: %s sent as %s, the client defined %s", i, name, tl.Raw, orig)
			}
		}
	}
}
