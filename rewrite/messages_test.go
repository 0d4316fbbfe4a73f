package rewrite

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const anthropicTools = `[{"name":"repo_search","description":"Search repositories","input_schema":{"type":"object","properties":{"q":{"type":"string","description":"words"}}}},` +
	`{"type":"custom","name":"issue_create","description":"Open an issue","input_schema":{"type":"object"}},` +
	`{"type":"web_search_20250305","name":"web_search","max_uses":3}]`

func TestMessagesRequestsAreRead(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		check      func(t *testing.T, r *Request)
	}{
		{"client tools are searched and server tools pinned", `{"model":"claude","max_tokens":10,"tools":` + anthropicTools + `,"messages":[{"role":"user","content":"find the repo"}]}`,
			func(t *testing.T, r *Request) {
				var names []string
				for _, tl := range r.Tools {
					names = append(names, tl.Name)
				}
				if !slices.Equal(names, []string{"repo_search", "issue_create"}) || len(r.Pinned) != 1 || !strings.Contains(r.Pinned[0], "web_search_20250305") {
					t.Errorf("tools %v, pinned %v", names, r.Pinned)
				}
				if !r.UserTurn || r.LastUser != "find the repo" || r.Prefill {
					t.Errorf("user turn %v %q prefill %v", r.UserTurn, r.LastUser, r.Prefill)
				}
			}},
		{"a user message of tool results is not a user turn", `{"model":"claude","max_tokens":10,"system":[{"type":"text","text":"You code."}],"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"open an issue"}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"On it."},{"type":"tool_use","id":"t1","name":"issue_create","input":{}},{"type":"tool_use","id":"t2","name":"repo_search","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"a reminder"}]}]}`,
			func(t *testing.T, r *Request) {
				if r.UserTurn || r.LastUser != "open an issue" || r.System != "You code." || r.TurnSteps != 1 ||
					!slices.Equal(r.CalledTail, []string{"issue_create", "repo_search"}) || !slices.Equal(r.Called, []string{"issue_create", "repo_search"}) {
					t.Errorf("read %+v", r)
				}
			}},
		{"an assistant message last is a prefill", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}`,
			func(t *testing.T, r *Request) {
				if !r.Prefill || r.UserTurn {
					t.Errorf("prefill %v, user turn %v", r.Prefill, r.UserTurn)
				}
			}},
		{"a tool choice of type tool names its tool", `{"model":"claude","max_tokens":10,"tool_choice":{"type":"tool","name":"repo_search"},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if r.ToolChoice != "repo_search" {
					t.Errorf("tool choice %q", r.ToolChoice)
				}
			}},
		{"structured output in its GA form asks for JSON", `{"model":"claude","max_tokens":10,"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if !r.JSONOutput {
					t.Error("output_config.format json_schema: no JSONOutput")
				}
			}},
		{"structured output in its beta form asks for JSON", `{"model":"claude","max_tokens":10,"output_format":{"type":"json_schema","schema":{"type":"object"}},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if !r.JSONOutput {
					t.Error("output_format json_schema: no JSONOutput")
				}
			}},
		{"an output config without a format asks for none", `{"model":"claude","max_tokens":10,"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if r.JSONOutput {
					t.Error("output_config without a format: JSONOutput")
				}
			}},
		{"a deferred tool is marked", `{"model":"claude","max_tokens":10,"tools":[{"name":"a","input_schema":{},"defer_loading":true},{"name":"b","input_schema":{}}],"messages":[]}`,
			func(t *testing.T, r *Request) {
				if !r.Tools[0].Deferred || r.Tools[1].Deferred {
					t.Errorf("deferred %v %v", r.Tools[0].Deferred, r.Tools[1].Deferred)
				}
			}},
		{"a thread the upstream keeps is a server conversation", `{"model":"claude","max_tokens":10,"thread":{"type":"create"},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if !r.ServerConversation {
					t.Error("ServerConversation false, want true")
				}
			}},
		{"a thread that continues one is a server conversation", `{"model":"claude","max_tokens":10,"thread":{"type":"continue","previous_message_id":"msg_1"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`,
			func(t *testing.T, r *Request) {
				if !r.ServerConversation {
					t.Error("ServerConversation false, want true")
				}
			}},
		{"a null thread is no server conversation", `{"model":"claude","max_tokens":10,"thread":null,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, r *Request) {
				if r.ServerConversation {
					t.Error("ServerConversation true, want false")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Messages{}.ParseRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestMessagesRequestsAreRefused(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"without messages", `{"model":"claude","max_tokens":10}`},
		{"with a client tool that has no name", `{"model":"claude","messages":[],"tools":[{"input_schema":{}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := (Messages{}).ParseRequest([]byte(tc.body), nil); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestMessagesToolsParamsAreReadFromTheInputSchema(t *testing.T) {
	r, err := Messages{}.ParseRequest([]byte(`{"model":"claude","max_tokens":10,"tools":`+anthropicTools+`,"messages":[]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	full := r.ToolsWithParams()
	if len(full) != 2 || len(full[0].Params) != 1 || full[0].Params[0] != (Param{Name: "q", Description: "words"}) {
		t.Errorf("tools with params %+v", full)
	}
}

func TestMessagesBuildSendsRoundsAsBlocks(t *testing.T) {
	req, err := Messages{}.ParseRequest([]byte(`{"model":"claude","max_tokens":10,"tools":`+anthropicTools+`,"messages":[{"role":"user","content":"find the repo"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	search := `{"type":"function","function":{"name":"tool_search","description":"Find tools","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}`
	rounds := []Round{
		{Extra: `{"type":"thinking","thinking":"I need a tool","signature":"s1"},{"type":"tool_use","id":"t1","name":"tool_search","input":{"query":"repo"}}`,
			Calls: []Call{{ID: "t1", Name: "tool_search", Arguments: `{"query":"repo"}`}}, Results: []ToolResult{{CallID: "t1", Content: "repo_search: Search repositories"}}},
		{Content: "Looking again.", Calls: []Call{{ID: "t2", Name: "tool_search", Arguments: `not json`}}, Results: []ToolResult{{CallID: "t2", Content: "none"}}},
	}
	own, err := Messages{}.OwnTool(search)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Messages{}.Build(req, []string{own, gjson.Get(anthropicTools, "0").Raw}, rounds)
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.ValidBytes(out) {
		t.Fatalf("invalid body %s", out)
	}
	body := gjson.ParseBytes(out)
	tools := body.Get("tools").Array()
	if len(tools) != 3 || tools[0].Get("name").String() != "tool_search" || !tools[0].Get("input_schema.properties.query").Exists() ||
		tools[0].Get("function").Exists() || tools[1].Get("name").String() != "repo_search" || tools[2].Get("type").String() != "web_search_20250305" {
		t.Errorf("tools %s", body.Get("tools").Raw)
	}
	msgs := body.Get("messages").Array()
	if len(msgs) != 5 {
		t.Fatalf("%d messages: %s", len(msgs), body.Get("messages").Raw)
	}
	if msgs[1].Get("role").String() != "assistant" || msgs[1].Get("content.0.signature").String() != "s1" ||
		msgs[1].Get("content.1.input.query").String() != "repo" {
		t.Errorf("the first round went back as %s", msgs[1].Raw)
	}
	if msgs[2].Get("role").String() != "user" || msgs[2].Get("content.0.type").String() != "tool_result" ||
		msgs[2].Get("content.0.tool_use_id").String() != "t1" || msgs[2].Get("content.0.content").String() != "repo_search: Search repositories" {
		t.Errorf("the first round's answer went back as %s", msgs[2].Raw)
	}
	if msgs[3].Get("content.0.text").String() != "Looking again." || msgs[3].Get("content.1.id").String() != "t2" || msgs[3].Get("content.1.input").Raw != "{}" {
		t.Errorf("a round without its blocks went back as %s", msgs[3].Raw)
	}
}

func TestMessagesBuildWithoutToolsRemovesTheChoice(t *testing.T) {
	req, err := Messages{}.ParseRequest([]byte(`{"model":"claude","max_tokens":10,"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"x"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Messages{}.Build(req, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "tools").Exists() || gjson.GetBytes(out, "tool_choice").Exists() {
		t.Errorf("body %s", out)
	}
}

const anthropicReply = `{"id":"msg_2","type":"message","role":"assistant","model":"claude","content":[` +
	`{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Opening it."},` +
	`{"type":"tool_use","id":"t1","name":"tool_search","input":{"query":"issue"}},{"type":"tool_use","id":"t2","name":"issue_create","input":{"title":"x"}}],` +
	`"stop_reason":"tool_use","usage":{"input_tokens":100,"cache_read_input_tokens":20,"output_tokens":9}}`

func TestMessagesResponsesAreRead(t *testing.T) {
	r, err := Messages{}.ParseResponse([]byte(anthropicReply))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "msg_2" || r.Content != "Opening it." || r.FinishReason != "tool_use" || len(r.Calls) != 2 ||
		r.Calls[1] != (Call{ID: "t2", Name: "issue_create", Arguments: `{"title":"x"}`}) || !strings.HasPrefix(r.Extra, `{"type":"thinking"`) {
		t.Errorf("read %+v", r)
	}
	if p, c := UsageTokens(r.Usage); p != 120 || c != 9 {
		t.Errorf("usage read as %d in, %d out; want the cache reads in the prompt: 120, 9", p, c)
	}
	if c, ok := CachedTokens(r.Usage); !ok || c != 20 {
		t.Errorf("cached %d %v", c, ok)
	}
	if _, err := (Messages{}).ParseResponse([]byte(`{"id":"x"}`)); err == nil {
		t.Error("a response without content was accepted")
	}
}

func TestMessagesClientResponse(t *testing.T) {
	r, err := Messages{}.ParseResponse([]byte(anthropicReply))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		keep     func(Call) bool
		text     string
		wantStop string
		wantIDs  []string
	}{
		{"the gateway's call is removed and the client's stays", func(c Call) bool { return c.Name != "tool_search" }, "", "tool_use", []string{"t2"}},
		{"a message left without calls ends the turn", func(Call) bool { return false }, "", "end_turn", nil},
		{"earlier text leads the content", func(c Call) bool { return c.Name != "tool_search" }, "Let me look. ", "tool_use", []string{"t2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rounds []Round
			if tc.text != "" {
				rounds = []Round{{Content: tc.text}}
			}
			out, err := Messages{}.ClientResponse(r, Turn{Keep: tc.keep, Text: tc.text, Rounds: rounds, ID: "msg_1", Usage: []byte(`{"input_tokens":300,"output_tokens":20}`)})
			if err != nil {
				t.Fatal(err)
			}
			body := gjson.ParseBytes(out)
			var ids []string
			body.Get("content").ForEach(func(_, b gjson.Result) bool {
				if b.Get("type").String() == "tool_use" {
					ids = append(ids, b.Get("id").String())
				}
				return true
			})
			if !slices.Equal(ids, tc.wantIDs) || body.Get("stop_reason").String() != tc.wantStop || body.Get("id").String() != "msg_1" ||
				body.Get("usage.input_tokens").Int() != 300 {
				t.Errorf("client got %s", out)
			}
			// The thinking stays first: the API refuses a message with
			// calls sent back otherwise.
			if body.Get("content.0.type").String() != "thinking" {
				t.Errorf("content starts with %s, want the thinking", body.Get("content.0").Raw)
			}
			if said := body.Get("content.1"); tc.text != "" && (said.Get("type").String() != "text" || said.Get("text").String() != tc.text) {
				t.Errorf("content after the thinking is %s, want the earlier text", said.Raw)
			}
		})
	}
}

// anthropicStream is one upstream stream: thinking, text, a call of the
// gateway's and one of the client's, split into deltas.
var anthropicStream = []string{
	`{"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","content":[],"usage":{"input_tokens":50,"cache_read_input_tokens":5,"output_tokens":1}}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"need "}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"tools"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"On "}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"it."}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"tool_search","input":{}}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"issues\"}"}}`,
	`{"type":"content_block_stop","index":2}`,
	`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t2","name":"issue_create","input":{}}}`,
	`{"type":"content_block_stop","index":3}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`,
}

func TestMessagesStreamsAreReadBlockByBlock(t *testing.T) {
	evs := readMessagesStreamEvents(t, anthropicStream...)
	t.Run("lifecycle events have no index", func(t *testing.T) {
		if evs[0].OutputIndex != -1 || evs[1].OutputIndex != -1 || evs[0].Terminal {
			t.Errorf("%+v %+v", evs[0], evs[1])
		}
	})
	t.Run("a block's start opens it and says what it is", func(t *testing.T) {
		if !evs[2].Opens || !evs[2].Reasoning || evs[3].Opens || !evs[11].Opens || !evs[11].Call || evs[11].Name != "tool_search" || evs[11].OutputIndex != 2 {
			t.Errorf("%+v / %+v / %+v", evs[2], evs[3], evs[11])
		}
	})
	last := evs[len(evs)-1]
	t.Run("the message_delta ends the stream with the blocks whole", func(t *testing.T) {
		if !last.Terminal || last.Failed || last.ID != "msg_9" || last.Text != "On it." || len(last.Items) != 4 {
			t.Fatalf("%+v", last)
		}
		if th := gjson.Parse(last.Items[0]); th.Get("thinking").String() != "need tools" || th.Get("signature").String() != "sig" {
			t.Errorf("thinking built as %s", last.Items[0])
		}
		if len(last.Calls) != 2 || last.Calls[0] != (Call{ID: "t1", Name: "tool_search", Arguments: `{"query":"issues"}`}) || last.Calls[1].Arguments != "{}" {
			t.Errorf("calls %+v", last.Calls)
		}
	})
	t.Run("the usage joins the start's input with the delta's output", func(t *testing.T) {
		if p, c := UsageTokens(last.Usage); p != 55 || c != 30 {
			t.Errorf("usage %s: %d in, %d out", last.Usage.Raw, p, c)
		}
	})
	t.Run("a call whose input is cut keeps the empty input it started with, as the SDKs read it", func(t *testing.T) {
		ev := readMessagesStream(t, anthropicStream[0], anthropicStream[11], anthropicStream[12], anthropicStream[len(anthropicStream)-1])
		if len(ev.Calls) != 1 || ev.Calls[0].Arguments != "{}" || !gjson.Valid(ev.Items[2]) {
			t.Errorf("read %+v", ev)
		}
	})
	t.Run("an error event fails the stream", func(t *testing.T) {
		ev, err := Messages{}.ItemReader().Read([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		if err != nil || !ev.Terminal || !ev.Failed {
			t.Errorf("%+v %v", ev, err)
		}
	})
	t.Run("an index out of range is refused", func(t *testing.T) {
		rd := Messages{}.ItemReader()
		if _, err := rd.Read([]byte(anthropicStream[0])); err != nil {
			t.Fatal(err)
		}
		if _, err := rd.Read([]byte(`{"type":"content_block_start","index":99999999,"content_block":{"type":"text","text":""}}`)); err == nil {
			t.Error("accepted")
		}
	})
	t.Run("a stream that does not begin with message_start is refused", func(t *testing.T) {
		if _, err := (Messages{}).ItemReader().Read([]byte(anthropicStream[2])); err == nil {
			t.Error("accepted")
		}
	})
}

func TestMessagesStreamsEnd(t *testing.T) {
	out, err := Messages{}.EditItemEvent([]byte(`{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`), 7, 1, "")
	if err != nil || gjson.GetBytes(out, "index").Int() != 1 || gjson.GetBytes(out, "sequence_number").Exists() {
		t.Errorf("renumbered %s (%v)", out, err)
	}
	last := NamedEvent{Name: "message_delta", Data: []byte(anthropicStream[len(anthropicStream)-1])}
	for _, tc := range []struct {
		name  string
		items []string
		stop  string
	}{
		{"a turn that ends on a client's call keeps tool_use", []string{`{"type":"tool_use","id":"t2"}`}, "tool_use"},
		{"a turn whose calls were all the gateway's ends the turn", []string{`{"type":"text","text":"done"}`}, "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, err := Messages{}.EndItemEvents(last, "msg_1", tc.items, []byte(`{"input_tokens":120,"output_tokens":44}`), 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(end) != 2 || end[0].Name != "message_delta" || end[1].Name != "message_stop" ||
				gjson.GetBytes(end[0].Data, "usage.input_tokens").Int() != 120 || gjson.GetBytes(end[0].Data, "delta.stop_reason").String() != tc.stop {
				t.Errorf("ended with %q %s / %q %s", end[0].Name, end[0].Data, end[1].Name, end[1].Data)
			}
		})
	}
	ev := Messages{}.ErrorEvent("gateway_error", "upstream_timeout", "upstream timed out", "", 4)
	if ev.Name != "error" || gjson.GetBytes(ev.Data, "type").String() != "error" || gjson.GetBytes(ev.Data, "error.message").String() != "upstream timed out" ||
		gjson.GetBytes(ev.Data, "error.type").String() != "api_error" {
		t.Errorf("error event %q %s; want an api_error, one of the API's types", ev.Name, ev.Data)
	}
	for _, tc := range []struct{ typ, code, want string }{
		{"invalid_request_error", "invalid_request", "invalid_request_error"},
		{"overloaded_error", "", "overloaded_error"},
		{"gateway_error", "gateway_overloaded", "overloaded_error"},
		{"invalid_request_error", "request_too_large", "request_too_large"},
		{"gateway_error", "request_too_large", "request_too_large"},
		{"upstream_error", "upstream_status", "api_error"},
	} {
		if got := AnthropicType(tc.typ, tc.code); got != tc.want {
			t.Errorf("AnthropicType(%q, %q) = %q, want %q", tc.typ, tc.code, got, tc.want)
		}
	}
}

func TestMessagesStreamBlocksKeepTheirIndices(t *testing.T) {
	last := readMessagesStream(t,
		anthropicStream[0],
		`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Filing."}}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t2","name":"issue_create","input":{}}}`,
		anthropicStream[len(anthropicStream)-1],
	)
	if len(last.Items) != 4 || last.Items[0] != "" || gjson.Get(last.Items[3], "id").String() != "t2" || last.Text != "Filing." || len(last.Calls) != 1 {
		t.Errorf("blocks of a stream that skipped indices 0 and 1 read as %q (calls %+v)", last.Items, last.Calls)
	}
	if got := JoinItems(last.Items); !gjson.Valid("["+got+"]") || len(gjson.Parse("["+got+"]").Array()) != 2 {
		t.Errorf("joined as %s", got)
	}
}

func TestMessagesStreamBlocksInterleaved(t *testing.T) {
	t.Run("a block that goes on after the next one started keeps its deltas", func(t *testing.T) {
		last := readMessagesStream(t,
			anthropicStream[0],
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"One "}}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"two."}}`,
			anthropicStream[len(anthropicStream)-1],
		)
		if got := gjson.Get(last.Items[0], "text").String(); got != "One two." {
			t.Errorf("block 0 built as %q", got)
		}
	})
	for _, tc := range []struct{ name, event string }{
		{"a delta of a block that never started is refused", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}}`},
		{"a stop of a block that never started is refused", `{"type":"content_block_stop","index":1}`},
		{"a block started twice is refused", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := Messages{}.ItemReader()
			for _, d := range []string{anthropicStream[0], `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`} {
				if _, err := rd.Read([]byte(d)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rd.Read([]byte(tc.event)); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestMessagesClientResponseCarriesTheTurnsThinking(t *testing.T) {
	r, err := Messages{}.ParseResponse([]byte(`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"issue_create","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	rounds := []Round{{Extra: `{"type":"thinking","thinking":"need a tool","signature":"s1"},{"type":"tool_use","id":"t1","name":"tool_search","input":{}}`}}
	for _, tc := range []struct {
		name   string
		rounds []Round
		want   string
	}{
		{"a last round without thinking gets the search round's", rounds, "thinking,tool_use"},
		{"with no thinking anywhere nothing is added", []Round{{Extra: `{"type":"tool_use","id":"t1","name":"tool_search","input":{}}`}}, "tool_use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Messages{}.ClientResponse(r, Turn{Keep: func(c Call) bool { return c.Name != "tool_search" }, Rounds: tc.rounds})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(itemTypes(out, "content"), ","); got != tc.want {
				t.Errorf("content %s, want blocks %s", gjson.GetBytes(out, "content").Raw, tc.want)
			}
		})
	}
}

func TestMessagesStreamLeavesOutEmptyTextBlocks(t *testing.T) {
	last := readMessagesStream(t,
		anthropicStream[0],
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"tool_search","input":{}}}`,
		anthropicStream[len(anthropicStream)-1],
	)
	if got := JoinItems(last.Items); strings.Contains(got, `"text"`) || !strings.Contains(got, "tool_search") {
		t.Errorf("the round's blocks to send back are %s, want the call without the empty text block", got)
	}
}

// TestMessagesClientResponseShowsTheRoundsBlocks: a round of the
// gateway's searched the web (a server tool) and cited what it found
// before its tool_search; the whole answer shows those blocks, citations
// included, as a stream relays them, not one flat text block.
func TestMessagesClientResponseShowsTheRoundsBlocks(t *testing.T) {
	final, err := Messages{}.ParseResponse([]byte(`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"issue_create","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":9,"output_tokens":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	round := Round{Content: "Per the docs, use v2.", Extra: `{"type":"thinking","thinking":"look it up","signature":"sig"},` +
		`{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"query":"api v2"}},` +
		`{"type":"web_search_tool_result","tool_use_id":"srv_1","content":[{"type":"web_search_result","url":"https://example.com/docs","title":"Docs","encrypted_content":"e"}]},` +
		`{"type":"text","text":"","citations":null},` +
		`{"type":"text","text":"Per the docs, use v2.","citations":[{"type":"web_search_result_location","url":"https://example.com/docs","cited_text":"v2"}]},` +
		`{"type":"tool_use","id":"t1","name":"tool_search","input":{"query":"create issue"}}`}
	for _, tc := range []struct {
		name  string
		text  string // turn.Text: "" for an answer that must be JSON
		types []string
	}{
		{"the search round's server tool and cited text come after the thinking", round.Content,
			[]string{"thinking", "server_tool_use", "web_search_tool_result", "text", "tool_use"}},
		{"an answer that must be JSON keeps the server tool's blocks but not the round's text", "",
			[]string{"thinking", "server_tool_use", "web_search_tool_result", "tool_use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Messages{}.ClientResponse(final, Turn{Keep: func(c Call) bool { return c.Name != "tool_search" }, Text: tc.text, Rounds: []Round{round}})
			if err != nil {
				t.Fatal(err)
			}
			types := itemTypes(out, "content")
			if !slices.Equal(types, tc.types) {
				t.Errorf("content %v, want %v: %s", types, tc.types, out)
			}
			if tc.text != "" && !gjson.GetBytes(out, `content.#(type=="text").citations.0.url`).Exists() {
				t.Errorf("the round's text lost its citations: %s", out)
			}
		})
	}
}

// readMessagesStreamEvents reads a Messages stream's events, as data, with
// one reader, and fails the test at one it refuses.
func readMessagesStreamEvents(t *testing.T, data ...string) []ItemEvent {
	t.Helper()
	rd := Messages{}.ItemReader()
	evs := make([]ItemEvent, 0, len(data))
	for _, d := range data {
		ev, err := rd.Read([]byte(d))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// readMessagesStream is readMessagesStreamEvents' last event: at a
// stream's end, what the round was.
func readMessagesStream(t *testing.T, data ...string) ItemEvent {
	t.Helper()
	evs := readMessagesStreamEvents(t, data...)
	return evs[len(evs)-1]
}
