package fakellm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

var issueThenChat = Task{
	Name:   "issue then chat",
	Prompt: "File a bug about the login crash and tell the team in chat.",
	Steps: []Step{
		{Tool: "repo_create_issue", Query: "create issue repository", Args: json.RawMessage(`{"id":"acme/web"}`)},
		{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{"id":"eng"}`)},
	},
	Answer: "Filed the bug and told the team.",
}

func anthropicTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "Does " + name + ".",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}}
}

func anthropicTools(names ...string) []any {
	var out []any
	for _, n := range names {
		out = append(out, anthropicTool(n))
	}
	return out
}

func userSays(content any) map[string]any { return map[string]any{"role": "user", "content": content} }

func assistantSays(blocks ...any) map[string]any {
	return map[string]any{"role": "assistant", "content": blocks}
}

func toolUse(id, name, input string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(input)}
}

func toolResult(id string) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": []any{map[string]any{"type": "text", "text": "ok"}}}
}

func messagesBody(tools []any, msgs ...any) map[string]any {
	b := map[string]any{"model": "claude-test", "max_tokens": 1024, "messages": msgs}
	if tools != nil {
		b["tools"] = tools
	}
	return b
}

// postMessages sends body (a map, or raw bytes) to the model's /v1/messages.
func postMessages(t *testing.T, m *Model, body any) (*http.Response, []byte, []byte) {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(m)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw, out
}

// summary is a block as one comparable line.
func summary(b gjson.Result) string {
	switch typ := b.Get("type").String(); typ {
	case "text":
		return "text " + b.Get("text").String()
	case "tool_use":
		var in bytes.Buffer
		if err := json.Compact(&in, []byte(b.Get("input").Raw)); err != nil || !b.Get("input").IsObject() {
			return "tool_use " + b.Get("name").String() + " with a bad input " + b.Get("input").Raw
		}
		return "tool_use " + b.Get("name").String() + " " + in.String()
	case "thinking":
		return "thinking " + b.Get("thinking").String()
	default:
		return typ
	}
}

func TestMessagesPlaysTheScript(t *testing.T) {
	prompt := issueThenChat.Prompt
	search := func(q string) string { return `{"query":"` + q + `"}` }
	for _, tc := range []struct {
		name  string
		model *Model // nil for a plain one
		tools []any
		msgs  []any
		want  []string
		stop  string
	}{
		{name: "a task whose tool is not offered gets a tool_search call with the step's query",
			tools: anthropicTools("tool_search"), msgs: []any{userSays(prompt)},
			want: []string{"tool_use tool_search " + search("create issue repository")}, stop: "tool_use"},
		{name: "an offered tool is called with the step's args as its input object",
			tools: anthropicTools("tool_search", "repo_create_issue"), msgs: []any{userSays(prompt)},
			want: []string{`tool_use repo_create_issue {"id":"acme/web"}`}, stop: "tool_use"},
		{name: "a tool_result carries the task on to its next step",
			tools: anthropicTools("tool_search", "repo_create_issue", "chat_post_message"),
			msgs:  []any{userSays(prompt), assistantSays(toolUse("toolu_a", "repo_create_issue", `{"id":"acme/web"}`)), userSays([]any{toolResult("toolu_a")})},
			want:  []string{`tool_use chat_post_message {"id":"eng"}`}, stop: "tool_use"},
		{name: "text beside tool_result blocks does not start a new task",
			tools: anthropicTools("tool_search", "chat_post_message"),
			msgs: []any{userSays(prompt), assistantSays(toolUse("toolu_a", "repo_create_issue", `{"id":"acme/web"}`)),
				userSays([]any{toolResult("toolu_a"), map[string]any{"type": "text", "text": "Keep going."}})},
			want: []string{`tool_use chat_post_message {"id":"eng"}`}, stop: "tool_use"},
		{name: "searches answered by tool_results count toward MaxSearches",
			tools: anthropicTools("tool_search"),
			msgs: []any{userSays(prompt),
				assistantSays(toolUse("toolu_a", "tool_search", search("create issue repository"))), userSays([]any{toolResult("toolu_a")}),
				assistantSays(toolUse("toolu_b", "tool_search", search("create issue repository"))), userSays([]any{toolResult("toolu_b")})},
			want: []string{"text I could not find a tool to create issue repository."}, stop: "end_turn"},
		{name: "an answered conversation ends in end_turn text",
			tools: anthropicTools("tool_search", "repo_create_issue", "chat_post_message"),
			msgs: []any{userSays(prompt),
				assistantSays(map[string]any{"type": "text", "text": "Filing it."}, toolUse("toolu_a", "repo_create_issue", `{"id":"acme/web"}`)),
				userSays([]any{toolResult("toolu_a")}),
				assistantSays(toolUse("toolu_b", "chat_post_message", `{"id":"eng"}`)), userSays([]any{toolResult("toolu_b")})},
			want: []string{"text " + issueThenChat.Answer}, stop: "end_turn"},
		{name: "a tool_use naming a tool the request no longer offers is accepted",
			tools: anthropicTools("tool_search"),
			msgs:  []any{userSays(prompt), assistantSays(toolUse("toolu_a", "repo_create_issue", `{"id":"acme/web"}`)), userSays([]any{toolResult("toolu_a")})},
			want:  []string{"tool_use tool_search " + search("send message chat channel")}, stop: "tool_use"},
		{name: "a prompt in text blocks finds its task",
			tools: anthropicTools("repo_create_issue"),
			msgs:  []any{userSays([]any{map[string]any{"type": "text", "text": prompt}})},
			want:  []string{`tool_use repo_create_issue {"id":"acme/web"}`}, stop: "tool_use"},
		{name: "a server tool needs no input_schema and is never called",
			tools: []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}, anthropicTool("tool_search")},
			msgs:  []any{userSays(prompt)},
			want:  []string{"tool_use tool_search " + search("create issue repository")}, stop: "tool_use"},
		{name: "Narrate says its line in a text block before a search",
			model: &Model{Narrate: "Let me look that up."}, tools: anthropicTools("tool_search"), msgs: []any{userSays(prompt)},
			want: []string{"text Let me look that up.", "tool_use tool_search " + search("create issue repository")}, stop: "tool_use"},
		{name: "Narrate says nothing before a call to the step's own tool",
			model: &Model{Narrate: "Let me look that up."}, tools: anthropicTools("repo_create_issue"), msgs: []any{userSays(prompt)},
			want: []string{`tool_use repo_create_issue {"id":"acme/web"}`}, stop: "tool_use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cmp.Or(tc.model, &Model{})
			m.Tasks = []Task{issueThenChat}
			body := messagesBody(tc.tools, tc.msgs...)
			body["system"] = []any{map[string]any{"type": "text", "text": "You file bugs."}}
			resp, sent, out := postMessages(t, m, body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			msg := gjson.ParseBytes(out)
			var got []string
			for _, b := range msg.Get("content").Array() {
				got = append(got, summary(b))
				if b.Get("type").String() == "tool_use" && !strings.HasPrefix(b.Get("id").String(), "toolu_") {
					t.Errorf("tool_use id %q, want toolu_<n>", b.Get("id").String())
				}
			}
			if !slices.Equal(got, tc.want) || msg.Get("stop_reason").String() != tc.stop {
				t.Errorf("content %q stop %q\nwant %q stop %q", got, msg.Get("stop_reason").String(), tc.want, tc.stop)
			}
			if !strings.HasPrefix(msg.Get("id").String(), "msg_") || msg.Get("type").String() != "message" || msg.Get("role").String() != "assistant" ||
				msg.Get("model").String() != "claude-test" || msg.Get("stop_sequence").Type != gjson.Null {
				t.Errorf("envelope %s", out)
			}
			if u := msg.Get("usage"); u.Get("input_tokens").Int() != int64(len(sent)/4) || u.Get("output_tokens").Int() <= 0 ||
				u.Get("cache_creation_input_tokens").Raw != "0" || u.Get("cache_read_input_tokens").Raw != "0" {
				t.Errorf("usage %s, want input_tokens %d (a quarter of the body's bytes, as Chat counts) and output_tokens > 0", u.Raw, len(sent)/4)
			}
		})
	}
}

func TestMessagesRecordsTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keep   bool
		stream bool
	}{
		{"a kept request is recorded with its tools, sizes and body", true, false},
		{"a streamed request is recorded as streamed and without a body unless kept", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{Tasks: []Task{issueThenChat}, Keep: tc.keep}
			tools := []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}, anthropicTool("tool_search"), anthropicTool("repo_create_issue")}
			body := messagesBody(tools, userSays(issueThenChat.Prompt))
			body["stream"] = tc.stream
			_, sent, _ := postMessages(t, m, body)
			recs := m.Records()
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			r := recs[0]
			wantBody := []byte(nil)
			if tc.keep {
				wantBody = sent
			}
			if r.Tools != 3 || r.ToolsBytes != len(gjson.GetBytes(sent, "tools").Raw) || r.BodyBytes != len(sent) || r.Stream != tc.stream ||
				!slices.Equal(r.Names, []string{"tool_search", "repo_create_issue"}) || !bytes.Equal(r.Body, wantBody) {
				t.Errorf("record %+v", r)
			}
		})
	}
}

func TestMessagesRefusesWhatAnthropicRefuses(t *testing.T) {
	prompt := userSays(issueThenChat.Prompt)
	called := assistantSays(toolUse("toolu_a", "repo_create_issue", `{}`))
	noMax := messagesBody(anthropicTools("tool_search"), prompt)
	delete(noMax, "max_tokens")
	for _, tc := range []struct {
		name     string
		maxTools int
		body     any
		want     string
	}{
		{name: "a request without max_tokens", body: noMax, want: "max_tokens: Field required"},
		{name: "a tool_use followed by a user message with no tool_result",
			body: messagesBody(nil, prompt, called, userSays("go on")),
			want: "messages.1: tool_use ids were found without tool_result blocks immediately after: toolu_a"},
		{name: "one of two tool_use blocks left unanswered",
			body: messagesBody(nil, prompt, assistantSays(toolUse("toolu_a", "x", `{}`), toolUse("toolu_b", "y", `{}`)), userSays([]any{toolResult("toolu_a")})),
			want: "immediately after: toolu_b"},
		{name: "a tool_use ending the conversation",
			body: messagesBody(nil, prompt, called),
			want: "immediately after: toolu_a"},
		{name: "a tool_result whose tool_use is not in the previous message",
			body: messagesBody(nil, prompt, called, userSays([]any{toolResult("toolu_a"), toolResult("toolu_z")})),
			want: "messages.2.content.1: tool_result for toolu_z"},
		{name: "a tool_result in the first message",
			body: messagesBody(nil, userSays([]any{toolResult("toolu_a")})),
			want: "messages.0.content.0: tool_result for toolu_a"},
		{name: "a tool without input_schema",
			body: messagesBody([]any{anthropicTool("tool_search"), map[string]any{"name": "repo_create_issue"}}, prompt),
			want: "tools.1.input_schema: Field required"},
		{name: "a custom-typed tool without input_schema",
			body: messagesBody([]any{map[string]any{"type": "custom", "name": "repo_create_issue"}}, prompt),
			want: "tools.0.input_schema: Field required"},
		{name: "two tools with one name",
			body: messagesBody(anthropicTools("tool_search", "repo_create_issue", "tool_search"), prompt),
			want: `tools.2: tool names must be unique; "tool_search" is used twice`},
		{name: "more tools than MaxTools", maxTools: 2,
			body: messagesBody(anthropicTools("a", "b", "c"), prompt),
			want: "Expected an array with maximum length 2, but got an array with length 3"},
		{name: "a body that is not JSON", body: []byte(`{"model":`), want: "could not parse the JSON body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{Tasks: []Task{issueThenChat}, MaxTools: tc.maxTools}
			resp, _, out := postMessages(t, m, tc.body)
			e := gjson.ParseBytes(out)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" ||
				e.Get("type").String() != "error" || e.Get("error.type").String() != "invalid_request_error" ||
				!strings.Contains(e.Get("error.message").String(), tc.want) {
				t.Errorf("status %d %s, want 400 in Anthropic's error shape saying %q", resp.StatusCode, out, tc.want)
			}
			if n := len(m.Records()); n != 0 {
				t.Errorf("%d records of a refused request", n)
			}
		})
	}
}

// sseEvent is one event of a Messages API stream.
type sseEvent struct {
	name string
	data gjson.Result
}

func readEvents(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, frame := range strings.Split(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(frame, "\n")
		name, okName := strings.CutPrefix(name, "event: ")
		data, okData := strings.CutPrefix(data, "data: ")
		if !ok || !okName || !okData || !gjson.Valid(data) {
			t.Fatalf("frame %q is not an event line and a JSON data line", frame)
		}
		ev := sseEvent{name, gjson.Parse(data)}
		if ev.data.Get("type").String() != name {
			t.Errorf("event %q carries type %q", name, ev.data.Get("type").String())
		}
		out = append(out, ev)
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value, whatever
// their keys' order.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func TestMessagesStreamsEvents(t *testing.T) {
	prompt := userSays(issueThenChat.Prompt)
	done := []any{prompt, assistantSays(toolUse("toolu_a", "repo_create_issue", `{}`)), userSays([]any{toolResult("toolu_a")}),
		assistantSays(toolUse("toolu_b", "chat_post_message", `{}`)), userSays([]any{toolResult("toolu_b")})}
	for _, tc := range []struct {
		name  string
		model *Model // nil for a plain one
		tools []any
		msgs  []any
		order string // event names, a run of deltas as "delta..."
		want  []string
		stop  string
		slow  time.Duration // the least the stream takes
	}{
		{name: "a call's input arrives in input_json_delta pieces that concatenate to the step's args",
			tools: anthropicTools("repo_create_issue"), msgs: []any{prompt},
			order: "message_start ping content_block_start delta... content_block_stop message_delta message_stop",
			want:  []string{`tool_use repo_create_issue {"id":"acme/web"}`}, stop: "tool_use"},
		{name: "an answer arrives word by word and stops at end_turn",
			tools: anthropicTools("repo_create_issue", "chat_post_message"), msgs: done,
			order: "message_start ping content_block_start delta... content_block_stop message_delta message_stop",
			want:  []string{"text " + issueThenChat.Answer}, stop: "end_turn"},
		{name: "thinking, narration and a search arrive as three blocks in turn, in one write when Whole",
			model: &Model{Reasoning: true, Narrate: "Let me look that up.", Whole: true}, tools: anthropicTools("tool_search"), msgs: []any{prompt},
			order: "message_start ping content_block_start delta... content_block_stop content_block_start delta... content_block_stop content_block_start delta... content_block_stop message_delta message_stop",
			want:  []string{"thinking The next step needs tool_search.", "text Let me look that up.", `tool_use tool_search {"query":"create issue repository"}`}, stop: "tool_use"},
		{name: "ChunkDelay is slept between events",
			model: &Model{ChunkDelay: 5 * time.Millisecond}, tools: anthropicTools("repo_create_issue"), msgs: []any{prompt},
			order: "message_start ping content_block_start delta... content_block_stop message_delta message_stop",
			want:  []string{`tool_use repo_create_issue {"id":"acme/web"}`}, stop: "tool_use", slow: 35 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cmp.Or(tc.model, &Model{})
			m.Tasks = []Task{issueThenChat}
			body := messagesBody(tc.tools, tc.msgs...)
			body["stream"] = true
			began := time.Now()
			resp, sent, out := postMessages(t, m, body)
			if took := time.Since(began); took < tc.slow {
				t.Errorf("the stream took %v, want at least %v", took, tc.slow)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
			}
			events := readEvents(t, out)
			var order []string
			for _, ev := range events {
				n := ev.name
				if n == "content_block_delta" {
					n = "delta..."
				}
				if len(order) == 0 || n != "delta..." || order[len(order)-1] != n {
					order = append(order, n)
				}
			}
			if got := strings.Join(order, " "); got != tc.order {
				t.Errorf("events\n%s\nwant\n%s", got, tc.order)
			}

			start := events[0].data.Get("message")
			if !strings.HasPrefix(start.Get("id").String(), "msg_") || start.Get("content").Raw != "[]" || start.Get("stop_reason").Type != gjson.Null ||
				start.Get("model").String() != "claude-test" || start.Get("usage.input_tokens").Int() != int64(len(sent)/4) || start.Get("usage.output_tokens").Int() != 1 {
				t.Errorf("message_start %s", start.Raw)
			}
			// Rebuild the blocks from their deltas, checking each event
			// names the block that is open.
			var blocks []map[string]any
			open := -1
			for _, ev := range events {
				i := int(ev.data.Get("index").Int())
				switch ev.name {
				case "content_block_start":
					cb := ev.data.Get("content_block")
					if i != len(blocks) || open != -1 {
						t.Fatalf("block %d starts with block %d open after %d blocks", i, open, len(blocks))
					}
					if empty := map[string]string{"text": `{"type":"text","text":""}`, "thinking": `{"type":"thinking","thinking":"","signature":""}`}[cb.Get("type").String()]; empty != "" && !sameJSON(cb.Raw, empty) ||
						cb.Get("type").String() == "tool_use" && (cb.Get("input").Raw != "{}" || !strings.HasPrefix(cb.Get("id").String(), "toolu_")) {
						t.Errorf("content_block_start %s", cb.Raw)
					}
					var b map[string]any
					_ = json.Unmarshal([]byte(cb.Raw), &b)
					b["input"], b["pieces"] = "", 0
					blocks, open = append(blocks, b), i
				case "content_block_delta":
					if i != open {
						t.Fatalf("delta for block %d with block %d open", i, open)
					}
					b, d := blocks[i], ev.data.Get("delta")
					switch d.Get("type").String() {
					case "text_delta":
						b["text"] = b["text"].(string) + d.Get("text").String()
					case "thinking_delta":
						b["thinking"] = b["thinking"].(string) + d.Get("thinking").String()
					case "signature_delta":
						b["signature"] = d.Get("signature").String()
					case "input_json_delta":
						b["input"], b["pieces"] = b["input"].(string)+d.Get("partial_json").String(), b["pieces"].(int)+1
					default:
						t.Errorf("delta %s", d.Raw)
					}
				case "content_block_stop":
					if i != open {
						t.Fatalf("stop for block %d with block %d open", i, open)
					}
					open = -1
				}
			}
			var got []string
			for _, b := range blocks {
				if b["type"] == "tool_use" {
					if b["pieces"].(int) < 2 {
						t.Errorf("input in %d input_json_delta pieces, want 2 or more", b["pieces"])
					}
					b["input"] = json.RawMessage(b["input"].(string))
				}
				if b["type"] == "thinking" && !strings.HasPrefix(b["signature"].(string), "sig_") {
					t.Errorf("thinking signed %q, want sig_<n>", b["signature"])
				}
				raw, err := json.Marshal(b)
				if err != nil {
					t.Fatalf("block %v: %v", b, err)
				}
				got = append(got, summary(gjson.ParseBytes(raw)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("streamed blocks %q\nwant %q", got, tc.want)
			}
			last := events[len(events)-2].data
			if last.Get("delta.stop_reason").String() != tc.stop || last.Get("delta.stop_sequence").Type != gjson.Null || last.Get("usage.output_tokens").Int() <= 0 {
				t.Errorf("message_delta %s, want stop_reason %q", last.Raw, tc.stop)
			}
		})
	}
}

func TestMessagesReasoningNeedsTheThinkingBack(t *testing.T) {
	tools := anthropicTools("tool_search", "repo_create_issue", "chat_post_message")
	drop := func(i int) func([]any) []any {
		return func(bs []any) []any { return slices.Delete(slices.Clone(bs), i, i+1) }
	}
	setHead := func(key, val string) func([]any) []any {
		return func(bs []any) []any { bs[0].(map[string]any)[key] = val; return bs }
	}
	for _, tc := range []struct {
		name      string
		reasoning bool
		edit      func(blocks []any) []any // what the client sends back of the first reply
		status    int
		want      string // the next call, or what the refusal says
	}{
		{name: "the reply's blocks sent back as they came carry the loop on", reasoning: true,
			edit: slices.Clone[[]any], status: http.StatusOK, want: "tool_use chat_post_message"},
		{name: "the call sent back without its thinking block is refused", reasoning: true,
			edit: drop(0), status: http.StatusBadRequest, want: "must start with a thinking block"},
		{name: "a thinking block moved after the call is refused", reasoning: true,
			edit: func(bs []any) []any { return []any{bs[1], bs[0]} }, status: http.StatusBadRequest, want: "must start with a thinking block"},
		{name: "a signature this model never issued is refused", reasoning: true,
			edit: setHead("signature", "sig_forged"), status: http.StatusBadRequest, want: "invalid signature in thinking block"},
		{name: "edited thinking is refused", reasoning: true,
			edit: setHead("thinking", "Something else."), status: http.StatusBadRequest, want: "invalid signature in thinking block"},
		{name: "without Reasoning a call needs no thinking block", reasoning: false,
			edit: slices.Clone[[]any], status: http.StatusOK, want: "tool_use chat_post_message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{Tasks: []Task{issueThenChat}, Reasoning: tc.reasoning}
			_, _, out := postMessages(t, m, messagesBody(tools, userSays(issueThenChat.Prompt)))
			var first struct{ Content []any }
			if err := json.Unmarshal(out, &first); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, b := range first.Content {
				kinds = append(kinds, b.(map[string]any)["type"].(string))
			}
			wantKinds := []string{"tool_use"}
			if tc.reasoning {
				wantKinds = []string{"thinking", "tool_use"}
			}
			if !slices.Equal(kinds, wantKinds) {
				t.Fatalf("first reply's blocks %q, want %q", kinds, wantKinds)
			}
			id := first.Content[len(first.Content)-1].(map[string]any)["id"].(string)
			resp, _, out := postMessages(t, m, messagesBody(tools, userSays(issueThenChat.Prompt),
				assistantSays(tc.edit(first.Content)...), userSays([]any{toolResult(id)})))
			var said string
			if resp.StatusCode == http.StatusOK {
				said = summary(gjson.GetBytes(out, "content|@reverse|0"))
			} else {
				said = gjson.GetBytes(out, "error.message").String()
			}
			if resp.StatusCode != tc.status || !strings.Contains(said, tc.want) {
				t.Errorf("status %d %q, want %d %q", resp.StatusCode, said, tc.status, tc.want)
			}
		})
	}
}

func TestMessagesThinkingOnceATurn(t *testing.T) {
	tools := anthropicTools("tool_search", "repo_create_issue", "chat_post_message")
	m := &Model{Tasks: []Task{issueThenChat}, Reasoning: true, ThinkOnce: true}
	_, _, out := postMessages(t, m, messagesBody(tools, userSays(issueThenChat.Prompt)))
	first := gjson.GetBytes(out, "content").Array()
	if len(first) != 2 || first[0].Get("type").String() != "thinking" {
		t.Fatalf("the reply to the user's message is %s, want thinking, then the call", gjson.GetBytes(out, "content").Raw)
	}
	firstMsg := assistantSays(json.RawMessage(first[0].Raw), json.RawMessage(first[1].Raw))
	_, _, out = postMessages(t, m, messagesBody(tools, userSays(issueThenChat.Prompt), firstMsg, userSays([]any{toolResult(first[1].Get("id").String())})))
	second := gjson.GetBytes(out, "content").Array()
	if len(second) != 1 || second[0].Get("type").String() != "tool_use" {
		t.Fatalf("the reply to tool results is %s, want the call alone, no thinking", gjson.GetBytes(out, "content").Raw)
	}
	secondMsg := assistantSays(json.RawMessage(second[0].Raw))
	for _, tc := range []struct {
		name   string
		msgs   []any
		status int
	}{
		{"a turn whose first message leads with the thinking goes on", []any{userSays(issueThenChat.Prompt), firstMsg, userSays([]any{toolResult(first[1].Get("id").String())}),
			secondMsg, userSays([]any{toolResult(second[0].Get("id").String())})}, http.StatusOK},
		{"a turn whose first message lost its thinking is refused", []any{userSays(issueThenChat.Prompt), assistantSays(json.RawMessage(first[1].Raw)),
			userSays([]any{toolResult(first[1].Get("id").String())}), secondMsg, userSays([]any{toolResult(second[0].Get("id").String())})}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, out := postMessages(t, m, messagesBody(tools, tc.msgs...))
			if resp.StatusCode != tc.status {
				t.Errorf("status %d %s, want %d", resp.StatusCode, out, tc.status)
			}
		})
	}
}
