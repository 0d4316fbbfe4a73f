package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestPassedThroughRequestsCountTheirCachedTokens: a request passed
// through added its prompt to toolgate_input_tokens_total{path="gateway"}
// but never its prompt-cache hits to toolgate_input_tokens_cached_total,
// of which that total is the whole, nor to its record.
func TestPassedThroughRequestsCountTheirCachedTokens(t *testing.T) {
	const details = `,"prompt_tokens_details":{"cached_tokens":1536}`
	for _, tc := range []struct {
		name    string
		stream  bool
		details string
		want    float64 // -1: no input_tokens_cached in the record
	}{
		{"a JSON answer's cache hits are counted", false, details, 1536},
		{"a stream's cache hits are read from its usage event", true, details, 1536},
		{"a JSON answer that reports none adds nothing and claims nothing", false, "", -1},
		{"a stream that reports none adds nothing and claims nothing", true, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usage := `"usage":{"prompt_tokens":5000,"completion_tokens":1,"total_tokens":5001` + tc.details + `}`
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, textChunk("hi")+finishChunk("stop")+
						sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],`+usage+`}`)+doneEvent)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+usage+`}`)
			})
			base, _, buf := observedGateway(t, up)
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(3), tc.stream, nil), nil)
			if x.status != http.StatusOK || (tc.stream && !strings.Contains(string(x.body), "[DONE]")) {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 || recs[0].Get("mode").String() != "passthrough" || recs[0].Get("input_tokens").Int() != 5000 {
				t.Fatalf("want one record of a request passed through with its 5000 input tokens:\n%s", buf.String())
			}
			got := recs[0].Get("input_tokens_cached")
			switch {
			case tc.want < 0 && got.Exists():
				t.Errorf("the record claims %v cached tokens the upstream never reported", got)
			case tc.want >= 0 && (!got.Exists() || got.Float() != tc.want):
				t.Errorf("input_tokens_cached = %v, want %v:\n%s", got, tc.want, recs[0].Raw)
			}
			if metric, want := metricValue(t, scrape(t, base), "toolgate_input_tokens_cached_total"), max(tc.want, 0); metric != want {
				t.Errorf("toolgate_input_tokens_cached_total = %v, want %v", metric, want)
			}
		})
	}
}

// TestAPassedThroughStreamsUsageIsFoundWhereverItCame: the usage a
// passthrough reads for the token metrics may come last (OpenAI's
// include_usage chunk, Anthropic's message_delta) or, from an
// Anthropic-compatible upstream whose message_delta has no input tokens,
// only in the stream's first event, message_start: a long answer must not
// push it out of what is kept.
func TestAPassedThroughStreamsUsageIsFoundWhereverItCame(t *testing.T) {
	long := strings.Repeat(`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word word word"}}`+"\n\n", 400)
	for _, tc := range []struct {
		name   string
		chunks []string
		want   int64
	}{
		{"a chat stream's last chunk", []string{`data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n", long, `data: {"choices":[],"usage":{"prompt_tokens":900,"completion_tokens":3}}` + "\n\ndata: [DONE]\n\n"}, 900},
		{"a Messages stream's message_delta", []string{`event: message_start` + "\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n", long,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":700,"output_tokens":9}}` + "\n\n"}, 700},
		{"a long Messages stream counted in its message_start alone", []string{`event: message_start` + "\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":800,"output_tokens":1}}}` + "\n\n", long,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}` + "\n\n"}, 800},
	} {
		t.Run(tc.name+" gives the input tokens", func(t *testing.T) {
			u := &usageTap{on: true, stream: true}
			for _, c := range tc.chunks {
				for b := []byte(c); len(b) > 0; b = b[min(1000, len(b)):] {
					u.see(b[:min(1000, len(b))])
				}
			}
			if got, _ := u.tokens(); got != tc.want {
				t.Errorf("input tokens %d; want %d", got, tc.want)
			}
		})
	}
}

// TestAPassedThroughResponsesTurnCountsItsInputTokens: a Responses
// answer repeats the request's tools in response.created and
// response.completed, and its usage is in response.completed alone; with
// 60 tools that event is longer than the end of the stream the
// passthrough kept, which then started mid-line, and the turn's input and
// cached tokens went uncounted.
func TestAPassedThroughResponsesTurnCountsItsInputTokens(t *testing.T) {
	var tools []string
	for _, tool := range testCatalog(60) {
		fn := tool["function"].(map[string]any)
		b, _ := json.Marshal(map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]})
		tools = append(tools, string(b))
	}
	echoed := "[" + strings.Join(tools, ",") + "]"
	const usage = `{"input_tokens":20000,"input_tokens_details":{"cached_tokens":1536},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":20002}`
	output := `[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}]`
	response := func(status, output, usage string) string {
		return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"m","output":` + output + `,"tools":` + echoed + `,"usage":` + usage + `}`
	}
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !gjson.GetBytes(b, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, response("completed", output, usage))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseNamed("response.created", `{"type":"response.created","sequence_number":0,"response":`+response("in_progress", "[]", "null")+`}`)+
			sseNamed("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"output_index":0,"item_id":"m1","content_index":0,"delta":"hi"}`)+
			sseNamed("response.completed", `{"type":"response.completed","sequence_number":2,"response":`+response("completed", output, usage)+`}`))
	})
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a streamed turn counts the input tokens of its response.completed", true},
		{"a whole answer counts its input tokens", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := len(response("completed", output, usage)); n <= 8<<10 {
				t.Fatalf("response.completed is %d bytes; the test needs it longer than the 8 KiB a stream's end was", n)
			}
			base, _, buf := observedGateway(t, up, withPolicy(loadPolicy(t, "gateway: {min_tools: 100}\n")))
			body := `{"model":"m","input":"hi","stream":` + strconv.FormatBool(tc.stream) + `,"tools":` + echoed + `}`
			x := sendTo(t, base, "/responses", []byte(body), nil)
			if x.status != http.StatusOK || !bytes.Contains(x.body, []byte(`"input_tokens":20000`)) {
				t.Fatalf("status %d: %.300s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 || recs[0].Get("passthrough_reason").String() != "fewer than min_tools" {
				t.Fatalf("want one record of a turn passed through:\n%s", buf.String())
			}
			if got := recs[0].Get("input_tokens").Int(); got != 20000 {
				t.Errorf("the record's input_tokens = %d, want 20000:\n%s", got, recs[0].Raw)
			}
			if got := recs[0].Get("input_tokens_cached"); got.Int() != 1536 {
				t.Errorf("the record's input_tokens_cached = %v, want 1536", got)
			}
			text := scrape(t, base)
			if v := metricValue(t, text, `toolgate_input_tokens_total{path="gateway"}`); v != 20000 {
				t.Errorf(`toolgate_input_tokens_total{path="gateway"} = %v, want 20000`, v)
			}
			if v := metricValue(t, text, "toolgate_input_tokens_cached_total"); v != 1536 {
				t.Errorf("toolgate_input_tokens_cached_total = %v, want 1536", v)
			}
		})
	}
}
