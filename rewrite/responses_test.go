package rewrite

import (
	"cmp"
	"errors"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

func TestResponsesParseRequestReadsTheConversation(t *testing.T) {
	const tools = `[{"type":"function","name":"repo_create_issue","description":"Create an issue.","parameters":{}},{"type":"function","name":"chat_post_message","parameters":{}}]`
	for _, tc := range []struct {
		name  string
		body  string
		check func(t *testing.T, r *Request)
	}{
		{"a text input is one user message and a new turn", `{"model":"m","input":"File a bug.","instructions":"Be brief.","tools":` + tools + `}`, func(t *testing.T, r *Request) {
			if !r.UserTurn || r.FirstUser != "File a bug." || r.LastUser != "File a bug." || r.Messages != 1 {
				t.Errorf("UserTurn %v FirstUser %q LastUser %q Messages %d", r.UserTurn, r.FirstUser, r.LastUser, r.Messages)
			}
			if r.System != "Be brief." || len(r.Tools) != 2 || r.Tools[1].Name != "chat_post_message" || !r.ChainsByID {
				t.Errorf("System %q, tools %v, ChainsByID %v", r.System, r.Tools, r.ChainsByID)
			}
		}},
		{"a request that asks the upstream not to store its response cannot be continued by id", `{"model":"m","input":"File a bug.","store":false,"tools":` + tools + `}`, func(t *testing.T, r *Request) {
			if r.ChainsByID {
				t.Error("ChainsByID with store false")
			}
		}},
		{"a request that asks the upstream to store its response can be continued by id", `{"model":"m","input":"File a bug.","store":true,"tools":` + tools + `}`, func(t *testing.T, r *Request) {
			if !r.ChainsByID {
				t.Error("no ChainsByID with store true")
			}
		}},
		{"calls, reasoning and outputs after the user's message make steps", `{"model":"m","tools":` + tools + `,"input":[
			{"role":"user","content":"File a bug and tell the team."},
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call","call_id":"c1","name":"repo_create_issue","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"ok"},
			{"type":"reasoning","id":"rs_2","summary":[]},
			{"type":"function_call","call_id":"c2","name":"chat_post_message","arguments":"{}"},
			{"type":"function_call","call_id":"c3","name":"repo_create_issue","arguments":"{}"},
			{"type":"function_call_output","call_id":"c2","output":"ok"},
			{"type":"function_call_output","call_id":"c3","output":"ok"}]}`, func(t *testing.T, r *Request) {
			if r.UserTurn || r.TurnSteps != 2 || r.Messages != 9 {
				t.Errorf("UserTurn %v, TurnSteps %d, Messages %d; want false, 2, 9", r.UserTurn, r.TurnSteps, r.Messages)
			}
			if !slices.Equal(r.CalledTail, []string{"chat_post_message", "repo_create_issue"}) || !slices.Equal(r.TailNew, []string{"chat_post_message"}) {
				t.Errorf("CalledTail %v, TailNew %v", r.CalledTail, r.TailNew)
			}
			if !slices.Equal(r.Called, []string{"repo_create_issue", "chat_post_message"}) {
				t.Errorf("Called %v", r.Called)
			}
		}},
		{"a developer message stands for missing instructions", `{"model":"m","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"Use tools."}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`, func(t *testing.T, r *Request) {
			if r.System != "Use tools." || r.LastUser != "Hi" || !r.UserTurn {
				t.Errorf("System %q LastUser %q UserTurn %v", r.System, r.LastUser, r.UserTurn)
			}
		}},
		{"tool_choice, allowed tools, JSON output, a chain and a conversation are read", `{"model":"m","input":"x","tools":` + tools + `,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"chat_post_message"},{"type":"web_search"}]},"text":{"format":{"type":"json_schema","name":"x","schema":{}}},"previous_response_id":"resp_9","conversation":"conv_1"}`, func(t *testing.T, r *Request) {
			if !slices.Equal(r.Allowed, []string{"chat_post_message"}) || !r.JSONOutput || r.Previous != "resp_9" || !r.ServerConversation {
				t.Errorf("Allowed %v JSONOutput %v Previous %q ServerConversation %v", r.Allowed, r.JSONOutput, r.Previous, r.ServerConversation)
			}
		}},
		{"a forced function is the tool_choice", `{"model":"m","input":"x","tools":` + tools + `,"tool_choice":{"type":"function","name":"repo_create_issue"}}`, func(t *testing.T, r *Request) {
			if r.ToolChoice != "repo_create_issue" {
				t.Errorf("ToolChoice %q", r.ToolChoice)
			}
		}},
		{"built-in and custom tools are pinned, functions searched", `{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"function","name":"a"},{"type":"custom","name":"apply_patch","description":"Patch."}]}`, func(t *testing.T, r *Request) {
			if len(r.Tools) != 1 || r.Tools[0].Name != "a" || !slices.Equal(r.Pinned, []string{`{"type":"web_search"}`, `{"type":"custom","name":"apply_patch","description":"Patch."}`}) {
				t.Errorf("tools %+v, pinned %q", r.Tools, r.Pinned)
			}
			if full := r.ToolsWithParams(); len(full) != 1 || full[0].Name != "a" {
				t.Errorf("the catalog's tools %+v, want the function alone", full)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Responses{}.ParseRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestResponsesParseRequestRefusesBadBodies(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"an input object is refused", `{"input":{"role":"user"}}`, "input"},
		{"a function tool without a name is refused", `{"input":"x","tools":[{"type":"function"}]}`, "tools"},
		{"a body that is an array is refused", `[]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Responses{}.ParseRequest([]byte(tc.body), nil)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			var pe *ParamError
			if got := ""; errors.As(err, &pe) {
				got = pe.Param
				if got != tc.param {
					t.Errorf("param %q, want %q", got, tc.param)
				}
			} else if tc.param != "" {
				t.Errorf("no param, want %q", tc.param)
			}
		})
	}
}

func TestResponsesBuildSendsRoundsAsItems(t *testing.T) {
	search, err := Responses{}.OwnTool(`{"type":"function","function":{"name":"tool_search","description":"Find tools.","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}`)
	if err != nil {
		t.Fatal(err)
	}
	client := `{"type":"function","name":"repo_create_issue","parameters":{}}`
	round := Round{
		Extra:   `{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"c1","name":"tool_search","arguments":"{\"query\":\"issue\"}"}`,
		Calls:   []Call{{ID: "c1", Name: "tool_search", Arguments: `{"query":"issue"}`}},
		Results: []ToolResult{{CallID: "c1", Content: "Found: repo_create_issue"}},
	}
	for _, tc := range []struct {
		name, body string
		rounds     []Round
		wantInput  []string // the input items' types (or roles)
	}{
		{"a text input becomes a user message the round's items follow", `{"model":"m","input":"File a bug.","tools":[]}`, []Round{round}, []string{"user", "reasoning", "function_call", "function_call_output"}},
		{"an item list gets the round's items at its end", `{"model":"m","input":[{"role":"user","content":"File a bug."}],"tools":[]}`, []Round{round}, []string{"user", "reasoning", "function_call", "function_call_output"}},
		{"a request without input gets the round's items as its input", `{"model":"m","previous_response_id":"resp_1","tools":[]}`, []Round{round}, []string{"reasoning", "function_call", "function_call_output"}},
		{"a round without its items sends its calls", `{"model":"m","input":[],"tools":[]}`, []Round{{Calls: round.Calls, Results: round.Results}}, []string{"function_call", "function_call_output"}},
		{"no rounds leave the input as it was", `{"model":"m","input":"File a bug.","tools":[]}`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Responses{}.ParseRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Responses{}.Build(req, []string{search, client}, tc.rounds)
			if err != nil {
				t.Fatal(err)
			}
			if !gjson.ValidBytes(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			tools := gjson.GetBytes(out, "tools").Array()
			if len(tools) != 2 || tools[0].Get("name").String() != "tool_search" || tools[0].Get("strict").Type != gjson.False || tools[0].Get("function").Exists() {
				t.Errorf("tools not flat with strict false: %s", gjson.GetBytes(out, "tools").Raw)
			}
			if tools[1].Raw != client {
				t.Errorf("the client's tool changed: %s", tools[1].Raw)
			}
			in := gjson.GetBytes(out, "input")
			if tc.rounds == nil {
				if in.Raw != gjson.Get(tc.body, "input").Raw {
					t.Errorf("input %s, want it unchanged", in.Raw)
				}
				return
			}
			var got []string
			in.ForEach(func(_, it gjson.Result) bool {
				got = append(got, cmp.Or(it.Get("type").String(), it.Get("role").String()))
				return true
			})
			if !slices.Equal(got, tc.wantInput) {
				t.Errorf("input items %v, want %v: %s", got, tc.wantInput, in.Raw)
			}
			if o := in.Get(`#(type=="function_call_output")`); o.Get("call_id").String() != "c1" || o.Get("output").String() != "Found: repo_create_issue" {
				t.Errorf("function_call_output %s", o.Raw)
			}
		})
	}
}

func TestResponsesClientResponseShowsOnlyTheClientsCalls(t *testing.T) {
	body := `{"id":"resp_2","object":"response","status":"completed","output":[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"c1","name":"tool_search","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"repo_create_issue","arguments":"{}"}],"usage":{"input_tokens":50,"output_tokens":5,"total_tokens":55}}`
	r, err := Responses{}.ParseResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Calls) != 2 || r.Calls[1].ID != "c2" || r.ID != "resp_2" || !gjson.Valid("["+r.Extra+"]") {
		t.Fatalf("parsed %+v", r)
	}
	for _, tc := range []struct {
		name      string
		turn      Turn
		wantTypes []string
		wantInput int64
	}{
		{"the gateway's calls leave the output", Turn{}, []string{"reasoning", "function_call"}, 50},
		{"what earlier rounds said leads the output, and usage is the turn's", Turn{Text: "Let me look.", Usage: []byte(`{"input_tokens":120,"output_tokens":9,"total_tokens":129}`), ID: "resp_1"}, []string{"message", "reasoning", "function_call"}, 120},
		{"what earlier rounds said leads the output as the upstream's own message items", Turn{Text: "Let me look.", ID: "resp_1", Rounds: []Round{{
			Extra: `{"type":"message","id":"msg_round0","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Let me look."}]},{"type":"function_call","id":"fc_1","call_id":"c0","name":"tool_search","arguments":"{}"}`,
		}}}, []string{"message", "reasoning", "function_call"}, 50},
		{"a search round's built-in tools' items lead the output, as a stream shows them", Turn{ID: "resp_1", Rounds: []Round{{
			Extra: `{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"image_generation_call","id":"ig_1","status":"completed","result":"AAAA"},{"type":"function_call","id":"fc_1","call_id":"c0","name":"tool_search","arguments":"{}"}`,
		}}}, []string{"web_search_call", "image_generation_call", "reasoning", "function_call"}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.turn.Keep = func(c Call) bool { return c.Name != "tool_search" }
			out, err := Responses{}.ClientResponse(r, tc.turn)
			if err != nil {
				t.Fatal(err)
			}
			types := itemTypes(out, "output")
			if !slices.Equal(types, tc.wantTypes) {
				t.Errorf("output %v, want %v: %s", types, tc.wantTypes, out)
			}
			if got := gjson.GetBytes(out, "usage.input_tokens").Int(); got != tc.wantInput {
				t.Errorf("usage.input_tokens %d, want %d", got, tc.wantInput)
			}
			if id := gjson.GetBytes(out, "id").String(); id != "resp_2" {
				t.Errorf("id %q, want the last round's resp_2, which a previous_response_id can chain to", id)
			}
			if tc.turn.Text != "" && gjson.GetBytes(out, "output.0.content.0.text").String() != tc.turn.Text {
				t.Errorf("first item %s", gjson.GetBytes(out, "output.0").Raw)
			}
			gjson.GetBytes(out, "output").ForEach(func(_, it gjson.Result) bool {
				if it.Get("type").String() == "message" && it.Get("id").String() == "" {
					t.Errorf("a message item without an id, which the AI SDK refuses: %s", it.Raw)
				}
				return true
			})
			if len(tc.turn.Rounds) > 0 && tc.turn.Text != "" && gjson.GetBytes(out, "output.0.id").String() != "msg_round0" {
				t.Errorf("first item %s, want the round's own message msg_round0", gjson.GetBytes(out, "output.0").Raw)
			}
		})
	}
}

func TestContinuePutsThePendingOutputsBeforeTheInput(t *testing.T) {
	pending := []ToolResult{{CallID: "call_s", Content: "Found 1 tool."}}
	for _, tc := range []struct {
		name, body string
		want       []string // the input items' types or roles, in order
	}{
		{"before the items of an input list", `{"input":[{"type":"function_call_output","call_id":"call_r","output":"ok"}]}`, []string{"function_call_output:call_s", "function_call_output:call_r"}},
		{"before a text input, made a user message", `{"input":"and now?"}`, []string{"function_call_output:call_s", "user"}},
		{"as the input when there is none", `{"model":"m"}`, []string{"function_call_output:call_s"}},
		{"in an empty input list", `{"input":[]}`, []string{"function_call_output:call_s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Continue([]byte(tc.body), &Request{Previous: "resp_1", PendingOutputs: pending})
			if err != nil {
				t.Fatal(err)
			}
			if !gjson.ValidBytes(out) {
				t.Fatalf("invalid JSON %s", out)
			}
			var got []string
			gjson.GetBytes(out, "input").ForEach(func(_, it gjson.Result) bool {
				if it.Get("type").String() == "function_call_output" {
					got = append(got, "function_call_output:"+it.Get("call_id").String())
				} else {
					got = append(got, it.Get("role").String())
				}
				return true
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("input %v, want %v: %s", got, tc.want, out)
			}
		})
	}
}

func TestStatelessItemsGoBackWithoutIDs(t *testing.T) {
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"a reasoning item without its encrypted content is left out; the call goes without its id",
			`{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","id":"fc_1","call_id":"c1","name":"tool_search","arguments":"{}"}`,
			`{"type":"function_call","call_id":"c1","name":"tool_search","arguments":"{}"}`},
		{"a reasoning item with its encrypted content goes, without its id",
			`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},{"type":"message","id":"msg_1","role":"assistant","content":[]}`,
			`{"type":"reasoning","summary":[],"encrypted_content":"gAAA"},{"type":"message","role":"assistant","content":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statelessItems(tc.extra); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// itemTypes returns the types of the items of the array at path in body
// (a response's output, a message's content blocks), in order.
func itemTypes(body []byte, path string) []string {
	var types []string
	gjson.GetBytes(body, path).ForEach(func(_, it gjson.Result) bool {
		types = append(types, it.Get("type").String())
		return true
	})
	return types
}

// TestAnOutputItemThatWaitsForTheClientIsNoted: a response whose output
// holds a call the client runs that is not a function call (its reply
// is not in the response) is the client's round, whole or streamed; an
// item the upstream ran itself, its output next to it, is not.
func TestAnOutputItemThatWaitsForTheClientIsNoted(t *testing.T) {
	search := `{"type":"function_call","id":"fc_s","call_id":"call_s","name":"tool_search","arguments":"{}"}`
	for _, tc := range []struct {
		name  string
		items string
		want  bool
	}{
		{"a custom tool's call waits", `{"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"apply_patch","input":"x"}`, true},
		{"a computer action waits", `{"type":"computer_call","id":"cu_1","call_id":"c1","action":{"type":"screenshot"},"pending_safety_checks":[]}`, true},
		{"a local shell call waits", `{"type":"local_shell_call","id":"lsh_1","call_id":"c1","action":{"type":"exec","command":["ls"],"env":{}}}`, true},
		{"a shell call in the client's environment waits", `{"type":"shell_call","id":"sh_1","call_id":"c1","action":{"commands":["ls"]},"environment":{"type":"local"}}`, true},
		{"a patch to apply waits", `{"type":"apply_patch_call","id":"apc_1","call_id":"c1","operation":{"type":"delete_file","path":"a.go"}}`, true},
		{"an MCP approval request waits", `{"type":"mcp_approval_request","id":"mcpr_1","server_label":"s","name":"n","arguments":"{}"}`, true},
		{"a tool search the client executes waits", `{"type":"tool_search_call","id":"tsc_1","call_id":"c1","execution":"client","arguments":{}}`, true},
		{"a tool search the upstream executed does not", `{"type":"tool_search_call","id":"tsc_1","call_id":"c1","execution":"server","arguments":{}},{"type":"tool_search_output","id":"tso_1","call_id":"c1","execution":"server","tools":[]}`, false},
		{"a shell call the upstream ran, its output next to it, does not", `{"type":"shell_call","id":"sh_1","call_id":"c1","action":{"commands":["ls"]},"environment":{"type":"container_reference","container_id":"cntr_1"}},{"type":"shell_call_output","id":"sho_1","call_id":"c1","output":[]}`, false},
		{"a web search, an image and an MCP call do not", `{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"image_generation_call","id":"ig_1","result":"AAAA"},{"type":"mcp_call","id":"mcp_1","server_label":"s","name":"n","arguments":"{}","output":"ok"}`, false},
		{"function calls alone do not", `{"type":"function_call","id":"fc_1","call_id":"c1","name":"repo_create_issue","arguments":"{}"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"id":"resp_1","object":"response","status":"completed","output":[` + tc.items + `,` + search + `]}`
			r, err := Responses{}.ParseResponse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if r.Awaits != tc.want {
				t.Errorf("whole: Awaits %v, want %v", r.Awaits, tc.want)
			}
			ev, err := Responses{}.ParseItemEvent([]byte(`{"type":"response.completed","sequence_number":9,"response":` + body + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Awaits != tc.want {
				t.Errorf("streamed: Awaits %v, want %v", ev.Awaits, tc.want)
			}
		})
	}
}
