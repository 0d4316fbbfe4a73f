package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// loadPolicy compiles a tools.yaml source into a snapshot.
func loadPolicy(t testing.TB, src string) *policy.Snapshot {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := policy.Load(path)
	if err != nil {
		t.Fatalf("loading policy: %v", err)
	}
	return s
}

func withPolicy(s *policy.Snapshot) func(*Gateway) {
	return func(g *Gateway) { g.Policy = func() *policy.Snapshot { return s } }
}

// Chat Completions stream chunks, as an upstream writes them.
func sseData(v string) string { return "data: " + v + "\n\n" }

func textChunk(content string) string {
	return sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content))
}

func callChunk(index int, id, name, args string) string {
	return sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]},"finish_reason":null}]}`, index, id, name, args))
}

func finishChunk(reason string) string {
	return sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, reason))
}

// waitGone blocks an upstream handler until its client (the gateway) hangs
// up, or 10 s pass. The body is drained first: only then does the server
// notice a closed connection and cancel the request's context.
func waitGone(r *http.Request) bool {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

const doneEvent = "data: [DONE]\n\n"

// searchRound is a streamed round in which the model only calls tool_search.
var searchRound = callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`) + finishChunk("tool_calls") + doneEvent

// searchReply is the same round, not streamed.
const searchReply = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue repository\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`

// sseHandler answers every request with a stream: the n-th request gets
// rounds[n] (the last one repeats), written and flushed in one piece.
func sseHandler(calls *atomic.Int32, rounds ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, rounds[min(n, len(rounds)-1)])
	}
}

// exchange is one client request and what came back.
type exchange struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
	closed bool // the gateway said it closes the connection (Connection: close)
}

// send posts body to the chat route with a deadline, so a gateway that
// hangs fails the test instead of stalling it.
func send(t *testing.T, base string, body []byte, hdr map[string]string) exchange {
	t.Helper()
	return sendTo(t, base, "/chat/completions", body, hdr)
}

// sendTo is send to base+path.
func sendTo(t *testing.T, base, path string, body []byte, hdr map[string]string) exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("posting: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the gateway's answer after %s: %v", time.Since(start), err)
	}
	return exchange{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start), closed: resp.Close}
}

func bigRequest(t *testing.T, stream bool) []byte {
	return chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}, testCatalog(30), stream, nil)
}

// wantError checks an OpenAI-shaped error body with the given code.
func wantError(t *testing.T, x exchange, status int, code string) {
	t.Helper()
	e := gjson.GetBytes(x.body, "error")
	if x.status != status || e.Get("code").String() != code || e.Get("message").String() == "" || e.Get("type").String() == "" || !e.Get("param").Exists() {
		t.Errorf("got %d %s; want %d with an OpenAI error of code %q", x.status, x.body, status, code)
	}
}

func TestUpstreamTimeoutsAre504(t *testing.T) {
	short := loadPolicy(t, "gateway:\n  timeouts: {idle: 200ms, first_byte: 200ms, request: 400ms}\n")
	stall := func(w http.ResponseWriter, r *http.Request) { waitGone(r) }
	headerTimeout := func(g *Gateway) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 200 * time.Millisecond
		g.Transport = tr
	}
	dialTimeout := func(g *Gateway) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			// What net.Dialer returns when its Timeout passes on a
			// black-holed address.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
			}
		}
		g.Transport = tr
	}
	for _, tc := range []struct {
		name     string
		upstream http.HandlerFunc
		opt      func(*Gateway)
		stream   bool
	}{
		{"a first byte that never comes is a 504", stall, headerTimeout, false},
		{"a first byte that never comes on a stream is a 504", stall, headerTimeout, true},
		{"a connect that times out is a 504", stall, dialTimeout, false},
		{"a connect that times out on a stream is a 504", stall, dialTimeout, true},
		{"a stream that stays silent after its headers is a 504", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			_ = http.NewResponseController(w).Flush()
			waitGone(r)
		}, withPolicy(short), true},
		{"a response body that stalls is a 504 at the request timeout", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"c1","choices":[`)
			_ = http.NewResponseController(w).Flush()
			waitGone(r)
		}, withPolicy(short), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, tc.upstream, tc.opt)
			x := send(t, base, bigRequest(t, tc.stream), nil)
			wantError(t, x, http.StatusGatewayTimeout, "upstream_timeout")
			if x.took > 5*time.Second {
				t.Errorf("the 504 took %s; the timeouts are well under a second", x.took)
			}
		})
	}
}

func TestAStreamSilentMidWayEndsWithATimeoutEvent(t *testing.T) {
	up := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textChunk("partial"))
		_ = http.NewResponseController(w).Flush()
		waitGone(r)
	}
	base := newTestGateway(t, http.HandlerFunc(up), withPolicy(loadPolicy(t, "gateway:\n  timeouts: {idle: 200ms}\n")))
	x := send(t, base, bigRequest(t, true), nil)
	rep := readStream(t, bytes.NewReader(x.body))
	if x.status != 200 || rep.content != "partial" || !rep.errorEvent || rep.dones != 0 {
		t.Fatalf("status %d content %q error event %v [DONE] %d; want the partial text, then an error event and no [DONE]", x.status, rep.content, rep.errorEvent, rep.dones)
	}
	last := rep.raw[len(rep.raw)-1]
	if gjson.Get(last, "error.code").String() != "upstream_timeout" || gjson.Get(last, "error.param").Raw != "null" {
		t.Errorf("last event %s; want an upstream_timeout error", last)
	}
}

func TestUpstreamsThatAnswerGarbageAre502(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string
		stream bool
	}{
		{"a truncated JSON 200 is a 502", `{"id":"c1","object":"chat.completion","choices":[{"index":0,"mess`, false},
		{"an empty 200 is a 502", ``, false},
		{"a JSON 200 without choices is a 502", `{"id":"c1"}`, false},
		{"an HTML 200 to a stream is a 502", "<html><body>Bad gateway</body></html>", true},
		{"a stream of events that are not JSON is a 502", "data: {not json\n\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, &recorder{answer: tc.answer})
			x := send(t, base, bigRequest(t, tc.stream), nil)
			wantError(t, x, http.StatusBadGateway, "upstream_bad_response")
			// Direct, the client would have failed to read a 2xx, which
			// the openai SDKs do not retry; a 502 they would.
			if got := x.header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("X-Should-Retry = %q, want false", got)
			}
		})
	}
}

func TestUnreachableUpstreamIs502WithinTheConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	dead, _ := url.Parse("http://" + addr + "/v1")
	base := newTestGateway(t, &recorder{}, func(g *Gateway) { g.Upstream = dead })
	for _, stream := range []bool{false, true} {
		x := send(t, base, bigRequest(t, stream), nil)
		wantError(t, x, http.StatusBadGateway, "upstream_unreachable")
		if x.took > policy.Default().Gateway.ConnectTimeout {
			t.Errorf("stream=%v: the 502 took %s, over the connect timeout", stream, x.took)
		}
	}
}

// refusedAt answers the call-th upstream call with refuse, each call
// before it with a search round and each after with an answer, whole or
// streamed.
func refusedAt(calls *atomic.Int32, call int32, stream bool, refuse func(http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := calls.Add(1)
		switch {
		case n == call:
			refuse(w)
		case n < call && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, searchRound)
		case n < call:
			_, _ = io.WriteString(w, searchReply)
		case stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, textChunk("fine")+finishChunk("stop")+doneEvent)
		default:
			_, _ = io.WriteString(w, plainAnswer)
		}
	}
}

// TestARateLimitedLaterRoundWaitsWhatTheUpstreamAsks: a 429 to a round
// after a search would lose the rounds before it, and a stream's client
// cannot retry an error event (its SDK retries a 429 status, which a
// stream past its first event can no longer have). The round is sent
// again after the wait the upstream names (OpenAI's retry-after-ms,
// Retry-After in seconds), when it names one within maxRateLimitWait; a
// 429 that names none (a spent quota) or a longer wait is relayed.
func TestARateLimitedLaterRoundWaitsWhatTheUpstreamAsks(t *testing.T) {
	limitedAt2 := func(calls *atomic.Int32, header map[string]string, stream bool) http.HandlerFunc {
		return refusedAt(calls, 2, stream, func(w http.ResponseWriter) {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for input tokens per min","type":"tokens","code":"rate_limit_exceeded"}}`)
		})
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		calls  int32
	}{
		{"a 429 that asks for 50 ms in retry-after-ms is sent again after it", map[string]string{"Retry-After-Ms": "50"}, 3},
		{"a 429 that asks for 1 s in Retry-After is sent again after it", map[string]string{"Retry-After": "1"}, 3},
		{"a 429 that names no wait is relayed", nil, 2},
		{"a 429 that asks for longer than the gateway waits is relayed", map[string]string{"Retry-After": "600"}, 2},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: ", streamed"}[stream], func(t *testing.T) {
				var calls atomic.Int32
				x := send(t, newTestGateway(t, limitedAt2(&calls, tc.header, stream)), bigRequest(t, stream), nil)
				if calls.Load() != tc.calls {
					t.Fatalf("%d upstream calls, want %d", calls.Load(), tc.calls)
				}
				retried := tc.calls == 3
				switch {
				case retried && (x.status != http.StatusOK || bytes.Contains(x.body, []byte(`"error"`))):
					t.Errorf("status %d: %s; want the answer of the round sent again", x.status, x.body)
				case !retried && !stream && x.status != http.StatusTooManyRequests:
					t.Errorf("status %d; want the upstream's 429", x.status)
				case !retried && stream && x.status == http.StatusOK && !readStream(t, bytes.NewReader(x.body)).errorEvent:
					t.Errorf("a stream whose round was refused ended without an error event:\n%s", x.body)
				}
			})
		}
	}
}

func TestServerErrorsAreRetriedWhereOnlyTheGatewayCan(t *testing.T) {
	// overloadedAt answers the call-th upstream call with a 503 (refusedAt).
	overloadedAt := func(calls *atomic.Int32, call int32, stream bool) http.HandlerFunc {
		return refusedAt(calls, call, stream, func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
		})
	}
	t.Run("a 503 in the round after a search is sent again, and the client never sees it", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			var calls atomic.Int32
			m := NewMetrics()
			base := newTestGateway(t, overloadedAt(&calls, 2, stream), func(g *Gateway) { g.Metrics = m })
			x := send(t, base, bigRequest(t, stream), nil)
			if x.status != 200 || calls.Load() != 3 {
				t.Errorf("stream=%v: status %d after %d upstream calls; want 200 after 3 (search, 503, again)", stream, x.status, calls.Load())
			}
			if v := metricValue(t, scrape(t, base), "toolgate_upstream_retries_total"); v != 1 {
				t.Errorf("stream=%v: toolgate_upstream_retries_total = %v, want 1", stream, v)
			}
		}
	})
	t.Run("a 503 to a turn's first round is relayed at once: the client's SDK retries it", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			var calls atomic.Int32
			base := newTestGateway(t, overloadedAt(&calls, 1, stream))
			x := send(t, base, bigRequest(t, stream), nil)
			if x.status != http.StatusServiceUnavailable || calls.Load() != 1 || x.header.Get("Retry-After") != "0" {
				t.Errorf("stream=%v: status %d after %d upstream calls, Retry-After %q; want the 503 and its Retry-After after 1", stream, x.status, calls.Load(), x.header.Get("Retry-After"))
			}
		}
	})
	t.Run("with retries set to 0 a 503 after a search is relayed at once", func(t *testing.T) {
		var calls atomic.Int32
		base := newTestGateway(t, overloadedAt(&calls, 2, false), withPolicy(loadPolicy(t, "gateway:\n  retries: 0\n")))
		x := send(t, base, bigRequest(t, false), nil)
		if x.status != http.StatusServiceUnavailable || calls.Load() != 2 {
			t.Errorf("status %d after %d calls; want 503 after 2", x.status, calls.Load())
		}
	})
	t.Run("a request passed through is sent once, as a reverse proxy sends it: its client retries", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
			})
			base := newTestGateway(t, up)
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(3), stream, nil), nil)
			if x.status != http.StatusServiceUnavailable || calls.Load() != 1 || x.header.Get("Retry-After") != "5" {
				t.Errorf("stream=%v: status %d after %d upstream calls, Retry-After %q; want the 503 and its Retry-After after 1", stream, x.status, calls.Load(), x.header.Get("Retry-After"))
			}
		}
	})
	// After a search round's text went out, the next round's 5xx still
	// sent the client nothing of that round: it is sent again, since a
	// stream's client cannot retry an error event.
	for _, tc := range []struct {
		name     string
		failures int32 // upstream calls after the first that answer 500
		calls    int32
		content  string
		failed   bool
	}{
		{"a 500 after text reached the client is sent again, and the client never sees it", 1, 3, "Let me look. Filed.", false},
		{"a 500 again ends the stream with an error event after the text", 2, 3, "Let me look. ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				switch {
				case n == 1:
					_, _ = io.WriteString(w, textChunk("Let me look. ")+searchRound)
				case n <= 1+tc.failures:
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(500)
					_, _ = io.WriteString(w, `{"error":{"message":"boom","type":"server_error","code":null}}`)
				default:
					_, _ = io.WriteString(w, textChunk("Filed.")+finishChunk("stop")+doneEvent)
				}
			})
			base := newTestGateway(t, up)
			x := send(t, base, bigRequest(t, true), nil)
			rep := readStream(t, bytes.NewReader(x.body))
			if calls.Load() != tc.calls || rep.content != tc.content || rep.errorEvent != tc.failed || (rep.dones == 1) == tc.failed {
				t.Errorf("%d upstream calls, content %q, error event %v, [DONE] %d; want %d calls, %q, error event %v", calls.Load(), rep.content, rep.errorEvent, rep.dones, tc.calls, tc.content, tc.failed)
			}
		})
	}
}

func TestAStreamCutInTheSecondRoundEndsWithAnErrorEvent(t *testing.T) {
	var calls atomic.Int32
	// Round two sends some text and then the connection ends: no finish,
	// no [DONE].
	base := newTestGateway(t, sseHandler(&calls, searchRound, textChunk("half an ans")))
	x := send(t, base, bigRequest(t, true), nil)
	rep := readStream(t, bytes.NewReader(x.body))
	if calls.Load() != 2 || rep.content != "half an ans" || !rep.errorEvent || rep.dones != 0 || len(rep.calls) != 0 {
		t.Errorf("%d upstream calls, content %q, error event %v, [DONE] %d, calls %v; want 2 calls, the partial text, an error event, no [DONE], no calls",
			calls.Load(), rep.content, rep.errorEvent, rep.dones, rep.calls)
	}
	if strings.Contains(string(x.body), SearchToolName) {
		t.Errorf("the client stream mentions %s: %s", SearchToolName, x.body)
	}
}

func TestAClientHangingUpMidStreamCancelsTheUpstreamAndLeaksNothing(t *testing.T) {
	// Everything the gateway needs that lives as long as a process is made
	// before the goroutine snapshot; the servers and connections after it.
	sessions := session.NewMemory(100, 0)
	catalogs := selector.NewCache(8)
	ignore := goleak.IgnoreCurrent()

	sawCancel := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textChunk("Hello"))
		_ = http.NewResponseController(w).Flush()
		if waitGone(r) {
			close(sawCancel)
		}
	}))
	upURL, _ := url.Parse(up.URL + "/v1")
	upstreamTransport := http.DefaultTransport.(*http.Transport).Clone()
	g := &Gateway{Upstream: upURL, Sessions: sessions, Catalogs: catalogs, Transport: upstreamTransport, Logger: testLogger()}
	gw := httptest.NewServer(g.Handler())
	clientTransport := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: clientTransport}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/v1/chat/completions", bytes.NewReader(bigRequest(t, true)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the first text: %v", err)
		}
		if strings.Contains(line, "Hello") {
			break
		}
	}
	cancel() // the client hangs up mid-stream
	resp.Body.Close()
	select {
	case <-sawCancel:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled after the client hung up")
	}

	gw.Close()
	up.Close()
	clientTransport.CloseIdleConnections()
	upstreamTransport.CloseIdleConnections()
	// The catalog this request compiled stays in the catalog cache, made
	// before the snapshot: its index goroutine is the cache's, by design.
	goleak.VerifyNone(t, ignore, goleak.IgnoreTopFunction("github.com/blevesearch/bleve/v2/index/scorch.(*Scorch).introducerLoop"))
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestAStreamMayThinkBeforeItsFirstEvent: a reasoning model streams
// nothing while it thinks, which can outlast the idle timeout; the wait
// for a stream's first data is first_byte's, and idle counts from then.
// first_byte is read at start-up, where the transport that waits for the
// headers is built: a policy reloaded since does not change the wait for
// the first data either.
func TestAStreamMayThinkBeforeItsFirstEvent(t *testing.T) {
	const cfg = "gateway:\n  timeouts: {idle: 100ms, first_byte: 700ms}\n"
	const reloaded = "gateway:\n  timeouts: {idle: 100ms, first_byte: 150ms}\n"
	thinking := func(think time.Duration) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_ = http.NewResponseController(w).Flush() // headers now, as OpenAI sends them
			select {
			case <-time.After(think):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, textChunk("thought it through")+finishChunk("stop")+doneEvent)
		}
	}
	passed := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name      string
		think     time.Duration
		body      []byte
		wantWhole bool // else a timeout
		// started is the first_byte the gateway started with, when its
		// policy has since been reloaded with reloaded's.
		started time.Duration
	}{
		{"a rewritten stream silent past idle but within first_byte is whole", 300 * time.Millisecond, bigRequest(t, true), true, 0},
		{"a passed-through stream silent past idle but within first_byte is whole", 300 * time.Millisecond, passed, true, 0},
		{"a rewritten stream silent past first_byte is a 504 that names the wait, as nothing reached the client", 5 * time.Second, bigRequest(t, true), false, 0},
		{"a rewritten stream waits the first_byte the gateway started with, not a reloaded one", 300 * time.Millisecond, bigRequest(t, true), true, 700 * time.Millisecond},
		{"a passed-through stream waits the first_byte the gateway started with, not a reloaded one", 300 * time.Millisecond, passed, true, 700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []func(*Gateway){withPolicy(loadPolicy(t, cfg))}
			if tt.started > 0 {
				opts = []func(*Gateway){withPolicy(loadPolicy(t, reloaded)), func(g *Gateway) { g.Transport = NewTransport(0, tt.started) }}
			}
			base := newTestGateway(t, thinking(tt.think), opts...)
			x := send(t, base, tt.body, nil)
			if !tt.wantWhole {
				wantError(t, x, http.StatusGatewayTimeout, "upstream_timeout")
				if msg := gjson.GetBytes(x.body, "error.message").String(); !strings.Contains(msg, "700ms after the headers") {
					t.Errorf("error %q; want it to name the wait for the first data", msg)
				}
				return
			}
			rep := readStream(t, bytes.NewReader(x.body))
			if x.status != http.StatusOK || rep.content != "thought it through" || rep.errorEvent || rep.dones != 1 {
				t.Fatalf("status %d content %q error event %v [DONE] %d; want the whole answer\n%s", x.status, rep.content, rep.errorEvent, rep.dones, x.body)
			}
		})
	}
}

// TestAStreamStillSendingDataOutlivesTheRequestTimeout: the request
// timeout bounds an answer that is not streamed; a stream is bounded by
// its silences, as the SDKs bound each read, so a long output still
// arriving is relayed whole, passed through or rewritten, where a direct
// call would get it. A whole answer that takes as long is still cut.
func TestAStreamStillSendingDataOutlivesTheRequestTimeout(t *testing.T) {
	const cfg = "gateway:\n  timeouts: {request: 300ms, idle: 1s}\n"
	trickle := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !gjson.GetBytes(b, "stream").Bool() {
			select {
			case <-time.After(800 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, plainAnswer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 8; i++ {
			_, _ = io.WriteString(w, textChunk("word "))
			_ = http.NewResponseController(w).Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, finishChunk("stop")+doneEvent)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"a passed-through stream still sending data is whole", []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)},
		{"a rewritten stream still sending data is whole", bigRequest(t, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := send(t, newTestGateway(t, http.HandlerFunc(trickle), withPolicy(loadPolicy(t, cfg))), tc.body, nil)
			rep := readStream(t, bytes.NewReader(x.body))
			if x.status != http.StatusOK || rep.errorEvent || rep.dones != 1 || rep.content != strings.Repeat("word ", 8) {
				t.Errorf("status %d, error event %v, [DONE] %d, content %q; want all eight words\n%s", x.status, rep.errorEvent, rep.dones, rep.content, x.body)
			}
		})
	}
	t.Run("a whole answer that takes longer is a 504 at the request timeout", func(t *testing.T) {
		x := send(t, newTestGateway(t, http.HandlerFunc(trickle), withPolicy(loadPolicy(t, cfg))), bigRequest(t, false), nil)
		wantError(t, x, http.StatusGatewayTimeout, "upstream_timeout")
	})
}

// TestEachRoundHasAnIdempotencyKeyOfItsOwn: every round of a turn is a
// request with a body of its own, and an upstream that honours a client's
// Idempotency-Key would answer a later round with the first round's stored
// answer. Each later round gets the key with its round's suffix; the
// gateway's retry of a round keeps that round's key.
func TestEachRoundHasAnIdempotencyKeyOfItsOwn(t *testing.T) {
	tests := []struct {
		name    string
		header  map[string]string
		replies []string // per upstream call; "503" fails it
		want    []string // the keys the upstream saw, call by call
	}{
		{"a search round and its answer", map[string]string{"Idempotency-Key": "k1"}, []string{searchReply, plainAnswer}, []string{"k1", "k1-toolgate-round-1"}},
		{"a retried round keeps its key", map[string]string{"Idempotency-Key": "k1"}, []string{searchReply, "503", plainAnswer}, []string{"k1", "k1-toolgate-round-1", "k1-toolgate-round-1"}},
		{"a client without a key sends none", nil, []string{searchReply, plainAnswer}, []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				reply := tt.replies[min(len(keys), len(tt.replies))-1]
				mu.Unlock()
				if reply == "503" {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, reply)
			})
			base := newTestGateway(t, up)
			if x := send(t, base, bigRequest(t, false), tt.header); x.status != 200 {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			if !slices.Equal(keys, tt.want) {
				t.Errorf("upstream saw Idempotency-Key %q, want %q", keys, tt.want)
			}
		})
	}
}

// TestAnErrorEventBeforeAnythingElseGoesOnAsItCame: some servers answer
// 200 and then an error event (LM Studio's "Model unloaded", a context too
// long). Direct, the SDKs raise that event from the stream, with its type
// and code, and do not retry. The client gets the same stream: the event
// as it came and no [DONE]. It got a 502 of the gateway's, which kept the
// upstream's type and code only as text in its message.
func TestAnErrorEventBeforeAnythingElseGoesOnAsItCame(t *testing.T) {
	for _, tc := range []struct{ name, event string }{
		{"LM Studio's bare error string reaches the client as it came", `{"error":"Model unloaded"}`},
		{"an OpenAI-shaped error with its type and code reaches the client as it came",
			`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`},
	} {
		event := tc.event
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := newTestGateway(t, sseHandler(&calls, sseData(event)))
			x := send(t, base, bigRequest(t, true), nil)
			if x.status != http.StatusOK || !bytes.Contains(x.body, []byte("data: "+event+"\n\n")) || bytes.Contains(x.body, []byte("[DONE]")) {
				t.Errorf("status %d, body %s; want 200 and the upstream's error event as it came, without [DONE]", x.status, x.body)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d upstream calls, want 1", n)
			}
		})
	}
}
