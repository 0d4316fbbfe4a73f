package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

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
		name    string
		chained bool
	}{
		{"an agent that resends the conversation completes a two-step task", false},
		{"an agent that chains by previous_response_id completes a two-step task", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Reasoning: true, Keep: true}
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
			for turn := 0; turn < 8 && answer == ""; turn++ {
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				resp, err := client.Responses.New(ctx, params)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				billed += resp.Usage.InputTokens
				var next responses.ResponseInputParam
				for _, it := range resp.Output {
					switch it.Type {
					case "reasoning":
						next = append(next, responses.ResponseInputItemParamOfReasoning(it.ID, []responses.ResponseReasoningItemSummaryParam{}))
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
			if answer != twoStepTask.Answer {
				t.Errorf("answer = %q, want %q", answer, twoStepTask.Answer)
			}
			if want := []string{"repo_create_issue", "chat_post_message"}; !slices.Equal(called, want) {
				t.Errorf("SDK saw calls %v, want %v", called, want)
			}
			var upstream int64
			recs := model.Records()
			for i, r := range recs {
				upstream += int64(r.BodyBytes / 4)
				if r.Tools >= 20 || !slices.Contains(r.Names, SearchToolName) {
					t.Errorf("upstream request %d carried %d tools %v, want tool_search and under half the client's 40", i, r.Tools, r.Names)
				}
			}
			if billed != upstream {
				t.Errorf("SDK was billed %d input tokens, upstream counted %d", billed, upstream)
			}
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
		{"a streamed request passes through", map[string]any{"stream": true, "tools": tools()}, "a stream of an API the gateway does not relay"},
		{"a request that appends to a conversation kept upstream passes through", map[string]any{"conversation": "conv_1", "tools": tools()}, "a conversation kept upstream"},
		{"a request with a built-in tool passes through with it", map[string]any{"tools": tools(map[string]any{"type": "web_search"})}, "a tool of an unknown type"},
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
