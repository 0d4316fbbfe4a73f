package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// TestARoundCutShortEndsTheTurn: the upstream stops a round at its token
// limit in the middle of a tool_search call. The gateway neither searches
// the half-written query nor asks again (each ask would stop the same
// way, up to max_rounds, every one billed): the client gets that one
// answer with its own finish, as it would direct.
func TestARoundCutShortEndsTheTurn(t *testing.T) {
	const msgStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	for _, tc := range []struct {
		name, path, body, reply string
		stream                  bool
		finish                  string // a gjson path in the answer, or the text a stream must hold
		want                    string
	}{
		{"a whole chat completion stopped at length", "/chat/completions", "", `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"cs","type":"function","function":{"name":"tool_search","arguments":"{\"quer"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`,
			false, "choices.0.finish_reason", "length"},
		{"a streamed chat completion stopped at length", "/chat/completions", "",
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"cs\",\"type\":\"function\",\"function\":{\"name\":\"tool_search\",\"arguments\":\"{\\\"quer\"}}]},\"finish_reason\":null}]}\n\n" +
				"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n",
			true, "", `"finish_reason":"length"`},
		{"a whole Messages answer stopped at max_tokens", "/messages", "messages", `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"tool_search","input":{}}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":5}}`,
			false, "stop_reason", "max_tokens"},
		{"a streamed Messages answer stopped at max_tokens", "/messages", "messages",
			msgStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"tool_search\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"quer\"}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			true, "", `"stop_reason":"max_tokens"`},
		{"a whole Responses answer left incomplete", "/responses", "responses", `{"id":"resp_1","object":"response","created_at":1,"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"m","output":[{"type":"function_call","id":"fc_1","call_id":"cs","name":"tool_search","arguments":"{\"quer","status":"incomplete"}],"usage":{"input_tokens":9,"output_tokens":5,"total_tokens":14}}`,
			false, "status", "incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				_, _ = io.WriteString(w, tc.reply)
			})
			base := newTestGateway(t, up)
			var body []byte
			switch tc.body {
			case "messages":
				body = anthropicRequest(t, 40)
			case "responses":
				body = []byte(`{"model":"m","input":"` + twoStepTask.Prompt + `","tools":` + flatTools(t, 40) + `}`)
			default:
				body = chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(40), tc.stream, nil)
			}
			if tc.stream && tc.body != "" {
				body = []byte(strings.Replace(string(body), `{`, `{"stream":true,`, 1))
			}
			resp := postPath(t, base+tc.path, body)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d upstream calls; want the one, whose answer was cut short", n)
			}
			if tc.stream {
				if !strings.Contains(string(got), tc.want) {
					t.Errorf("the stream does not end with %s:\n%s", tc.want, got)
				}
			} else if f := gjson.GetBytes(got, tc.finish).String(); f != tc.want {
				t.Errorf("%s = %q, want %q: %s", tc.finish, f, tc.want, got)
			}
		})
	}
}

// flatTools is testCatalog(n) as the Responses API's flat function tools.
func flatTools(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteByte('[')
	for i, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","name":"` + fn["name"].(string) + `","parameters":{"type":"object","properties":{}}}`)
	}
	return b.String() + "]"
}
