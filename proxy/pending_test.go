package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// mixedUpstream is a Responses upstream whose model calls tool_search and
// a client tool in one response, then answers once the outputs of both
// calls are in. Like OpenAI, it keeps what each response ended with and
// refuses to continue from a call that gets no output.
type mixedUpstream struct {
	mu      sync.Mutex
	pending map[string][]string // response id -> its calls without outputs
	bodies  [][]byte
}

func (m *mixedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bodies = append(m.bodies, body)
	if m.pending == nil {
		m.pending = map[string][]string{}
	}
	answered := map[string]bool{}
	req.Get("input.#(type==\"function_call_output\")#.call_id").ForEach(func(_, v gjson.Result) bool {
		answered[v.String()] = true
		return true
	})
	for _, id := range m.pending[req.Get("previous_response_id").String()] {
		if !answered[id] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"No tool output found for function call %s.","type":"invalid_request_error","param":"input","code":null}}`, id)
			return
		}
	}
	id := fmt.Sprintf("resp_%d", len(m.bodies))
	var output string
	if req.Get("previous_response_id").Exists() {
		output = `[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Filed it."}]}]`
	} else {
		output = `[{"type":"function_call","id":"fc_s","call_id":"call_search","name":"tool_search","arguments":"{\"query\":\"send message chat\"}","status":"completed"},` +
			`{"type":"function_call","id":"fc_r","call_id":"call_real","name":"repo_create_issue","arguments":"{}","status":"completed"}]`
		m.pending[id] = []string{"call_search", "call_real"}
	}
	writeResponse(w, id, output, req.Get("stream").Bool())
}

// writeResponse answers a Responses request with a response of id whose
// output is the JSON array output: whole, or streamed as the API streams
// it (each item added and done, then response.completed).
func writeResponse(w http.ResponseWriter, id, output string, stream bool) {
	writeResponseUsage(w, id, output, `{"input_tokens":10,"output_tokens":2,"total_tokens":12}`, stream)
}

// writeResponseUsage is writeResponse with the response's usage.
func writeResponseUsage(w http.ResponseWriter, id, output, usage string, stream bool) {
	whole := `{"id":"` + id + `","object":"response","created_at":1,"status":"completed","model":"m","output":` + output + `,"usage":` + usage + `}`
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, whole)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	var start map[string]any
	_ = json.Unmarshal([]byte(whole), &start)
	start["status"], start["output"] = "in_progress", []any{}
	emit("response.created", map[string]any{"response": start})
	gjson.Get(whole, "output").ForEach(func(k, it gjson.Result) bool {
		var item map[string]any
		_ = json.Unmarshal([]byte(it.Raw), &item)
		emit("response.output_item.added", map[string]any{"output_index": k.Int(), "item": item})
		emit("response.output_item.done", map[string]any{"output_index": k.Int(), "item": item})
		return true
	})
	var done map[string]any
	_ = json.Unmarshal([]byte(whole), &done)
	emit("response.completed", map[string]any{"response": done})
}

// TestAChainFromATurnThatEndedWithTheGatewaysOwnCallContinues: the model
// calls tool_search and a client tool in one response, which ends the
// turn (the client's call goes to the client), so the upstream keeps the
// gateway's call without an output. The client continues by
// previous_response_id with the output of its own call only; the gateway
// sends the output of its own with it, where the upstream refused the
// chain.
func TestAChainFromATurnThatEndedWithTheGatewaysOwnCallContinues(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{
			false: "a chain from a whole answer continues with the gateway's output for its search",
			true:  "a chain from a streamed answer continues with the gateway's output for its search",
		}[stream], func(t *testing.T) {
			up := &mixedUpstream{}
			client := sdkClient(newTestGateway(t, up))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			resp, err := sdkResponse(ctx, t, client, params, stream)
			if err != nil {
				t.Fatal(err)
			}
			names, outputs := callOutputs(resp)
			if !slices.Equal(names, []string{"repo_create_issue"}) {
				t.Fatalf("the client got calls %v; want its own repo_create_issue alone", names)
			}
			params.PreviousResponseID = openai.String(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			resp, err = sdkResponse(ctx, t, client, params, stream)
			if err != nil {
				t.Fatalf("continuing: %v", err)
			}
			if got := resp.OutputText(); got != "Filed it." {
				t.Errorf("answer %q", got)
			}
			up.mu.Lock()
			last := up.bodies[len(up.bodies)-1]
			up.mu.Unlock()
			if out := gjson.GetBytes(last, `input.#(call_id=="call_search").output`).String(); !strings.Contains(out, "send message chat") {
				t.Errorf("the gateway's output for its search: %q; want its answer to that search", out)
			}
		})
	}
}

// TestAStoreFalseTurnWithAReasoningModelSearches runs a reasoning model's
// two-step task for an agent that keeps nothing upstream (store false)
// and resends the conversation, as Codex and zero-data-retention setups
// do, with and without the reasoning's encrypted_content. The upstream,
// as OpenAI, refuses any item sent back by the id of an item it did not
// keep: the gateway's search rounds went back with their items' ids, so
// every search failed with a 404.
func TestAStoreFalseTurnWithAReasoningModelSearches(t *testing.T) {
	for _, tc := range []struct {
		name      string
		encrypted bool
		stream    bool
	}{
		{"a conversation resent without encrypted reasoning searches and completes the task", false, false},
		{"a streamed conversation resent without encrypted reasoning searches and completes the task", false, true},
		{"a conversation resent with encrypted reasoning searches and completes the task", true, false},
		{"a streamed conversation resent with encrypted reasoning searches and completes the task", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Reasoning: true, Keep: true}
			client := sdkClient(newTestGateway(t, model))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40), Store: openai.Bool(false),
			}
			if tc.encrypted {
				params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
			}
			input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(twoStepTask.Prompt, responses.EasyInputMessageRoleUser)}
			var called []string
			answer := ""
			for turn := 0; turn < 6 && answer == ""; turn++ {
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				resp, err := sdkResponse(ctx, t, client, params, tc.stream)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				names, outputs := callOutputs(resp)
				called = append(called, names...)
				if len(names) == 0 {
					answer = resp.OutputText()
				}
				// The conversation goes back whole and without ids, as a
				// store-false agent sends it: the calls and their outputs.
				for _, it := range resp.Output {
					if it.Type == "function_call" {
						input = append(input, responses.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name))
					}
				}
				input = append(input, outputs...)
			}
			if answer != twoStepTask.Answer || !slices.Equal(called, []string{"repo_create_issue", "chat_post_message"}) {
				t.Errorf("answer %q, calls %v", answer, called)
			}
			if len(model.Records()) <= 3 {
				t.Errorf("%d upstream calls: no search round was tested", len(model.Records()))
			}
		})
	}
}

// TestAChainAfterAMixedRoundKeepsItsInputAndTools: a turn that ends with
// a client call next to the gateway's search leaves that search's output
// pending, and the next request, chained by previous_response_id, gets
// it put before its input. That request's tools come after its input (as
// openai-go and openai-python write them) and are the catalog the gateway
// already parsed, so the gateway knows where they stood in the request
// as sent: the pending output moves them, and the bytes where they stood
// before, brackets of the client's input, were taken for the tools. The
// upstream must get the client's input whole, after the pending output,
// and the tools the gateway chose, wherever the brackets fall.
func TestAChainAfterAMixedRoundKeepsItsInputAndTools(t *testing.T) {
	var tools []string
	for _, tool := range testCatalog(40) {
		fn := tool["function"].(map[string]any)
		b, _ := json.Marshal(map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
		tools = append(tools, string(b))
	}
	toolsJSON := "[" + strings.Join(tools, ",") + "]"
	// brackets stand in the client's input wherever the pending output
	// may move the tools from: text of "[]" pairs longer than any output
	// the gateway keeps, each k of which puts another byte of it there.
	brackets := strings.Repeat("[]", 1500)
	for _, k := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("with the tools %d bytes further on", k), func(t *testing.T) {
			var mu sync.Mutex
			var chained []byte
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				req := gjson.ParseBytes(body)
				var output string
				switch {
				case req.Get("previous_response_id").String() == "resp_B":
					mu.Lock()
					chained = body
					mu.Unlock()
					output = `[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Posted."}]}]`
					writeResponse(w, "resp_C", output, false)
				case req.Get(`input.#(call_id=="call_A0")`).Exists():
					output = `[{"type":"function_call","id":"fc_B1","call_id":"call_B1","name":"tool_search","arguments":"{\"query\":\"send message chat\"}","status":"completed"},` +
						`{"type":"function_call","id":"fc_B","call_id":"call_B","name":"repo_create_issue","arguments":"{}","status":"completed"}]`
					writeResponse(w, "resp_B", output, false)
				default:
					output = `[{"type":"function_call","id":"fc_A0","call_id":"call_A0","name":"tool_search","arguments":"{\"query\":\"create issue repository\"}","status":"completed"}]`
					writeResponse(w, "resp_A", output, false)
				}
			})
			base := newTestGateway(t, up)
			first := `{"model":"gpt-test","input":"File a bug about the login crash.","tools":` + toolsJSON + `}`
			resp := postPath(t, base+"/responses", []byte(first))
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if id := gjson.GetBytes(got, "id").String(); resp.StatusCode != http.StatusOK || id != "resp_B" {
				t.Fatalf("the first turn answered %d %s; want resp_B", resp.StatusCode, got)
			}
			input := `[{"type":"function_call_output","call_id":"call_B","output":"{\"items\":[]}"},` +
				`{"role":"user","content":[]},` +
				`{"role":"user","content":"Now post it. ` + brackets + strings.Repeat(" ", k) + `"}]`
			next := `{"model":"gpt-test","previous_response_id":"resp_B","input":` + input + `,"tools":` + toolsJSON + `}`
			resp = postPath(t, base+"/responses", []byte(next))
			got, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the chained turn answered %d %s", resp.StatusCode, got)
			}
			mu.Lock()
			body := chained
			mu.Unlock()
			if !gjson.ValidBytes(body) {
				t.Fatalf("the upstream got invalid JSON: %.300s", body)
			}
			items := gjson.GetBytes(body, "input").Array()
			var rest []string
			for _, it := range items[1:] {
				rest = append(rest, it.Raw)
			}
			if items[0].Get("call_id").String() != "call_B1" || "["+strings.Join(rest, ",")+"]" != input {
				t.Errorf("the upstream's input: %.300s; want the search's output, then the client's input as sent", gjson.GetBytes(body, "input").Raw)
			}
			var names []string
			gjson.GetBytes(body, "tools.#.name").ForEach(func(_, n gjson.Result) bool {
				names = append(names, n.String())
				return true
			})
			if !slices.Contains(names, SearchToolName) || !slices.Contains(names, "repo_create_issue") || len(names) >= 20 {
				t.Errorf("the upstream was offered %v; want tool_search and the session's tools", names)
			}
		})
	}
}
