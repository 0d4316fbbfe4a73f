package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAClientOfEitherHTTPVersionGetsItsStreamedTurn: clients that speak
// HTTP/2 over plain HTTP (curl --http2-prior-knowledge, a service mesh's
// sidecar, gRPC-minded proxies) are served as HTTP/1.1 clients are: a
// streamed turn's events as they come, its trailers, the body limit, and
// the drain's error event at shutdown. Before, the server spoke HTTP/1
// only and such a client's first request failed.
func TestAClientOfEitherHTTPVersionGetsItsStreamedTurn(t *testing.T) {
	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	const finish = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	search := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"flux\"}"}}]}`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	var tools []map[string]any
	for i := 0; i < 30; i++ {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": fmt.Sprintf("gadget_%02d", i), "description": fmt.Sprintf("Compute the flux of gadget %d.", i),
			"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}})
	}
	request := func(say string, pad int) []byte {
		b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "tools": tools,
			"messages": []map[string]string{{"role": "user", "content": say + strings.Repeat(" ", pad)}}})
		return b
	}
	for _, tc := range []struct {
		name  string
		proto func(*http.Protocols)
		major int
	}{
		{"an HTTP/1.1 client", func(p *http.Protocols) { p.SetHTTP1(true) }, 1},
		{"an HTTP/2 client without TLS", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := make(chan struct{}) // the client has the first words
			var waited atomic.Bool
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				switch {
				case !bytes.Contains(body, []byte(`"role":"tool"`)):
					_, _ = io.WriteString(w, search)
				case bytes.Contains(body, []byte("Stall.")):
					_, _ = io.WriteString(w, chunk(`{"content":"Thinking"}`))
					fl.Flush()
					<-r.Context().Done()
				default:
					_, _ = io.WriteString(w, chunk(`{"content":"Hello"}`))
					fl.Flush()
					select {
					case <-read:
					case <-time.After(2 * time.Second):
						waited.Store(true)
					}
					_, _ = io.WriteString(w, chunk(`{"content":", world."}`)+finish)
				}
			}))
			defer up.Close()
			cfg := filepath.Join(t.TempDir(), "tools.yaml")
			if err := os.WriteFile(cfg, []byte("gateway:\n  mode: search\n  body_limit: 65536\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, signal := context.WithCancel(context.Background())
			defer signal()
			out := &addrWriter{addr: make(chan string, 1)}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--upstream", up.URL + "/v1", "--config", cfg, "--drain-timeout", "300ms"}, out, io.Discard)
			}()
			var base string
			select {
			case addr := <-out.addr:
				base = "http://" + addr + "/v1/chat/completions"
			case err := <-done:
				t.Fatalf("the gateway exited: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the gateway did not announce its address")
			}
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tc.proto(tr.Protocols)
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			post := func(body []byte) *http.Response {
				t.Helper()
				resp, err := client.Post(base, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != tc.major {
					t.Errorf("answered in %s, want HTTP/%d", resp.Proto, tc.major)
				}
				return resp
			}

			resp := post(request("Compute the flux.", 0))
			var b strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				b.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "Hello") && !strings.Contains(b.String(), ", world.") {
					close(read)
				}
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), ", world.") || !strings.HasSuffix(b.String(), "data: [DONE]\n\n") {
				t.Errorf("the turn answered %d: %s", resp.StatusCode, b.String())
			}
			if waited.Load() {
				t.Errorf("the client had none of the answer while the upstream wrote it: the stream was not flushed")
			}
			if got := resp.Trailer.Get("X-Toolgate-Rounds"); got != "2" {
				t.Errorf("the X-Toolgate-Rounds trailer is %q, want 2 (trailers %v)", got, resp.Trailer)
			}

			resp = post(request("Compute the flux.", 70000))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("a body over the limit answered %d, want 413", resp.StatusCode)
			}

			resp = post(request("Stall.", 0))
			defer resp.Body.Close()
			first := make([]byte, 1)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatalf("the stalled turn sent nothing: %v", err)
			}
			signal()
			rest, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(rest), "gateway_shutting_down") {
				t.Errorf("the stream cut by the drain ended with %q, want the gateway_shutting_down error event", rest)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the gateway: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the gateway did not stop")
			}
		})
	}
}
