package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestAClientThatStopsMidBodyGetsA408: a body that stops arriving frees its
// connection after BodyTimeout with an OpenAI-shaped 408, on the chat
// route and on the passthrough, instead of holding it open for good.
func TestAClientThatStopsMidBodyGetsA408(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		t.Run("a stalled body on "+path+" is answered 408 once the body timeout passes", func(t *testing.T) {
			base := newTestGateway(t, &recorder{answer: plainAnswer}, func(g *Gateway) { g.BodyTimeout = 200 * time.Millisecond })
			conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(base, "/v1"), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, _ = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within 5 s: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || gjson.GetBytes(b, "error.code").String() != "request_timeout" {
				t.Errorf("status %d %s; want a 408 request_timeout", resp.StatusCode, b)
			}
		})
	}
}
