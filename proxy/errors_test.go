package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

func TestBadRequestsGetOpenAIShapedErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
		param      string // the raw JSON of error.param
	}{
		{"malformed JSON is a 400 that names no parameter", `{"model":"m","messages":[`, 400, "not valid JSON", "null"},
		{"a body that is not an object is a 400 that names no parameter", `[1,2]`, 400, "JSON object", "null"},
		{"missing messages is a 400 that names messages", `{"model":"m"}`, 400, "messages", `"messages"`},
		{"tools that is not an array is a 400 that names tools", `{"model":"m","messages":[],"tools":{"a":1}}`, 400, "tools must be an array", `"tools"`},
		{"a tool without a name is a 400 that names tools", `{"model":"m","messages":[],"tools":[{"type":"function","function":{}}]}`, 400, "no function name", `"tools"`},
		{"deep nesting is a 400 that names no parameter", `{"model":"m","messages":[],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, 400, "nesting", "null"},
		{"invalid UTF-8 is a 400 that names no parameter", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, "UTF-8", "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, &recorder{answer: plainAnswer})
			resp := post(t, base, []byte(tc.body), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := gjson.GetBytes(b, "error")
			if resp.StatusCode != tc.status || !strings.Contains(e.Get("message").String(), tc.msg) || !e.Get("type").Exists() || !e.Get("code").Exists() {
				t.Errorf("status %d body %s; want %d with an error object mentioning %q", resp.StatusCode, b, tc.status, tc.msg)
			}
			if got := e.Get("param"); !got.Exists() || got.Raw != tc.param {
				t.Errorf("error %s; want param %s", b, tc.param)
			}
		})
	}
}

// TestGatewayErrorsHaveTheFourMembersOfOpenAIs: every error the gateway
// makes has message, type, param and code, as OpenAI's do, in that
// order, param null when no parameter is at fault (SDKs read it).
func TestGatewayErrorsHaveTheFourMembersOfOpenAIs(t *testing.T) {
	base := newTestGateway(t, &recorder{answer: plainAnswer}, func(g *Gateway) { g.AdminToken = "adm" })
	root := strings.TrimSuffix(base, "/v1")
	for _, tc := range []struct {
		name, method, url, body string
		want                    string
	}{
		{"a body that is not JSON", http.MethodPost, base + "/chat/completions", `{"model":`,
			`{"error":{"message":"invalid request: body is not valid JSON","type":"invalid_request_error","param":null,"code":"invalid_request"}}`},
		{"an unknown path", http.MethodGet, root + "/nope", "",
			`{"error":{"message":"unknown path /nope","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{"a debug request without the admin token", http.MethodGet, root + "/debug/sessions/x", "",
			`{"error":{"message":"debug endpoints need a valid X-Toolgate-Admin-Token","type":"invalid_request_error","param":null,"code":"unauthorized"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tc.want {
				t.Errorf("body %s\nwant %s", b, tc.want)
			}
		})
	}
}

func TestUpstreamFaultsReachTheClientHonestly(t *testing.T) {
	big := func(stream bool) []byte {
		return chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(30), stream, nil)
	}
	t.Run("a 429 keeps its status, body and Retry-After", func(t *testing.T) {
		up := &recorder{status: 429, answer: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, header: map[string]string{"Retry-After": "7", "X-Ratelimit-Remaining-Requests": "0"}}
		base := newTestGateway(t, up)
		for _, stream := range []bool{false, true} {
			resp := post(t, base, big(stream), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" || string(b) != up.answer {
				t.Errorf("stream=%v: %d %v %s", stream, resp.StatusCode, resp.Header, b)
			}
		}
	})
	t.Run("a 500 to the first round is relayed with its body, streamed or not", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(500)
				_, _ = io.WriteString(w, `{"error":{"message":"boom","type":"server_error","code":null}}`)
			})
			base := newTestGateway(t, up)
			resp := post(t, base, big(stream), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 500 || calls.Load() != 1 || gjson.GetBytes(b, "error.message").String() != "boom" {
				t.Errorf("stream=%v: status %d after %d upstream calls, body %s; want the upstream's 500 after 1", stream, resp.StatusCode, calls.Load(), b)
			}
		}
	})
	t.Run("a 200 that is not JSON is a 502", func(t *testing.T) {
		base := newTestGateway(t, &recorder{answer: "<html>oops</html>"})
		resp := post(t, base, big(false), nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || gjson.GetBytes(b, "error.code").String() != "upstream_bad_response" {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("running out of file descriptors is the gateway's 503, not the upstream's 502", func(t *testing.T) {
		noFiles := roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
		})
		base := newTestGateway(t, &recorder{}, func(g *Gateway) { g.Transport = noFiles })
		for _, path := range []string{"/chat/completions", "/embeddings"} {
			x := sendTo(t, base, path, big(false), nil)
			wantError(t, x, http.StatusServiceUnavailable, "gateway_overloaded")
			// A kept connection would hold a descriptor the gateway lacks.
			if !x.closed {
				t.Errorf("%s: the connection is kept (headers %v), want Connection: close", path, x.header)
			}
		}
	})
	t.Run("an unreachable upstream is a 502", func(t *testing.T) {
		dead, _ := url.Parse("http://127.0.0.1:1/v1")
		base := newTestGateway(t, &recorder{}, func(g *Gateway) { g.Upstream = dead })
		for _, stream := range []bool{false, true} {
			resp := post(t, base, big(stream), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 502 || gjson.GetBytes(b, "error.code").String() != "upstream_unreachable" || resp.Header.Get("X-Should-Retry") != "" {
				t.Errorf("stream=%v: %d %s, X-Should-Retry %q; want a 502 the client may retry, as it retries a refused connection", stream, resp.StatusCode, b, resp.Header.Get("X-Should-Retry"))
			}
		}
	})
}

// TestRequestsCutByTheShutdownEndWithAnError: a server whose drain time
// runs out cancels its requests with ErrShuttingDown as the cause. Those
// requests must answer with an error the client can act on (retry
// elsewhere), where a client that left gets nothing.
func TestRequestsCutByTheShutdownEndWithAnError(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		body   func(t *testing.T) []byte
		before string // what the upstream sends before it hangs
	}{
		{"a whole answer being waited on is a 503", "/chat/completions", func(t *testing.T) []byte { return bigRequest(t, false) }, ""},
		{"a stream that has begun ends with an error event", "/chat/completions", func(t *testing.T) []byte { return bigRequest(t, true) }, textChunk("Working on it. ")},
		{"a passed-through request being waited on is a 503", "/embeddings", func(*testing.T) []byte { return []byte(`{"model":"e","input":"x"}`) }, ""},
		{"a stream of a turn without tools that has begun ends with an error event", "/chat/completions", func(t *testing.T) []byte {
			return chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, nil, true, nil)
		}, textChunk("Working on it. ")},
		{"a passed-through stream that has begun ends with an error event", "/completions", func(*testing.T) []byte {
			return []byte(`{"model":"m","prompt":"x","stream":true}`)
		}, textChunk("Working on it. ")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := make(chan struct{})
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if tt.before != "" {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, tt.before)
					w.(http.Flusher).Flush()
				}
				close(reached)
				<-r.Context().Done()
			})
			srv := httptest.NewUnstartedServer(testGateway(t, up).Handler())
			base, cut := context.WithCancelCause(context.Background())
			srv.Config.BaseContext = func(net.Listener) context.Context { return base }
			srv.Start()
			t.Cleanup(srv.Close)
			go func() {
				<-reached
				time.Sleep(50 * time.Millisecond) // the gateway relays what came first
				cut(ErrShuttingDown)
			}()
			x := sendTo(t, srv.URL+"/v1", tt.path, tt.body(t), nil)
			if tt.before == "" {
				wantError(t, x, http.StatusServiceUnavailable, "gateway_shutting_down")
				return
			}
			rep := readStream(t, bytes.NewReader(x.body))
			last := ""
			if len(rep.raw) > 0 {
				last = rep.raw[len(rep.raw)-1]
			}
			if x.status != http.StatusOK || rep.content != "Working on it. " || gjson.Get(last, "error.code").String() != "gateway_shutting_down" || rep.dones != 0 {
				t.Errorf("status %d, content %q, last event %s, [DONE] %d; want the text, then a gateway_shutting_down error event, no [DONE]", x.status, rep.content, last, rep.dones)
			}
		})
	}
}

// TestFailuresAreLoggedAtTheLevelOfWhoseFaultTheyAre: a client's mistake
// is Info (any client can send them, and at Warn they flooded the log an
// operator watches), another party's failure Warn, the gateway's own Error.
func TestFailuresAreLoggedAtTheLevelOfWhoseFaultTheyAre(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a client's bad request is Info", fmt.Errorf("%w: 'messages' must be an array", rewrite.ErrBadRequest), "INFO"},
		{"a body too large is Info", ErrBodyTooLarge, "INFO"},
		{"an unreachable upstream is Warn", ErrUpstreamUnreachable, "WARN"},
		{"an upstream timeout is Warn", ErrUpstreamTimeout, "WARN"},
		{"the gateway's own failure is Error", errors.New("a bug"), "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncBuffer{}
			g := &Gateway{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			rec := httptest.NewRecorder()
			g.writeError(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), tt.err)
			if got := gjson.Get(logs.String(), "level").String(); got != tt.want {
				t.Errorf("logged at %q, want %q: %s", got, tt.want, logs.String())
			}
		})
	}
}

// TestAHugeToolChoiceNameIsClippedInTheErrorAndTheLog: a tool_choice
// naming a hidden tool is refused with the name in the message, which is
// logged too; a 1 MB name made a 1 MB log line.
func TestAHugeToolChoiceNameIsClippedInTheErrorAndTheLog(t *testing.T) {
	logs := &syncBuffer{}
	policyText := "deny: [\"x*\"]\n"
	base := newTestGateway(t, &recorder{answer: plainAnswer}, withPolicy(loadPolicy(t, policyText)), func(g *Gateway) {
		g.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	name := "x" + strings.Repeat("a", 1<<20)
	extra := map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": name}}}
	tools := append(testCatalog(30), map[string]any{"type": "function", "function": map[string]any{"name": name, "description": "d", "parameters": map[string]any{"type": "object"}}})
	x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, tools, false, extra), nil)
	if x.status != http.StatusBadRequest {
		t.Fatalf("status %d: %.300s", x.status, x.body)
	}
	if len(x.body) > 2000 || len(logs.String()) > 4000 {
		t.Errorf("the answer is %d bytes and the log %d; want both clipped", len(x.body), len(logs.String()))
	}
}

func TestWorkForAClientThatLeftFailsQuietly(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want slog.Level
	}{
		{"a failure while the client waits is a warning", context.Background(), slog.LevelWarn},
		{"a failure after the client left is debug", gone, slog.LevelDebug},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureLevel(tt.ctx); got != tt.want {
				t.Errorf("level %v, want %v", got, tt.want)
			}
		})
	}
}

func TestACompileWithoutRoomIsARetryable503(t *testing.T) {
	g := testGateway(t, &recorder{})
	busy := fmt.Errorf("compiling catalog: %w", fmt.Errorf("compiling catalog k: %w: no room for 4096 KB of tool text within 5s", selector.ErrCompileBusy))
	for _, route := range []string{routeChat, routeMessages} {
		t.Run("on the "+route+" route the client gets a 503 gateway_overloaded with Retry-After", func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := g.track(rec, route)
			g.writeError(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), busy)
			w.done(context.Background())
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
			}
			if body := rec.Body.String(); !strings.Contains(body, "overloaded") || !strings.Contains(body, "--max-compile-mb") {
				t.Errorf("body %s; want an overloaded error naming --max-compile-mb", body)
			}
		})
	}
}

// TestAnErrorAnsweredWith200IsTheUpstreamsError: OpenRouter answers 200
// once it has started on a request, and a failure after that comes as the
// 200's whole body, {"error":{...}} without choices. The client gets that
// body as it came, under the status its code names (502 when it names
// none), whichever round it ends. Before, it got the gateway's 502
// "upstream response has no choices array", without the provider's
// message, code and metadata.
func TestAnErrorAnsweredWith200IsTheUpstreamsError(t *testing.T) {
	const (
		rateLimited = `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":\"rate limited\"}","provider_name":"Chutes"}},"user_id":"user_1"}`
		noStatus    = `{"error":{"message":"The provider failed","code":"server_error"}}`
	)
	for _, tc := range []struct {
		name    string
		answers []string // the upstream's bodies, all with 200, in order
		status  int
	}{
		{"an error to the first round keeps the status its code names", []string{rateLimited}, http.StatusTooManyRequests},
		{"an error to the round after a search keeps the status its code names", []string{searchReply, rateLimited}, http.StatusTooManyRequests},
		{"an error whose code is no HTTP status is a 502 with the upstream's body", []string{searchReply, noStatus}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				n := int(calls.Add(1)) - 1
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Generation-Id", "gen-1")
				_, _ = io.WriteString(w, tc.answers[min(n, len(tc.answers)-1)])
			})
			base := newTestGateway(t, up, searchOnly(t))
			x := send(t, base, bigRequest(t, false), nil)
			want := tc.answers[len(tc.answers)-1]
			if x.status != tc.status || string(x.body) != want {
				t.Errorf("got %d %s; want %d with the upstream's body %s", x.status, x.body, tc.status, want)
			}
			if n := int(calls.Load()); n != len(tc.answers) {
				t.Errorf("the upstream got %d requests, want %d", n, len(tc.answers))
			}
			if got := x.header.Get("X-Generation-Id"); got != "gen-1" {
				t.Errorf("X-Generation-Id = %q, want the upstream's headers with its error", got)
			}
		})
	}
}

// TestAStreamAnsweredWithAJSONErrorIsTheUpstreamsError: to a streamed
// request OpenRouter may answer 200 with a JSON body {"error":{...}} in
// place of the stream. It read as a stream that ended early: the client
// got the gateway's own 502 "stream ended early", without the provider's
// message. Before the stream starts (a search round shows nothing) the
// client gets the upstream's body under the status its code names; after
// a search round's text has started it, an error event with the
// upstream's message.
func TestAStreamAnsweredWithAJSONErrorIsTheUpstreamsError(t *testing.T) {
	const rateLimited = `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"rate limited"}}}`
	search := callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`) + finishChunk("tool_calls") + doneEvent
	said := textChunk("Let me look.") + search
	for _, tc := range []struct {
		name   string
		rounds []string // "" is the JSON error
		status int
	}{
		{"an error to the first round is the upstream's status and body", []string{""}, http.StatusTooManyRequests},
		{"an error to the round after a silent search is the upstream's status and body", []string{search, ""}, http.StatusTooManyRequests},
		{"an error to the round after a search that spoke ends the stream with the upstream's message", []string{said, ""}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				n := int(calls.Add(1)) - 1
				if round := tc.rounds[min(n, len(tc.rounds)-1)]; round != "" {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, round)
					return
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				_, _ = io.WriteString(w, rateLimited)
			})
			base := newTestGateway(t, up, searchOnly(t))
			x := send(t, base, bigRequest(t, true), nil)
			if x.status != tc.status {
				t.Fatalf("status %d, want %d: %s", x.status, tc.status, x.body)
			}
			if n := int(calls.Load()); n != len(tc.rounds) {
				t.Errorf("the upstream got %d requests, want %d", n, len(tc.rounds))
			}
			if tc.status != http.StatusOK {
				if string(x.body) != rateLimited {
					t.Errorf("body %s; want the upstream's %s", x.body, rateLimited)
				}
				return
			}
			if !strings.Contains(string(x.body), "Provider returned error") || strings.Contains(string(x.body), "[DONE]") {
				t.Errorf("the stream does not end with the upstream's error:\n%s", x.body)
			}
		})
	}
}
