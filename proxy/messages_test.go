package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// anthropicClient is Anthropic's official Go client pointed at the
// gateway whose API base is base (ending in /v1), with its retries off so
// a test sees each failure.
func anthropicClient(base string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(base, "/v1")+"/"), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
}

// anthropicTools is testCatalog(n) as the Anthropic SDK's tool params.
func anthropicTools(n int) []anthropic.ToolUnionParam {
	var tools []anthropic.ToolUnionParam
	for _, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		params := fn["parameters"].(map[string]any)
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        fn["name"].(string),
			Description: anthropic.String(fn["description"].(string)),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: params["properties"]},
		}})
	}
	return tools
}

// TestTheAnthropicSDKsAgentWorksUnchanged drives the gateway's Messages
// route with Anthropic's official Go client against a scripted model that
// thinks before it calls (and refuses a tool_use sent back without its
// signed thinking), before each call or, as Claude's models do without
// interleaved thinking, once a turn: the agent sends its 40 tools and
// gets only its own calls back, streamed or not, with or without text
// before a search.
func TestTheAnthropicSDKsAgentWorksUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name              string
		stream, thinkOnce bool
		narrate           string
	}{
		{"an agent completes a two-step task", false, false, ""},
		{"an agent whose model speaks before its search completes a two-step task", false, false, "Let me look that up. "},
		{"an agent whose model thinks once a turn completes a two-step task", false, true, ""},
		{"a streaming agent completes a two-step task", true, false, ""},
		{"a streaming agent whose model speaks before its search completes a two-step task", true, false, "Let me look that up. "},
		{"a streaming agent whose model thinks once a turn completes a two-step task", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Reasoning: true, ThinkOnce: tc.thinkOnce, Keep: true, Narrate: tc.narrate}
			client := anthropicClient(newTestGateway(t, model))
			ctx := context.Background()
			params := anthropic.MessageNewParams{
				Model:     "claude-test",
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: "You are an agent."}},
				Tools:     anthropicTools(40),
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
			}
			var called []string
			var billed int64
			answer := ""
			requests, narrated := 0, 0
			for turn := 0; turn < 8 && answer == ""; turn++ {
				requests++
				var msg *anthropic.Message
				var err error
				if tc.stream {
					msg, err = streamedMessage(t, client.Messages.NewStreaming(ctx, params))
				} else {
					msg, err = client.Messages.New(ctx, params)
				}
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				billed += msg.Usage.InputTokens
				var results []anthropic.ContentBlockParamUnion
				text := ""
				for _, b := range msg.Content {
					switch b.Type {
					case "tool_use":
						called = append(called, b.Name)
						results = append(results, anthropic.NewToolResultBlock(b.ID, `{"ok":true}`, false))
					case "text":
						text += b.Text
					}
				}
				if tc.narrate != "" && strings.HasPrefix(text, tc.narrate) {
					narrated++
				}
				switch {
				case len(results) == 0:
					answer = text
					if msg.StopReason != anthropic.StopReasonEndTurn {
						t.Errorf("an answer without calls stopped for %q, want end_turn", msg.StopReason)
					}
				case msg.StopReason != anthropic.StopReasonToolUse:
					t.Errorf("a message with calls stopped for %q, want tool_use", msg.StopReason)
				}
				params.Messages = append(params.Messages, msg.ToParam())
				if len(results) > 0 {
					params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
				}
			}
			checkTwoStepRun(t, model, twoStepRun{answer: answer, called: called, requests: requests, billed: billed, narrated: narrated, narrate: tc.narrate})
		})
	}
}

// streamedMessage reads a Messages stream as the SDK's accumulator does
// and returns the message, after checking what a client relies on: one
// message_start first, blocks started at indices 0, 1, 2, ..., events
// only of started blocks, no block of the gateway's tool_search, one
// message_delta and one message_stop, last.
func streamedMessage(t *testing.T, stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) (*anthropic.Message, error) {
	t.Helper()
	var msg anthropic.Message
	var types []string
	started := int64(0)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "content_block_start":
			if ev.Index != started {
				t.Errorf("a block started at index %d, want %d", ev.Index, started)
			}
			started++
			if ev.ContentBlock.Type == "tool_use" && ev.ContentBlock.Name == SearchToolName {
				t.Errorf("the client saw the gateway's %s call", SearchToolName)
			}
		case "content_block_delta", "content_block_stop":
			if ev.Index >= started {
				t.Errorf("%s of block %d, which never started", ev.Type, ev.Index)
			}
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Errorf("the SDK's accumulator refused %s: %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	count := func(typ string) int {
		n := 0
		for _, x := range types {
			if x == typ {
				n++
			}
		}
		return n
	}
	if len(types) < 3 || types[0] != "message_start" || count("message_start") != 1 || count("message_delta") != 1 ||
		types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
		t.Errorf("stream events %v, want one message_start first and one message_delta then message_stop last", types)
	}
	return &msg, nil
}

// TestMessagesRequestsTheLoopDoesNotTakePassThrough checks the Messages
// route's reasons to leave a request alone: each goes upstream with every
// tool, as the client wrote it.
func TestMessagesRequestsTheLoopDoesNotTakePassThrough(t *testing.T) {
	tools, _ := json.Marshal(anthropicTools(40))
	deferred, _ := json.Marshal(append(anthropicTools(39), anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name: "late_tool", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}, DeferLoading: anthropic.Bool(true),
	}}))
	// with appends the tools (JSON objects) to the 40 client tools.
	with := func(extra ...string) string {
		return strings.TrimSuffix(string(tools), "]") + "," + strings.Join(extra, ",") + "]"
	}
	// The server tools' shapes are anthropic-sdk-go v2.15.0's
	// BetaMCPToolsetParam and ToolSearchTool{Regex,Bm25}_20251119Param.
	regex := `{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}`
	bm25 := `{"type":"tool_search_tool_bm25","name":"tool_search_tool_bm25"}`
	ask := `,"messages":[{"role":"user","content":"` + twoStepTask.Prompt + `"}]}`
	for _, tc := range []struct {
		name, body string
		tools      int
		reason     string
	}{
		{"a conversation the client prefilled", `{"model":"claude","max_tokens":50,"tools":` + string(tools) + `,"messages":[{"role":"user","content":"` + twoStepTask.Prompt + `"},{"role":"assistant","content":"I will"}]}`, 40, "an assistant prefill"},
		{"a request that starts a thread kept upstream", `{"model":"claude","max_tokens":50,"thread":{"type":"create"},"tools":` + string(tools) + ask, 40, "a conversation kept upstream"},
		{"a streamed request that starts a thread kept upstream", `{"model":"claude","max_tokens":50,"stream":true,"thread":{"type":"create"},"tools":` + string(tools) + ask, 40, "a conversation kept upstream"},
		{"a request that continues a thread kept upstream", `{"model":"claude","max_tokens":50,"thread":{"type":"continue","previous_message_id":"msg_1"},"tools":` + string(tools) + ask, 40, "a conversation kept upstream"},
		{"a client that defers tools of its own", `{"model":"claude","max_tokens":50,"tools":` + string(deferred) + ask, 40, "the client defers its own tools"},
		{"a client that defers an MCP toolset's tools for the API's regex tool search", `{"model":"claude","max_tokens":50,"tools":` +
			with(regex, `{"type":"mcp_toolset","mcp_server_name":"linear","default_config":{"defer_loading":true}}`) + ask, 42, "the client defers its own tools"},
		{"a client that defers one tool of an MCP toolset for the API's BM25 tool search", `{"model":"claude","max_tokens":50,"tools":` +
			with(bm25, `{"type":"mcp_toolset","mcp_server_name":"linear","configs":{"create_issue":{"defer_loading":true}}}`) + ask, 42, "the client defers its own tools"},
		{"a client that sends the API's tool search and defers nothing", `{"model":"claude","max_tokens":50,"tools":` + with(bm25) + ask, 41, "the client uses the provider's tool search"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true, MaxTools: 200}
			base := newTestGateway(t, model, func(g *Gateway) { g.Metrics = NewMetrics() })
			resp := postPath(t, base+"/messages", []byte(tc.body))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			recs := model.Records()
			if len(recs) != 1 || recs[0].Tools != tc.tools || !bytes.Equal(recs[0].Body, []byte(tc.body)) {
				t.Fatalf("the upstream got %d requests; want the client's body once, with its %d tools; the client got %d %s", len(recs), tc.tools, resp.StatusCode, body)
			}
			series := `toolgate_passthrough_total{reason="` + tc.reason + `"}`
			text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, series) == 1 })
			if got := metricValue(t, text, series); got != 1 {
				t.Errorf("%s = %v, want 1", series, got)
			}
		})
	}
}

// TestBadMessagesRequestsGetAnthropicShapedErrors checks that a refusal
// on the Messages route reads as the Anthropic SDK expects an error to.
func TestBadMessagesRequestsGetAnthropicShapedErrors(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	base := newTestGateway(t, model)
	for _, tc := range []struct{ name, body, want string }{
		{"a body that is not JSON", `{"model":`, "not valid JSON"},
		{"messages that are not an array", `{"model":"claude","max_tokens":5,"messages":{}}`, "'messages' must be an array"},
		{"a tool without a name", `{"model":"claude","max_tokens":5,"messages":[],"tools":[{"name":"","input_schema":{}}]}`, "no function name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := postPath(t, base+"/messages", []byte(tc.body))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := gjson.ParseBytes(body)
			if resp.StatusCode != http.StatusBadRequest || e.Get("type").String() != "error" || e.Get("error.type").String() != "invalid_request_error" ||
				!strings.Contains(e.Get("error.message").String(), tc.want) {
				t.Errorf("%d %s, want 400 with an Anthropic error saying %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	t.Run("the SDK reads the refusal as its own error", func(t *testing.T) {
		client := anthropicClient(base)
		_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "claude", MaxTokens: 5,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			Tools: []anthropic.ToolUnionParam{
				{OfTool: &anthropic.ToolParam{Name: "", InputSchema: anthropic.ToolInputSchemaParam{}}},
			},
		})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "no function name") {
			t.Errorf("the SDK got %v", err)
		}
	})
}

// TestMessagesServerToolsRideAlong checks that the Messages API's server
// tools (web search here) go upstream in every call, beside the searched
// client tools, and that the turn still completes.
func TestMessagesServerToolsRideAlong(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
	client := anthropicClient(newTestGateway(t, model))
	tools := append(anthropicTools(40), anthropic.ToolUnionParam{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{MaxUses: anthropic.Int(2)}})
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude", MaxTokens: 100, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) == 0 || msg.Content[len(msg.Content)-1].Name != "repo_create_issue" {
		t.Errorf("the client got %+v, want its first call", msg.Content)
	}
	recs := model.Records()
	if len(recs) < 2 {
		t.Fatalf("%d upstream requests, want a search round and the call", len(recs))
	}
	for i, r := range recs {
		found := false
		gjson.GetBytes(r.Body, "tools").ForEach(func(_, tl gjson.Result) bool {
			found = found || (tl.Get("type").String() == "web_search_20250305" && tl.Get("max_uses").Int() == 2)
			return !found
		})
		if !found {
			t.Errorf("upstream request %d went without the web search tool", i)
		}
	}
}

// TestAStreamedMessagesTurnThatFailsSaysSo checks a Messages stream that
// fails after it began: the client gets the upstream's error event, and
// never a message_stop that would read as a whole answer.
func TestAStreamedMessagesTurnThatFailsSaysSo(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	})
	client := anthropicClient(newTestGateway(t, upstream))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "claude", MaxTokens: 100, Tools: anthropicTools(40),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
	})
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "Overloaded") || slices.Contains(types, "message_stop") {
		t.Errorf("events %v, error %v; want the upstream's overloaded error and no message_stop", types, err)
	}
}

// TestAMessagesStreamThatSkipsIndicesKeepsItsCalls checks a stream whose
// upstream numbers its blocks from 10: the client gets them from 0, and
// the call among them still ends the message as a call (tool_use).
func TestAMessagesStreamThatSkipsIndicesKeepsItsCalls(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":10,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":10,\"delta\":{\"type\":\"text_delta\",\"text\":\"Filing.\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":10}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":11,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"repo_create_issue\",\"input\":{}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":11,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":11}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	client := anthropicClient(newTestGateway(t, upstream))
	msg, err := streamedMessage(t, client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "claude", MaxTokens: 100, Tools: anthropicTools(40),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[1].Name != "repo_create_issue" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("the client got %+v stopping for %q, want the text and the call, stopping for tool_use", msg.Content, msg.StopReason)
	}
}

// TestAPassedThroughMessagesStreamIsCounted checks that a Messages
// request the loop leaves alone still counts its input tokens, read from
// the stream's message_start (the cache reads among them) when its
// message_delta has none.
func TestAPassedThroughMessagesStreamIsCounted(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":4000,\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	base, _, buf := observedGateway(t, upstream)
	tools, _ := json.Marshal(anthropicTools(40))
	resp := postPath(t, base+"/messages", []byte(`{"model":"claude","max_tokens":50,"stream":true,"tools":`+string(tools)+`,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Well,"}]}`))
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	recs := buf.waitLines(t, 1)
	if len(recs) != 1 || recs[0].Get("mode").String() != "passthrough" || recs[0].Get("input_tokens").Int() != 5000 || recs[0].Get("input_tokens_cached").Int() != 1000 {
		t.Errorf("want one record of a request passed through with 5000 input tokens, 1000 cached:\n%s", buf.String())
	}
}

// TestAStreamedMessagesTurnSumsItsCacheBreakdownOnItsDelta checks the
// usage of a streamed turn whose rounds wrote the prompt cache at
// different lifetimes: message_delta carries every count summed, the
// cache_creation breakdown (5m, 1h) included, beside the
// cache_creation_input_tokens it splits; message_start, sent before the
// later rounds exist, keeps the first round's.
func TestAStreamedMessagesTurnSumsItsCacheBreakdownOnItsDelta(t *testing.T) {
	var calls atomic.Int32
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		start := func(usage string) string {
			return sseNamed("message_start", `{"type":"message_start","message":{"id":"msg_`+strconv.Itoa(int(calls.Load()))+`","type":"message","role":"assistant","content":[],"usage":`+usage+`}}`)
		}
		if calls.Add(1) == 1 {
			_, _ = io.WriteString(w, start(`{"input_tokens":50,"cache_creation_input_tokens":3,"cache_read_input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":3},"output_tokens":1}`)+
				sseNamed("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_s1","name":"tool_search","input":{}}}`)+
				sseNamed("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"create issue repository\"}"}}`)+
				sseNamed("content_block_stop", `{"type":"content_block_stop","index":0}`)+
				sseNamed("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`)+
				sseNamed("message_stop", `{"type":"message_stop"}`))
			return
		}
		_, _ = io.WriteString(w, start(`{"input_tokens":60,"cache_creation_input_tokens":7,"cache_read_input_tokens":103,"cache_creation":{"ephemeral_5m_input_tokens":7,"ephemeral_1h_input_tokens":0},"output_tokens":1}`)+
			sseNamed("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
			sseNamed("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Filed."}}`)+
			sseNamed("content_block_stop", `{"type":"content_block_stop","index":0}`)+
			sseNamed("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`)+
			sseNamed("message_stop", `{"type":"message_stop"}`))
	})
	base := newTestGateway(t, upstream)
	tools, _ := json.Marshal(anthropicTools(40))
	resp := postPath(t, base+"/messages", []byte(`{"model":"claude","max_tokens":500,"stream":true,"tools":`+string(tools)+`,"messages":[{"role":"user","content":"`+twoStepTask.Prompt+`"}]}`))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if calls.Load() != 2 {
		t.Fatalf("the upstream got %d requests, want a search round and the answer: %s", calls.Load(), b)
	}
	usage := map[string]gjson.Result{}
	for _, line := range strings.Split(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			switch typ := gjson.Get(data, "type").String(); typ {
			case "message_start":
				usage[typ] = gjson.Get(data, "message.usage")
			case "message_delta":
				usage[typ] = gjson.Get(data, "usage")
			}
		}
	}
	for _, tc := range []struct{ event, path, want string }{
		{"message_start", "cache_creation.ephemeral_1h_input_tokens", "3"},
		{"message_start", "cache_creation.ephemeral_5m_input_tokens", "0"},
		{"message_delta", "cache_creation_input_tokens", "10"},
		{"message_delta", "cache_creation.ephemeral_1h_input_tokens", "3"},
		{"message_delta", "cache_creation.ephemeral_5m_input_tokens", "7"},
		{"message_delta", "cache_read_input_tokens", "203"},
	} {
		if got := usage[tc.event].Get(tc.path).Raw; got != tc.want {
			t.Errorf("%s usage %s = %q, want %s (usage %s)", tc.event, tc.path, got, tc.want, usage[tc.event].Raw)
		}
	}
}
