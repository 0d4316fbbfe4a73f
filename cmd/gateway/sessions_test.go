package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/tidwall/gjson"

	toolgate "github.com/toolgate/toolgate"
)

// searchingUpstream calls tool_search once per user turn, then answers in
// text, and records the tool names of every request it receives.
type searchingUpstream struct {
	mu    sync.Mutex
	tools [][]string
}

func (u *searchingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	var names []string
	req.Get("tools.#.function.name").ForEach(func(_, v gjson.Result) bool {
		names = append(names, v.String())
		return true
	})
	u.mu.Lock()
	u.tools = append(u.tools, names)
	u.mu.Unlock()
	msg := `{"role":"assistant","content":"done"}`
	if req.Get("messages.@reverse.0.role").String() == "user" && slices.Contains(names, "tool_search") {
		msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
			`"function":{"name":"tool_search","arguments":"{\"query\":\"merge a pull request\"}"}}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+msg+
		`,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
}

func (u *searchingUpstream) last() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools[len(u.tools)-1]
}

// startReplica runs the gateway command with the given policy text and
// returns its base URL.
func startReplica(t *testing.T, upstream, policyText string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(cfg, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--upstream", upstream, "--config", cfg}, out, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case addr := <-out.addr:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("gateway exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not announce its address")
	}
	return ""
}

func TestReplicasShareSessionsThroughRedis(t *testing.T) {
	var tools []json.RawMessage
	if err := json.Unmarshal(toolgate.SampleCatalog(), &tools); err != nil {
		t.Fatal(err)
	}
	chat := func(t *testing.T, base string, msgs ...string) {
		t.Helper()
		var m []map[string]string
		for i, c := range msgs {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			m = append(m, map[string]string{"role": role, "content": c})
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": m, "tools": tools})
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Session-ID", "conv-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		name   string
		store  func(t *testing.T) string
		shared bool
	}{
		{"replicas on one redis offer the tools another replica found", func(t *testing.T) string {
			return "redis://" + miniredis.RunT(t).Addr()
		}, true},
		{"replicas with in-process memory do not", func(*testing.T) string { return "memory" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &searchingUpstream{}
			srv := httptest.NewServer(up)
			defer srv.Close()
			policyText := "gateway:\n  mode: search\nsessions:\n  store: " + tc.store(t) + "\n"
			a := startReplica(t, srv.URL+"/v1", policyText)
			b := startReplica(t, srv.URL+"/v1", policyText)

			chat(t, a, "Please review and merge the open pull request.")
			found := up.last() // the re-issued request after the search
			if len(found) < 2 {
				t.Fatalf("replica a's search found nothing: %v", found)
			}
			chat(t, b, "Please review and merge the open pull request.", "done", "Now the next one.")
			first := up.tools[len(up.tools)-2] // b's first upstream request
			has := slices.Contains(first, found[1])
			if has != tc.shared {
				t.Errorf("replica b's first request %v; found on a: %v; shared = %v", first, found, has)
			}
		})
	}
}
