package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// capAPI is one API's names for what an output cap test reads and
// writes.
type capAPI struct {
	name, path string
	capField   string // the request's cap on output tokens
	done, cut  string // how a response ends: whole, or cut at the cap
	floor      int64  // the least cap the API takes
	request    func(t *testing.T, limit int64, stream bool) []byte
	reply      func(search bool, tokens int64, cut, stream bool) string
}

var capAPIs = []capAPI{
	{"Chat Completions", "/chat/completions", "max_completion_tokens", "stop", "length", 1,
		func(t *testing.T, limit int64, stream bool) []byte {
			extra := map[string]any{"max_completion_tokens": limit}
			if stream {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			return chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(40), stream, extra)
		}, chatCapReply},
	{"the Responses API", "/responses", "max_output_tokens", "completed", "incomplete", 16,
		func(t *testing.T, limit int64, stream bool) []byte {
			return fmt.Appendf(nil, `{"model":"m","input":%q,"max_output_tokens":%d,"stream":%t,"tools":%s}`, twoStepTask.Prompt, limit, stream, flatTools(t, 40))
		}, responsesCapReply},
	{"Anthropic's Messages API", "/messages", "max_tokens", "end_turn", "max_tokens", 1,
		func(t *testing.T, limit int64, stream bool) []byte {
			body := strings.Replace(string(anthropicRequest(t, 40)), `"max_tokens":256`, fmt.Sprintf(`"max_tokens":%d`, limit), 1)
			return []byte(strings.Replace(body, `{`, fmt.Sprintf(`{"stream":%t,`, stream), 1))
		}, messagesCapReply},
}

// TestAnOutputCapCapsTheTurn: the client caps its request's output
// tokens, and the gateway's rounds are one response to it, so their
// output counts against one cap. The model searches in 40 tokens and
// answers in 50: a later round gets what the search left of the cap, an
// answer that needs more is cut there as the API cuts it, and a search
// that leaves less than the API takes ends the turn, cut short, without
// another call. Before, every round got the whole cap: a client capping
// at 60 got a whole answer of 90 tokens.
func TestAnOutputCapCapsTheTurn(t *testing.T) {
	const search, answer = 40, 50
	for _, api := range capAPIs {
		for _, tc := range []struct {
			name  string
			limit int64
			sent  []int64 // the caps the upstream calls carried
			cut   bool
			out   int64 // the output tokens the client is told of
		}{
			{"a later round gets what the search left", 100, []int64{100, 60}, false, search + answer},
			{"an answer the rest cannot hold is cut short", 60, []int64{60, 20}, true, 60},
			{"a search that leaves less than the API takes ends the turn", search + api.floor - 1, []int64{search + api.floor - 1}, true, search},
		} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s: %s (stream %t)", api.name, tc.name, stream), func(t *testing.T) {
					var mu sync.Mutex
					var sent []int64
					up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						body, _ := io.ReadAll(r.Body)
						limit := gjson.GetBytes(body, api.capField).Int()
						mu.Lock()
						sent = append(sent, limit)
						first := len(sent) == 1
						mu.Unlock()
						if stream {
							w.Header().Set("Content-Type", "text/event-stream")
						} else {
							w.Header().Set("Content-Type", "application/json")
						}
						tokens := int64(answer)
						if first {
							tokens = search
						}
						_, _ = io.WriteString(w, api.reply(first, min(tokens, limit), tokens > limit, stream))
					})
					base := newTestGateway(t, up, searchOnly(t))
					resp := postPath(t, base+api.path, api.request(t, tc.limit, stream))
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s", resp.StatusCode, got)
					}
					mu.Lock()
					defer mu.Unlock()
					if !slices.Equal(sent, tc.sent) {
						t.Errorf("the upstream calls carried caps %v; want %v", sent, tc.sent)
					}
					finish, reason, out := capOutcome(got, stream)
					want := map[bool]string{false: api.done, true: api.cut}[tc.cut]
					if finish != want || out != tc.out {
						t.Errorf("the turn ended %q with %d output tokens; want %q with %d", finish, out, want, tc.out)
					}
					if api.cut == "incomplete" && tc.cut && reason != "max_output_tokens" {
						t.Errorf("incomplete_details.reason %q; want max_output_tokens", reason)
					}
				})
			}
		}
	}
}

// capOutcome reads how a turn ended in any of the three APIs, whole or
// streamed: its finish (Chat's finish_reason, a response's status,
// Anthropic's stop_reason), a Responses incomplete_details.reason, and
// the output tokens its usage counts.
func capOutcome(body []byte, stream bool) (finish, reason string, out int64) {
	read := func(ev gjson.Result) {
		if r := ev.Get("response"); r.IsObject() && ev.Get("type").String() != "response.created" && ev.Get("type").String() != "response.in_progress" {
			ev = r
		}
		for _, p := range []string{"choices.0.finish_reason", "status", "stop_reason", "delta.stop_reason"} {
			if f := ev.Get(p).String(); f != "" {
				finish = f
			}
		}
		if r := ev.Get("incomplete_details.reason").String(); r != "" {
			reason = r
		}
		for _, p := range []string{"usage.completion_tokens", "usage.output_tokens"} {
			if u := ev.Get(p); u.Exists() {
				out = u.Int()
			}
		}
	}
	if !stream {
		read(gjson.ParseBytes(body))
		return finish, reason, out
	}
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			ev := gjson.Parse(data)
			if t := ev.Get("type").String(); t == "message_start" || t == "response.created" || t == "response.in_progress" {
				continue // their usage and status are the response's start
			}
			read(ev)
		}
	}
	return finish, reason, out
}

// chatCapReply is a Chat Completions round of tokens output tokens: a
// tool_search call (search) or an answer, cut at the cap (cut) or not.
func chatCapReply(search bool, tokens int64, cut, stream bool) string {
	finish := map[bool]string{false: "stop", true: "length"}[cut]
	if search {
		finish = "tool_calls"
	}
	usage := fmt.Sprintf(`{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}`, tokens, 10+tokens)
	if !stream {
		msg := `{"role":"assistant","content":"Done."}`
		if search {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue repository\"}"}}]}`
		}
		return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":` + msg + `,"finish_reason":"` + finish + `"}],"usage":` + usage + `}`
	}
	first := textChunk("Done.")
	if search {
		first = callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`)
	}
	return first + finishChunk(finish) +
		sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":`+usage+`}`) + doneEvent
}

// responsesCapReply is chatCapReply's round as a Responses response.
func responsesCapReply(search bool, tokens int64, cut, stream bool) string {
	item := `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Done."}]}`
	if search {
		item = `{"type":"function_call","id":"fc_s","call_id":"call_s1","name":"tool_search","arguments":"{\"query\":\"create issue repository\"}","status":"completed"}`
	}
	status, terminal := `"status":"completed"`, "response.completed"
	if cut {
		status, terminal = `"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}`, "response.incomplete"
	}
	whole := `{"id":"resp_1","object":"response","created_at":1,` + status + `,"model":"m","output":[` + item + `],` +
		fmt.Sprintf(`"usage":{"input_tokens":10,"output_tokens":%d,"total_tokens":%d}}`, tokens, 10+tokens)
	if !stream {
		return whole
	}
	event := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	return event("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}`) +
		event("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":`+item+`}`) +
		event("response.output_item.done", `{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":`+item+`}`) +
		event(terminal, `{"type":"`+terminal+`","sequence_number":3,"response":`+whole+`}`)
}

// messagesCapReply is chatCapReply's round as an Anthropic message.
func messagesCapReply(search bool, tokens int64, cut, stream bool) string {
	block, start, delta := `{"type":"text","text":"Done."}`, `{"type":"text","text":""}`, `{"type":"text_delta","text":"Done."}`
	stop := map[bool]string{false: "end_turn", true: "max_tokens"}[cut]
	if search {
		input := `{"query":"create issue repository"}`
		q, _ := json.Marshal(input)
		block = `{"type":"tool_use","id":"toolu_s1","name":"tool_search","input":` + input + `}`
		start, delta, stop = `{"type":"tool_use","id":"toolu_s1","name":"tool_search","input":{}}`, `{"type":"input_json_delta","partial_json":`+string(q)+`}`, "tool_use"
	}
	if !stream {
		return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[%s],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":%d}}`, block, stop, tokens)
	}
	event := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	return event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`) +
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+start+`}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta+`}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, tokens)) +
		event("message_stop", `{"type":"message_stop"}`)
}
