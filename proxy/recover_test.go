package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/session"
)

// panickingStream is an upstream transport whose streamed answer gives
// its first events and then panics in the relay's next read: a bug in
// the relay, or in code it calls, after the client has the stream's
// first bytes.
type panickingStream struct{ first string }

func (p panickingStream) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       &panickingBody{first: p.first},
		Request:    r,
	}, nil
}

// panickingBody reads first, then panics.
type panickingBody struct {
	first string
	sent  bool
}

func (b *panickingBody) Read(p []byte) (int, error) {
	if b.sent {
		panic("relay bug")
	}
	b.sent = true
	return copy(p, b.first), nil
}

func (*panickingBody) Close() error { return nil }

// messagesRequest is an Anthropic Messages request with testCatalog(n)'s
// tools.
func messagesRequest(t *testing.T, prompt string, n int, stream bool) []byte {
	t.Helper()
	var tools []map[string]any
	for _, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, map[string]any{"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]})
	}
	b, err := json.Marshal(map[string]any{
		"model": "claude", "max_tokens": 100, "stream": stream, "tools": tools,
		"messages": []map[string]any{{"role": "user", "content": prompt}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAPanicNeverReadsAsAWholeAnswer: the recovery of a handler's panic
// wrote an OpenAI-shaped 500 body whatever had gone out before, so a
// stream that had begun got a JSON body appended to its events and ended
// cleanly, as if whole, and a Messages client got an error in a shape its
// SDK does not read.
func TestAPanicNeverReadsAsAWholeAnswer(t *testing.T) {
	const (
		chatEvent     = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n"
		messagesEvent = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
	)
	prompt := "File a bug about the login crash."
	panicsAfter := func(first string) func(*Gateway) {
		return func(g *Gateway) { g.Transport = panickingStream{first: first} }
	}
	storePanics := func(g *Gateway) { g.Sessions = panickingStore{session.NewMemory(10, 0)} }
	for _, tc := range []struct {
		name  string
		path  string
		body  []byte
		opt   func(*Gateway)
		check func(status int, body []byte, readErr error) string // what is wrong, "" if nothing
	}{
		{"a Chat stream that panics after its first event is cut, with nothing after the event",
			"/chat/completions", chatRequest(t, []map[string]any{{"role": "user", "content": prompt}}, testCatalog(30), true, nil), panicsAfter(chatEvent),
			cutAfterItsFirstEvent},
		{"a Messages stream that panics after its first events is cut, with nothing after them",
			"/messages", messagesRequest(t, prompt, 30, true), panicsAfter(messagesEvent),
			cutAfterItsFirstEvent},
		{"a Messages turn that panics before it answers gets a 500 in the Anthropic shape",
			"/messages", messagesRequest(t, prompt, 30, false), storePanics,
			func(status int, body []byte, readErr error) string {
				e := gjson.ParseBytes(body)
				if readErr != nil || status != http.StatusInternalServerError || e.Get("type").String() != "error" || e.Get("error.type").String() != "api_error" {
					return "want a whole 500 with an Anthropic error of type api_error"
				}
				return ""
			}},
		{"a Chat turn that panics before it answers gets a 500 in the OpenAI shape",
			"/chat/completions", chatRequest(t, []map[string]any{{"role": "user", "content": prompt}}, testCatalog(30), false, nil), storePanics,
			func(status int, body []byte, readErr error) string {
				if readErr != nil || status != http.StatusInternalServerError || gjson.GetBytes(body, "error.code").String() != "internal_error" {
					return "want a whole 500 with an OpenAI error of code internal_error"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, textAnswer, tc.opt)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+tc.path, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if wrong := tc.check(resp.StatusCode, body, readErr); wrong != "" {
				t.Errorf("%s; got %d, read error %v, body:\n%s", wrong, resp.StatusCode, readErr, body)
			}
			// net/http recovers the cut: the gateway serves on.
			if status, _ := getWithHeaders(t, strings.TrimSuffix(base, "/v1")+"/healthz", nil); status != http.StatusOK {
				t.Errorf("after the panic /healthz answered %d", status)
			}
		})
	}
}

// cutAfterItsFirstEvent checks a stream that panicked once its first
// event went out: the client has that event, then a cut connection (a
// read error, not a clean end), and no error body after the events.
func cutAfterItsFirstEvent(status int, body []byte, readErr error) string {
	switch {
	case status != http.StatusOK || !bytes.Contains(body, []byte("Hel")):
		return "want the stream's first event, under 200"
	case readErr == nil:
		return "want the stream cut (a read error), not ended"
	case bytes.Contains(body, []byte("internal_error")) || !bytes.HasSuffix(body, []byte("\n\n")):
		return "want nothing after the last whole event"
	}
	return ""
}
