package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAStreamsOutputBeginsAfterItsLifecycleEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   int // the chunk where output begins, -1 for none
	}{
		{"a Chat Completions chunk is output", []string{"data: {\"choices\":[]}\n\n"}, 0},
		{"Responses lifecycle events are not", []string{
			"event: response.created\ndata: {}\n\n",
			"event: response.in_progress\ndata: {}\n\nevent: response.output_item.added\ndata: {\"item\":{\"type\":\"reasoning\"}}\n\n",
		}, -1},
		{"a Responses delta is", []string{
			"event: response.created\ndata: {}\n\n",
			"event: response.output_text.delta\ndata: {\"delta\":\"Hi\"}\n\n",
		}, 1},
		{"Anthropic's message_start and pings are not, a delta is", []string{
			"event: message_start\ndata: {}\n\nevent: ping\ndata: {}\n\n",
			"event: content_block_start\ndata: {}\n\n",
			"event: content_block_delta\ndata: {}\n\n",
		}, 2},
		{"an event name split across reads is read whole", []string{
			"event: response.created\ndata: {}\n\nevent: response.output_te",
			"xt.delta\ndata: {}\n\n",
		}, 1},
		{"CRLF lines read like LF ones", []string{"event: response.created\r\ndata: {}\r\n\r\n", "event: response.completed\r\n"}, 1},
		{"a comment is not output", []string{": keep-alive\n\n"}, -1},
		{"an error event is output", []string{"event: response.created\ndata: {}\n\nevent: error\ndata: {}\n\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s eventScan
			got := -1
			for i, c := range tc.chunks {
				if s.output([]byte(c)) {
					got = i
					break
				}
			}
			if got != tc.want {
				t.Errorf("output began at chunk %d, want %d", got, tc.want)
			}
		})
	}
}

// TestAResponsesStreamMayThinkAfterItsLifecycleEvents: the Responses API
// sends response.created and response.in_progress at once, then nothing
// while a reasoning model thinks, which can take minutes (Codex has seen
// 8.5). That silence is the wait for output, bounded by first_byte, not
// by idle: the stream was cut after idle, where a direct call got it.
func TestAResponsesStreamMayThinkAfterItsLifecycleEvents(t *testing.T) {
	const cfg = "gateway:\n  timeouts: {idle: 100ms, first_byte: 2s}\n"
	events := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString("event: " + n + "\ndata: {\"type\":\"" + n + "\"}\n\n")
		}
		return b.String()
	}
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events("response.created", "response.in_progress", "response.output_item.added"))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-time.After(400 * time.Millisecond): // thinking
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, events("response.output_item.done", "response.completed"))
	})
	base := newTestGateway(t, up, withPolicy(loadPolicy(t, cfg)))
	x := sendTo(t, base, "/responses", []byte(`{"model":"m","stream":true,"input":"hi"}`), nil)
	if x.status != http.StatusOK || bytes.Contains(x.body, []byte("upstream_timeout")) || !bytes.Contains(x.body, []byte("response.completed")) {
		t.Errorf("status %d; want the whole stream:\n%s", x.status, x.body)
	}
}
