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
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// clientItemUpstream is a Responses upstream whose model answers a task
// with item (a call the client runs, or not) next to a call of
// tool_search. Like OpenAI it refuses a request whose input holds a call
// of the client's without its output; the gateway's next round gets a
// message, and so does a request that continues from a response.
type clientItemUpstream struct {
	item   string
	waits  bool // item is a call of the client's, refused without its output
	mu     sync.Mutex
	bodies [][]byte
}

func (u *clientItemUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	id := "resp_" + string(rune('0'+len(u.bodies)))
	u.mu.Unlock()
	stream := req.Get("stream").Bool()
	done := `[{"type":"message","id":"msg_done","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Done."}]}]`
	in := req.Get("input")
	if !in.Get(`#(call_id=="call_search")`).Exists() && !req.Get("previous_response_id").Exists() {
		writeResponse(w, id, `[`+u.item+`,{"type":"function_call","id":"fc_s","call_id":"call_search","name":"tool_search","arguments":"{\"query\":\"create issue\"}","status":"completed"}]`, stream)
		return
	}
	item := gjson.Parse(u.item)
	if u.waits && in.Get(`#(type=="`+item.Get("type").String()+`")`).Exists() && unanswered(in, item) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"No tool output found for `+item.Get("type").String()+` `+item.Get("call_id").String()+`.","type":"invalid_request_error","param":"input","code":null}}`)
		return
	}
	writeResponse(w, id, done, stream)
}

// unanswered reports whether input lacks the reply to item: an output
// item of its call_id, or an approval of its id.
func unanswered(input, item gjson.Result) bool {
	if item.Get("type").String() == "mcp_approval_request" {
		return !input.Get(`#(approval_request_id=="` + item.Get("id").String() + `")`).Exists()
	}
	call := item.Get("call_id").String()
	answered := false
	input.ForEach(func(_, it gjson.Result) bool {
		answered = it.Get("call_id").String() == call && strings.HasSuffix(it.Get("type").String(), "_output")
		return !answered
	})
	return !answered
}

// TestAClientsCallOfAnyKindNextToASearchEndsTheTurn: a Responses model
// may answer with a call the client runs that is not a function call (a
// custom tool's, as Codex's apply_patch, a computer or shell action, a
// patch, an MCP approval request) next to the gateway's tool_search.
// That round is the client's, as one with a call of a client function
// is: the client gets its item (not the search), the upstream is not
// asked again within the turn (it refuses the item without its output),
// and the request that continues from the answer carries the search's
// output. Items the upstream ran itself, their outputs next to them,
// leave the round the gateway's.
func TestAClientsCallOfAnyKindNextToASearchEndsTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		item  string
		reply string // the client's reply to item; "" where the round goes on
	}{
		{"a custom tool's call ends the turn",
			`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_client","name":"apply_patch","input":"*** Begin Patch\n*** End Patch","status":"completed"}`,
			`{"type":"custom_tool_call_output","call_id":"call_client","output":"ok"}`},
		{"a computer action ends the turn",
			`{"type":"computer_call","id":"cu_1","call_id":"call_client","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`,
			`{"type":"computer_call_output","call_id":"call_client","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAAA"}}`},
		{"a local shell call ends the turn",
			`{"type":"local_shell_call","id":"lsh_1","call_id":"call_client","action":{"type":"exec","command":["ls"],"env":{}},"status":"completed"}`,
			`{"type":"local_shell_call_output","call_id":"call_client","output":"a.go"}`},
		{"a shell call in the client's environment ends the turn",
			`{"type":"shell_call","id":"sh_1","call_id":"call_client","action":{"commands":["ls"]},"environment":{"type":"local"},"status":"completed"}`,
			`{"type":"shell_call_output","call_id":"call_client","output":[{"stdout":"a.go","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`},
		{"a patch to apply ends the turn",
			`{"type":"apply_patch_call","id":"apc_1","call_id":"call_client","operation":{"type":"update_file","path":"a.go","diff":"@@\n-a\n+b"},"status":"completed"}`,
			`{"type":"apply_patch_call_output","call_id":"call_client","status":"completed"}`},
		{"an MCP approval request ends the turn",
			`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"deepwiki","name":"ask_question","arguments":"{}"}`,
			`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`},
		{"a call of a client function ends the turn",
			`{"type":"function_call","id":"fc_r","call_id":"call_client","name":"repo_create_issue","arguments":"{}","status":"completed"}`,
			`{"type":"function_call_output","call_id":"call_client","output":"ok"}`},
		{"a web search the upstream ran leaves the round the gateway's",
			`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"issues"}}`, ""},
		{"a shell call the upstream ran in its container, its output next to it, leaves the round the gateway's",
			`{"type":"shell_call","id":"sh_1","call_id":"call_hosted","action":{"commands":["ls"]},"environment":{"type":"container_reference","container_id":"cntr_1"},"status":"completed"},` +
				`{"type":"shell_call_output","id":"sho_1","call_id":"call_hosted","output":[{"stdout":"a.go","stderr":"","outcome":{"type":"exit","exit_code":0}}],"status":"completed"}`, ""},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name + map[bool]string{false: ", whole", true: ", streamed"}[stream]
			t.Run(name, func(t *testing.T) {
				up := &clientItemUpstream{item: tc.item, waits: tc.reply != ""}
				base := newTestGateway(t, up)
				client := sdkClient(base)
				tools := append(sdkResponseTools(40),
					responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: openai.String("Apply a patch.")}})
				resp, err := sdkResponse(context.Background(), t, client, responses.ResponseNewParams{
					Model: "gpt-test", Tools: tools,
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("fix the bug and file an issue")},
				}, stream)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, it := range resp.Output {
					got = append(got, it.Type)
				}
				up.mu.Lock()
				calls := len(up.bodies)
				up.mu.Unlock()
				if tc.reply == "" {
					if calls != 2 || resp.OutputText() != "Done." {
						t.Errorf("%d upstream calls, the client got %v saying %q; want the round answered (2 calls) and the answer", calls, got, resp.OutputText())
					}
					return
				}
				if want := gjson.Get(tc.item, "type").String(); calls != 1 || strings.Join(got, ",") != want {
					t.Fatalf("%d upstream calls, the client got %v; want one call and the client's %s alone", calls, got, want)
				}
				toolsJSON, err := json.Marshal(tools)
				if err != nil {
					t.Fatal(err)
				}
				next := postPath(t, base+"/responses", []byte(`{"model":"gpt-test","previous_response_id":"`+resp.ID+`","input":[`+tc.reply+`],"tools":`+string(toolsJSON)+`}`))
				b, _ := io.ReadAll(next.Body)
				next.Body.Close()
				if next.StatusCode != http.StatusOK {
					t.Fatalf("continuing: status %d: %s", next.StatusCode, b)
				}
				up.mu.Lock()
				last := up.bodies[len(up.bodies)-1]
				up.mu.Unlock()
				if out := gjson.GetBytes(last, `input.#(call_id=="call_search").output`).String(); !strings.Contains(out, "repo_") {
					t.Errorf("the continuation's output for the gateway's search: %q; want its answer to that search: %s", out, last)
				}
			})
		}
	}
}

// scriptedResponses is a Responses upstream that answers its requests
// with outputs, in order (JSON arrays), whole or streamed as asked.
type scriptedResponses struct {
	outputs []string
	n       atomic.Int32
}

func (u *scriptedResponses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := int(u.n.Add(1)) - 1
	if n >= len(u.outputs) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	writeResponse(w, fmt.Sprintf("resp_%d", n), u.outputs[n], gjson.GetBytes(body, "stream").Bool())
}

// TestASearchRoundsItemsReachTheClientStreamedOrNot: the items of the
// gateway's search rounds a client sees (a built-in tool's call and
// result, a message, the reasoning that led to them) reach a whole answer
// as they reach a stream, in the same order; only the gateway's calls,
// and the reasoning that led to nothing else, are left out.
func TestASearchRoundsItemsReachTheClientStreamedOrNot(t *testing.T) {
	const (
		search = `{"type":"function_call","id":"fc_s","call_id":"call_s","name":"tool_search","arguments":"{\"query\":\"upload file\"}","status":"completed"}`
		call   = `{"type":"function_call","id":"fc_w","call_id":"call_w","name":"repo_create_issue","arguments":"{}","status":"completed"}`
		web    = `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"paris weather"}}`
		image  = `{"type":"image_generation_call","id":"ig_1","status":"completed","result":"iVBORw0KGgo"}`
		mcp    = `{"type":"mcp_call","id":"mcp_1","server_label":"deepwiki","name":"ask_question","arguments":"{}","output":"ok"}`
		said   = `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Let me look."}]}`
		done   = `{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Done."}]}`
	)
	reasoning := func(id string) string { return `{"type":"reasoning","id":"` + id + `","summary":[]}` }
	for _, tc := range []struct {
		name   string
		rounds []string // the upstream's outputs, the last the client's
		want   []string // the ids of the client's output items
	}{
		{"a web search and an image of a search round come before the client's call",
			[]string{"[" + web + "," + image + "," + search + "]", "[" + call + "]"}, []string{"ws_1", "ig_1", "fc_w"}},
		{"an MCP call of a search round comes before the answer",
			[]string{"[" + mcp + "," + search + "]", "[" + done + "]"}, []string{"mcp_1", "msg_2"}},
		{"reasoning that led to a search round's message comes with it",
			[]string{"[" + reasoning("rs_1") + "," + said + "," + search + "]", "[" + done + "]"}, []string{"rs_1", "msg_1", "msg_2"}},
		{"reasoning before the search comes with the web search after it",
			[]string{"[" + reasoning("rs_1") + "," + search + "," + web + "]", "[" + call + "]"}, []string{"rs_1", "ws_1", "fc_w"}},
		{"reasoning that led only to the search is left out",
			[]string{"[" + reasoning("rs_1") + "," + search + "]", "[" + reasoning("rs_2") + "," + call + "]"}, []string{"rs_2", "fc_w"}},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name + map[bool]string{false: ", whole", true: ", streamed"}[stream]
			t.Run(name, func(t *testing.T) {
				up := &scriptedResponses{outputs: tc.rounds}
				client := sdkClient(newTestGateway(t, up))
				resp, err := sdkResponse(context.Background(), t, client, responses.ResponseNewParams{
					Model: "gpt-test", Tools: sdkResponseTools(40),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw a cat and upload it")},
				}, stream)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, it := range resp.Output {
					got = append(got, it.ID)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("the client's output %v; want %v", got, tc.want)
				}
				if n := int(up.n.Load()); n != len(tc.rounds) {
					t.Errorf("%d upstream calls; want %d", n, len(tc.rounds))
				}
			})
		}
	}
}
