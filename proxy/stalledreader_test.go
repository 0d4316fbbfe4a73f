package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// recordSignal is a decision log's writer that signals each record: the
// handler has returned by the time its record is written.
type recordSignal chan struct{}

func (s recordSignal) Write(p []byte) (int, error) {
	s <- struct{}{}
	return len(p), nil
}

func TestAClientThatStopsReadingFreesItsRequest(t *testing.T) {
	chunk := textChunk(strings.Repeat("x", 8<<10))
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for { // until the gateway gives up on the request
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	huge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}]}`, strings.Repeat("x", 16<<20))
	})
	for _, tc := range []struct {
		name     string
		upstream http.Handler
		tools    int // below min_tools, the request passes through
		stream   bool
	}{
		{"a rewritten stream gives up on it", endless, 30, true},
		{"a rewritten whole answer gives up on it", huge, 30, false},
		{"a passed-through stream gives up on it", endless, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(recordSignal, 1)
			g := testGateway(t, tc.upstream, withPolicy(loadPolicy(t, "gateway:\n  timeouts: {idle: 200ms}\n")),
				func(g *Gateway) { g.DecisionLog = slog.New(slog.NewJSONHandler(done, nil)) })
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			body := chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug."}}, testCatalog(tc.tools), tc.stream, nil)
			c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
			fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			// The client never reads. The bound is the test's, not the
			// gateway's: without a write deadline the handler never returns.
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler is still writing to a client that stopped reading")
			}
			if held := g.inflight.held.Load(); held != 0 {
				t.Errorf("%d request bytes still held in flight", held)
			}
		})
	}
}
