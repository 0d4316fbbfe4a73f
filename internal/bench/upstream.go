package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/internal/fakellm"
)

// fastUpstream answers chat completions as fast as a local server can:
// it reads the whole body (as a real server must), then answers a short
// text, as JSON or as a few SSE chunks with usage. It never calls tools, so
// every gateway turn is one upstream round and the measured difference is
// the gateway's own work.
type fastUpstream struct {
	sse    string
	decode bool // decode the JSON body, not only read it
}

func newFastUpstream(decode bool) *fastUpstream {
	return &fastUpstream{sse: sseAnswer(), decode: decode}
}

const jsonAnswer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"Done: the report is ready."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":7,"total_tokens":1207}}`

// sseAnswer is the streamed answer: a role chunk, five words, a finish
// chunk, a usage chunk and [DONE].
func sseAnswer() string {
	return fakellm.TextStream("chatcmpl-bench", "bench", "Done: ", "the ", "report ", "is ", "ready.")
}

func (u *fastUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !u.readBody(r.Body) {
		http.Error(w, `{"error":{"message":"empty or invalid body","type":"invalid_request_error","code":null}}`, http.StatusBadRequest)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, u.sse)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, jsonAnswer)
}

// readBody reads (and with decode, parses) a request body; false means it
// was empty or not JSON.
func (u *fastUpstream) readBody(body io.Reader) bool {
	if !u.decode {
		n, err := io.Copy(io.Discard, body)
		return err == nil && n > 0
	}
	var v map[string]any
	return json.NewDecoder(body).Decode(&v) == nil && len(v) > 0
}

// catalog returns n tools in the shape of the bundled catalog (indented,
// about 880 bytes each): the bundled tools, then renamed copies.
func catalog(n int) ([]json.RawMessage, error) {
	var base []map[string]any
	if err := json.Unmarshal(toolgate.SampleCatalog(), &base); err != nil {
		return nil, fmt.Errorf("reading the bundled catalog: %w", err)
	}
	out := make([]json.RawMessage, 0, n)
	for i := 0; i < n; i++ {
		t := base[i%len(base)]
		fn := t["function"].(map[string]any)
		cp := map[string]any{}
		for k, v := range fn {
			cp[k] = v
		}
		if round := i / len(base); round > 0 {
			cp["name"] = fmt.Sprintf("%s_%d", fn["name"], round)
		}
		b, err := json.MarshalIndent(map[string]any{"type": "function", "function": cp}, "    ", "  ")
		if err != nil {
			return nil, fmt.Errorf("encoding tool: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// requests holds one request body per user message, same tools in each.
type requests [][]byte

// at returns the body of request n: the user messages in rotation, so
// every path sees the same sequence.
func (r requests) at(n int64) []byte { return r[n%int64(len(r))] }

// requestBodies returns a request for each of userMessages with tools.
func requestBodies(tools []json.RawMessage, stream bool) (requests, error) {
	out := make(requests, 0, len(userMessages))
	for _, m := range userMessages {
		b, err := requestBody(tools, stream, m)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// requestBody returns a chat request with tools, as an agent sends it.
func requestBody(tools []json.RawMessage, stream bool, user string) ([]byte, error) {
	body := map[string]any{
		"model": "gpt-4o",
		"messages": []any{
			map[string]any{"role": "system", "content": "You are a helpful agent. Use the tools to do what the user asks."},
			map[string]any{"role": "user", "content": user},
		},
		"tools": tools,
	}
	if stream {
		body["stream"] = true
	}
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	return b, nil
}
