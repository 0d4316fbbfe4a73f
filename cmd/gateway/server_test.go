package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// TestShutdownDrainsThenEndsWhatIsLeftWithAnError: SIGTERM (ctx) first
// fails readiness for the drain delay while requests are still served,
// then waits for requests in flight up to the drain timeout; what is still
// running then, or at a second signal, is canceled with
// proxy.ErrShuttingDown as its cause so it can answer with an error.
func TestShutdownDrainsThenEndsWhatIsLeftWithAnError(t *testing.T) {
	tests := []struct {
		name       string
		work       time.Duration // how long /work takes unless canceled
		delay      time.Duration
		timeout    time.Duration
		force      time.Duration // a second signal this long after the first; 0 none
		wantStatus int           // /work's answer
		wantBody   string
		wantWithin time.Duration // run returns this soon after the first signal
	}{
		{"a request that ends within the drain timeout is answered whole", 300 * time.Millisecond, 0, 5 * time.Second, 0, http.StatusOK, "done", 2 * time.Second},
		{"a request still running when the drain time is up ends with the shutdown's error", 30 * time.Second, 0, 300 * time.Millisecond, 0, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
		{"a second signal ends the drain at once", 30 * time.Second, 0, 20 * time.Second, 200 * time.Millisecond, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
		{"a second signal during the drain delay ends it too", 30 * time.Second, 20 * time.Second, 20 * time.Second, 200 * time.Millisecond, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			var once sync.Once
			mux := http.NewServeMux()
			mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(started) })
				select {
				case <-time.After(tt.work):
					_, _ = io.WriteString(w, "done")
				case <-r.Context().Done():
					if errors.Is(context.Cause(r.Context()), proxy.ErrShuttingDown) {
						http.Error(w, "shutting down", http.StatusServiceUnavailable)
					}
				}
			})
			ctx, signal := context.WithCancel(context.Background())
			out := &addrWriter{addr: make(chan string, 1)}
			srv := &httpServer{addr: "127.0.0.1:0", handler: mux, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stdout: out, drainDelay: tt.delay, drainTimeout: tt.timeout}
			force := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- srv.run(ctx, force) }()
			addr := <-out.addr
			type answer struct {
				status int
				body   string
				err    error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/work")
				if err != nil {
					got <- answer{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- answer{resp.StatusCode, string(b), err}
			}()
			<-started
			signal()
			at := time.Now()
			if tt.force > 0 {
				time.AfterFunc(tt.force, func() { close(force) })
			}
			a := <-got
			if a.err != nil || a.status != tt.wantStatus || !strings.Contains(a.body, tt.wantBody) {
				t.Errorf("/work answered %d %q (err %v), want %d %q", a.status, a.body, a.err, tt.wantStatus, tt.wantBody)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
				if took := time.Since(at); took > tt.wantWithin {
					t.Errorf("run returned %s after the signal, want within %s", took, tt.wantWithin)
				}
			case <-time.After(tt.wantWithin + 5*time.Second):
				t.Fatal("run did not return")
			}
		})
	}
}

func TestHealthzFailsWhileTheDrainDelayStillServes(t *testing.T) {
	mux := http.NewServeMux()
	var srv *httpServer
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !srv.ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })
	ctx, signal := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	srv = &httpServer{addr: "127.0.0.1:0", handler: mux, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stdout: out, drainDelay: time.Second, drainTimeout: time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.run(ctx, nil) }()
	addr := <-out.addr
	status := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/healthz"); got != http.StatusOK {
		t.Errorf("before the signal /healthz = %d, want 200", got)
	}
	signal()
	time.Sleep(100 * time.Millisecond) // the server sees ctx end
	if got := status("/healthz"); got != http.StatusServiceUnavailable {
		t.Errorf("during the drain delay /healthz = %d, want 503", got)
	}
	if got := status("/work"); got != http.StatusOK {
		t.Errorf("during the drain delay /work = %d, want 200: requests are still served", got)
	}
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

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
