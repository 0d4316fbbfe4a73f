package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// sdkResponseTools is testCatalog(n) as the SDK's Responses tool params:
// flat, and not strict, as most agents declare theirs.
func sdkResponseTools(n int) []responses.ToolUnionParam {
	var tools []responses.ToolUnionParam
	for _, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        fn["name"].(string),
			Description: openai.String(fn["description"].(string)),
			Parameters:  fn["parameters"].(map[string]any),
			Strict:      openai.Bool(false),
		}})
	}
	return tools
}

// TestTheSDKsResponsesAgentWorksUnchanged drives the gateway's Responses
// route with the official openai-go client against a scripted reasoning
// model: the agent sends its 40 tools and gets only its own calls back,
// whether it resends the conversation or chains by previous_response_id.
func TestTheSDKsResponsesAgentWorksUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name            string
		chained, stream bool
		narrate         string // what the model says before a search
	}{
		{"an agent that resends the conversation completes a two-step task", false, false, "Let me look that up. "},
		{"an agent that chains by previous_response_id completes a two-step task", true, false, ""},
		{"a streaming agent that resends the conversation completes a two-step task", false, true, "Let me look that up. "},
		{"a streaming agent that resends a conversation without narration completes a two-step task", false, true, ""},
		{"a streaming agent that chains by previous_response_id completes a two-step task", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Reasoning: true, Keep: true, Narrate: tc.narrate}
			client := sdkClient(newTestGateway(t, model))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model:        "gpt-test",
				Instructions: openai.String("You are an agent."),
				Tools:        sdkResponseTools(40),
			}
			input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(twoStepTask.Prompt, responses.EasyInputMessageRoleUser)}
			var called []string
			var billed int64
			answer := ""
			requests, narrated := 0, 0
			for turn := 0; turn < 8 && answer == ""; turn++ {
				requests++
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				resp, err := sdkResponse(ctx, t, client, params, tc.stream)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				billed += resp.Usage.InputTokens
				if tc.narrate != "" && strings.HasPrefix(resp.OutputText(), tc.narrate) {
					narrated++
				}
				var next responses.ResponseInputParam
				for _, it := range resp.Output {
					switch it.Type {
					case "reasoning":
						next = append(next, responses.ResponseInputItemParamOfReasoning(it.ID, []responses.ResponseReasoningItemSummaryParam{}))
					case "message":
						next = append(next, responses.ResponseInputItemParamOfMessage(it.Content[0].Text, responses.EasyInputMessageRoleAssistant))
					case "function_call":
						called = append(called, it.Name)
						out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"ok":true}`)
						out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
						next = append(next, responses.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name), out)
					}
				}
				if !slices.ContainsFunc(resp.Output, func(it responses.ResponseOutputItemUnion) bool { return it.Type == "function_call" }) {
					answer = resp.OutputText()
				}
				if tc.chained {
					// Only the call outputs: the upstream has the rest.
					params.PreviousResponseID = openai.String(resp.ID)
					input = slices.DeleteFunc(next, func(p responses.ResponseInputItemUnionParam) bool { return p.OfFunctionCallOutput == nil })
				} else {
					input = append(input, next...)
				}
			}
			recs := checkTwoStepRun(t, model, twoStepRun{answer: answer, called: called, requests: requests, billed: billed, narrated: narrated, narrate: tc.narrate})
			if tc.chained {
				// The continuation after the first call holds no user
				// message: the session it finds by the id it chains to
				// still offers the tool the task called.
				after := slices.IndexFunc(recs, func(r fakellm.Record) bool {
					return gjson.GetBytes(r.Body, "input.0.type").String() == "function_call_output"
				})
				if after < 0 || !slices.Contains(recs[after].Names, "repo_create_issue") {
					t.Errorf("the chained continuation offered %v, want repo_create_issue kept from its session", recs[max(after, 0)].Names)
				}
			}
		})
	}
}

// streamedResponse reads a Responses stream as a client does and returns
// its last event's response, after checking what a client relies on: one
// response.created first, one response id throughout, sequence numbers
// 0, 1, 2, ..., items announced at output indices 0, 1, 2, ..., events
// only of announced items, no event of the gateway's tool_search, and the
// last event's output the items the stream announced.
func streamedResponse(t *testing.T, stream *ssestream.Stream[responses.ResponseStreamEventUnion]) (*responses.Response, error) {
	t.Helper()
	var last *responses.Response
	var n int64
	var announced []string
	id := ""
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != n {
			t.Errorf("event %d (%s) has sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		if (n == 0) != (ev.Type == "response.created") {
			t.Errorf("event %d is %s: want response.created first and only first", n, ev.Type)
		}
		n++
		switch {
		case ev.Type == "response.output_item.added":
			if ev.OutputIndex != int64(len(announced)) {
				t.Errorf("item %s announced at output_index %d, want %d", ev.Item.Type, ev.OutputIndex, len(announced))
			}
			announced = append(announced, ev.Item.Type+":"+ev.Item.Name)
		case strings.HasPrefix(ev.Type, "response.") && ev.Type != "response.created" && ev.Type != "response.in_progress" && ev.Type != "response.completed":
			if ev.OutputIndex >= int64(len(announced)) {
				t.Errorf("%s names output_index %d of %d announced", ev.Type, ev.OutputIndex, len(announced))
			}
		case ev.Type == "response.completed":
			r := ev.Response
			last = &r
		}
		if strings.HasPrefix(ev.Type, "response.") && ev.Response.ID != "" {
			if id == "" {
				id = ev.Response.ID
			} else if ev.Response.ID != id {
				t.Errorf("%s names response %s, the stream began with %s", ev.Type, ev.Response.ID, id)
			}
		}
		// The response's tools member echoes what the model was offered
		// (README); nothing else may show the gateway's search.
		if raw, _ := sjson.Delete(ev.RawJSON(), "response.tools"); strings.Contains(raw, SearchToolName) {
			t.Errorf("the client saw the gateway's search: %s", raw)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if last == nil {
		t.Fatalf("the stream has no response.completed")
	}
	var got []string
	for _, it := range last.Output {
		got = append(got, it.Type+":"+it.Name)
	}
	if !slices.Equal(got, announced) {
		t.Errorf("response.completed's output %v, the stream announced %v", got, announced)
	}
	return last, nil
}

// TestResponsesRequestsTheLoopDoesNotTakePassThrough: what the Responses
// route cannot rewrite reaches the upstream as the client sent it, every
// tool included.
func TestResponsesRequestsTheLoopDoesNotTakePassThrough(t *testing.T) {
	tools := func(extra ...map[string]any) []map[string]any {
		var out []map[string]any
		for _, tool := range testCatalog(40) {
			fn := tool["function"].(map[string]any)
			out = append(out, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
		}
		return append(out, extra...)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		reason string
	}{
		{"a request that appends to a conversation kept upstream passes through", map[string]any{"conversation": "conv_1", "tools": tools()}, "a conversation kept upstream"},
		{"a background request passes through", map[string]any{"background": true, "tools": tools()}, "a background response"},
		{"a request whose client defers tools for the API's own tool search passes through", map[string]any{"tools": tools(
			map[string]any{"type": "function", "name": "late_tool", "parameters": map[string]any{"type": "object"}, "defer_loading": true},
			map[string]any{"type": "tool_search"})}, "the client defers its own tools"},
		{"a request whose client defers the functions of a namespace for the API's own tool search passes through", map[string]any{"tools": tools(
			map[string]any{"type": "namespace", "name": "crm", "description": "CRM tools.", "tools": []map[string]any{
				{"type": "function", "name": "list_open_orders", "description": "List open orders.", "parameters": map[string]any{"type": "object"}, "defer_loading": true},
			}},
			map[string]any{"type": "tool_search"})}, "the client defers its own tools"},
		{"a request with the API's own tool search and nothing deferred passes through", map[string]any{"tools": tools(
			map[string]any{"type": "tool_search"})}, "the client uses the provider's tool search"},
		{"a request with the API's client-executed tool search passes through", map[string]any{"tools": tools(
			map[string]any{"type": "tool_search", "execution": "client", "description": "Find tools.", "parameters": map[string]any{"type": "object"}})}, "the client uses the provider's tool search"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}`)
			})
			base := newTestGateway(t, up, func(g *Gateway) { g.Metrics = NewMetrics() })
			tc.body["model"], tc.body["input"] = "gpt-test", "Open an issue in the repository."
			body, _ := json.Marshal(tc.body)
			resp := postPath(t, base+"/responses", body)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if n := len(gjson.GetBytes(got, "tools").Array()); n != len(tc.body["tools"].([]map[string]any)) {
				t.Errorf("upstream got %d tools, want all %d", n, len(tc.body["tools"].([]map[string]any)))
			}
			if !bytes.Equal(got, body) {
				t.Errorf("upstream body differs from the client's:\n%s\nwant\n%s", got, body)
			}
			series := `toolgate_passthrough_total{reason="` + tc.reason + `"}`
			text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, series) == 1 })
			if got := metricValue(t, text, series); got != 1 {
				t.Errorf("%s = %v, want 1", series, got)
			}
		})
	}
}

// TestBadResponsesRequestsGetOpenAIShapedErrors: the Responses route
// refuses what the Chat route refuses, naming the parameter at fault.
func TestBadResponsesRequestsGetOpenAIShapedErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
	}{
		{"an input that is neither text nor items is refused", `{"model":"m","input":42,"tools":[]}`, "input"},
		{"a function tool without a name is refused", `{"model":"m","input":"hi","tools":[{"type":"function","description":"x"}]}`, "tools"},
		{"a body that is not JSON is refused", `{"model":`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, http.NotFoundHandler())
			resp := postPath(t, base+"/responses", []byte(tc.body))
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			if got := gjson.GetBytes(b, "error.param").String(); got != tc.param {
				t.Errorf("error.param = %q, want %q (%s)", got, tc.param, b)
			}
			if gjson.GetBytes(b, "error.message").String() == "" {
				t.Errorf("error has no message: %s", b)
			}
		})
	}
}

// postPath posts body to url as a client would.
func postPath(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAStreamedResponsesTurnThatFailsSaysSo: a Responses stream that
// fails before its first event gets the upstream's status; one that fails
// after it ends with an error event and no response.completed, so no
// client mistakes a broken turn for a whole one.
func TestAStreamedResponsesTurnThatFailsSaysSo(t *testing.T) {
	event := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := event("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`)
	text := event("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"m1","role":"assistant","content":[]}}`) +
		event("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"output_index":0,"item_id":"m1","content_index":0,"delta":"Hel"}`)
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		wantStatus int
		wantInBody string
	}{
		{"an upstream status before the stream reaches the client as it is", http.StatusTooManyRequests, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`, http.StatusTooManyRequests, "slow down"},
		{"an error event mid-stream reaches the client renumbered", http.StatusOK, created + text + event("error", `{"type":"error","sequence_number":3,"code":"server_error","message":"boom"}`), http.StatusOK, `"message":"boom"`},
		{"a stream cut before its response ends with the gateway's error event", http.StatusOK, created + text, http.StatusOK, "upstream_bad_response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status == http.StatusOK {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			base := newTestGateway(t, up)
			var tools []map[string]any
			for _, tool := range testCatalog(40) {
				fn := tool["function"].(map[string]any)
				tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "parameters": fn["parameters"]})
			}
			body, _ := json.Marshal(map[string]any{"model": "m", "input": "Open an issue.", "tools": tools, "stream": true})
			resp := postPath(t, base+"/responses", body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(b), tc.wantInBody) {
				t.Fatalf("status %d, body %s; want %d with %q", resp.StatusCode, b, tc.wantStatus, tc.wantInBody)
			}
			if strings.Contains(string(b), "response.completed") {
				t.Errorf("a failed turn ended with response.completed: %s", b)
			}
			if tc.status == http.StatusOK && !strings.Contains(string(b), "event: error\ndata: ") {
				t.Errorf("no named error event: %s", b)
			}
			if tc.status == http.StatusOK {
				n := 0
				for _, line := range strings.Split(string(b), "\n") {
					if data, ok := strings.CutPrefix(line, "data: "); ok {
						if got := gjson.Get(data, "sequence_number").Int(); got != int64(n) {
							t.Errorf("event %d has sequence_number %d: %s", n, got, data)
						}
						n++
					}
				}
			}
		})
	}
}

// TestResponsesBuiltInToolsRideAlong: the tools that are not functions (a
// hosted web_search, a custom tool) are neither searched nor answered by
// the gateway; every upstream call carries them, and the agent's task
// still goes through tool search.
func TestResponsesBuiltInToolsRideAlong(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
	client := sdkClient(newTestGateway(t, model))
	tools := append(sdkResponseTools(40),
		responses.ToolUnionParam{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}},
		responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: openai.String("Apply a patch to the workspace.")}})
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(twoStepTask.Prompt, responses.EasyInputMessageRoleUser)}
	var called []string
	for turn := 0; turn < 8; turn++ {
		resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-test", Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		done := true
		for _, it := range resp.Output {
			if it.Type == "function_call" {
				done = false
				called = append(called, it.Name)
				out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"ok":true}`)
				out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
				input = append(input, responses.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name), out)
			}
		}
		if done {
			break
		}
	}
	if want := []string{"repo_create_issue", "chat_post_message"}; !slices.Equal(called, want) {
		t.Errorf("SDK saw calls %v, want %v", called, want)
	}
	for i, r := range model.Records() {
		types := gjson.GetBytes(r.Body, "tools.#.type").String()
		if !strings.Contains(types, `"web_search"`) || !strings.Contains(types, `"custom"`) || r.Tools >= 20 {
			t.Errorf("upstream request %d carried %d tools of types %s: want web_search and the custom tool among under 20", i, r.Tools, types)
		}
	}
}

// TestTurnsOfEachAPIAreRecordedAndCounted checks that a Responses or a
// Messages turn reaches the decision log, the metrics and the
// X-Toolgate headers under its own route, with its input tokens read
// from that API's usage.
func TestTurnsOfEachAPIAreRecordedAndCounted(t *testing.T) {
	var flat []map[string]any
	for _, tool := range testCatalog(40) {
		fn := tool["function"].(map[string]any)
		flat = append(flat, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
	}
	anthropic, _ := json.Marshal(anthropicTools(40))
	for _, api := range []struct {
		route string
		body  func(stream bool) []byte
	}{
		{"responses", func(stream bool) []byte {
			b, _ := json.Marshal(map[string]any{"model": "gpt-test", "input": twoStepTask.Prompt, "tools": flat, "stream": stream})
			return b
		}},
		{"messages", func(stream bool) []byte {
			return []byte(`{"model":"claude","max_tokens":100,"stream":` + strconv.FormatBool(stream) + `,"tools":` + string(anthropic) +
				`,"messages":[{"role":"user","content":"` + twoStepTask.Prompt + `"}]}`)
		}},
	} {
		for _, stream := range []bool{false, true} {
			name := map[bool]string{false: "a whole " + api.route + " turn is recorded under its route", true: "a streamed " + api.route + " turn is recorded under its route"}[stream]
			t.Run(name, func(t *testing.T) {
				model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
				base, _, buf := observedGateway(t, model)
				resp := postPath(t, base+"/"+api.route, api.body(stream))
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				rounds := resp.Trailer.Get("X-Toolgate-Rounds")
				if rounds == "" {
					rounds = resp.Header.Get("X-Toolgate-Rounds")
				}
				if want := strconv.Itoa(len(model.Records())); rounds != want || rounds == "1" {
					t.Errorf("X-Toolgate-Rounds %q (trailer %q), want the %s upstream calls, a search among them", rounds, resp.Trailer.Get("X-Toolgate-Rounds"), want)
				}
				recs := buf.waitLines(t, 1)
				if len(recs) != 1 {
					t.Fatalf("%d decision records, want 1", len(recs))
				}
				rec := recs[0]
				if rec.Get("route").String() != api.route || rec.Get("searches.#").Int() == 0 || rec.Get("input_tokens").Int() <= 0 {
					t.Errorf("record %s: want route %s, its searches and its input tokens", rec.Raw, api.route)
				}
				series := `toolgate_requests_total{mode="hybrid",route="` + api.route + `",status="200"}`
				text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, series) == 1 })
				if got := metricValue(t, text, series); got != 1 {
					t.Errorf("%s = %v, want 1", series, got)
				}
			})
		}
	}
}

// TestAResponseIDLeadsNowhereForAnotherTenant: the gateway remembers
// which session a response id belongs to with its tenant, so a client with
// another key that names the id starts afresh instead of finding the
// first tenant's discovered tools, even where the upstream lets it
// continue from the id (two keys of one project).
func TestAResponseIDLeadsNowhereForAnotherTenant(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true,
		Owner: func(*http.Request) string { return "one project" }}
	base := newTestGateway(t, model)
	params := responses.ResponseNewParams{Model: "gpt-test", Tools: sdkResponseTools(40),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)}}
	owner := sdkClient(base)
	first, err := owner.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range first.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.Name != "repo_create_issue" {
		t.Fatalf("the first tenant's turn ended with %+v, want a call of repo_create_issue", first.Output)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"ok":true}`)
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	next := params
	next.PreviousResponseID = openai.String(first.ID)
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
	for _, tc := range []struct {
		name  string
		key   string
		found bool
	}{
		{"another tenant naming the id does not find the session", "sk-another-tenant-0000", false},
		{"the same tenant naming it finds the tools its turn called", "sk-sdk", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model.Reset()
			client := openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(tc.key), option.WithMaxRetries(0))
			if _, err := client.Responses.New(context.Background(), next); err != nil {
				t.Fatal(err)
			}
			recs := model.Records()
			if len(recs) == 0 {
				t.Fatal("no upstream request")
			}
			if found := slices.Contains(recs[0].Names, "repo_create_issue"); found != tc.found {
				t.Errorf("the continuation offered %v: repo_create_issue there = %v, want %v", recs[0].Names, found, tc.found)
			}
		})
	}
}

// TestAResponsesCustomToolNamedLikeTheSearchKeepsItsName sends 40
// function tools and custom tools (which ride along in every call) named
// like the gateway's search: the gateway's search takes the other name, or
// the request passes through when both are taken, and the upstream never
// gets two tools of one name.
func TestAResponsesCustomToolNamedLikeTheSearchKeepsItsName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		taken   []string
		gateway string // the search's name upstream; "" for a request passed through
	}{
		{"a custom tool_search leaves the gateway toolgate_search", []string{SearchToolName}, AltSearchToolName},
		{"custom tools of both names pass the request through", []string{SearchToolName, AltSearchToolName}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := sdkResponseTools(40)
			for _, n := range tc.taken {
				tools = append(tools, responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{Name: n, Description: openai.String("Search the team's notes.")}})
			}
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
			client := sdkClient(newTestGateway(t, model))
			_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
				Model: "gpt-test", Tools: tools,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range model.Records() {
				names := gjson.GetBytes(r.Body, "tools.#.name").Array()
				count := map[string]int{}
				for _, n := range names {
					count[n.String()]++
				}
				for _, n := range []string{SearchToolName, AltSearchToolName} {
					if count[n] > 1 {
						t.Errorf("upstream request %d offers %d tools named %s", i, count[n], n)
					}
				}
				if i == 0 && tc.gateway != "" && (len(names) == 0 || names[0].String() != tc.gateway) {
					t.Errorf("upstream request 0 offers %v first; want the gateway's %s", names, tc.gateway)
				}
				if i == 0 && tc.gateway == "" && len(names) != len(tools) {
					t.Errorf("upstream request 0 offers %d tools; want the client's %d, passed through", len(names), len(tools))
				}
			}
		})
	}
}

// TestAResponsesAnswerEchoesTheClientsTools checks the tools member of a
// turn that searched: the answer, and each event of a stream that holds
// the response, echo the tools array the client sent, as the API echoes
// a request's direct, and never tool_search or the active set the
// rounds were offered.
func TestAResponsesAnswerEchoesTheClientsTools(t *testing.T) {
	var tools []map[string]any
	for _, tool := range testCatalog(40) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
	}
	sent, _ := json.Marshal(tools)
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a whole answer echoes the client's tools", false},
		{"a stream's created, in_progress and completed events echo the client's tools", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			base := newTestGateway(t, model)
			body := []byte(`{"model":"m","input":"` + twoStepTask.Prompt + `","stream":` + strconv.FormatBool(tc.stream) + `,"tools":` + string(sent) + `}`)
			resp := postPath(t, base+"/responses", body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if recs := model.Records(); len(recs) < 2 {
				t.Fatalf("the upstream got %d requests; want a search round and the answer", len(recs))
			}
			echoes := map[string]string{}
			if !tc.stream {
				echoes["the answer"] = gjson.GetBytes(b, "tools").Raw
			}
			for _, line := range strings.Split(string(b), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					if r := gjson.Get(data, "response"); r.Exists() {
						echoes[gjson.Get(data, "type").String()] = r.Get("tools").Raw
					}
				}
			}
			want := []string{"the answer"}
			if tc.stream {
				want = []string{"response.created", "response.in_progress", "response.completed"}
			}
			for _, where := range want {
				if got, ok := echoes[where]; !ok || got != string(sent) {
					t.Errorf("%s echoes tools %.200s; want the client's 40 as sent", where, got)
				}
			}
		})
	}
}
