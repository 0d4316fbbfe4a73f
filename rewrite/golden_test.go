package rewrite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestBuildMatchesGoldenFiles checks the request the upstream gets,
// byte for byte: only tools and messages change (and stream usage is
// requested); every other field passes through untouched.
func TestBuildMatchesGoldenFiles(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "golden", "search_round.in.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "search_round.want.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := ParseRequest(bytes.TrimSpace(in))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Chat{}.Build(req, []string{`{"type":"function","function":{"name":"tool_search"}}`, req.Tools[0].Raw}, []Round{{
		Calls:   []Call{{ID: "call_1", Name: "tool_search", Arguments: `{"query":"create issue"}`}},
		Results: []ToolResult{{CallID: "call_1", Content: "Found 1 tool(s)."}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Errorf("Build mismatch:\n got %s\nwant %s", got, bytes.TrimSpace(want))
	}
	if !gjson.ValidBytes(got) {
		t.Error("Build produced invalid JSON")
	}
}

func TestBuildWithoutToolsRemovesToolChoice(t *testing.T) {
	req, err := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required","parallel_tool_calls":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Chat{}.Build(req, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
		if gjson.GetBytes(got, p).Exists() {
			t.Errorf("%s still present: %s", p, got)
		}
	}
}

func TestParseRequestReadsTheConversation(t *testing.T) {
	body := []byte(`{"model":"m","tool_choice":{"type":"function","function":{"name":"b"}},"messages":[
		{"role":"developer","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"first"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"a","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"1","content":"ok"},
		{"role":"user","content":"second"},
		{"role":"assistant","tool_calls":[{"id":"2","type":"function","function":{"name":"b","arguments":"{}"}},{"id":"3","type":"function","function":{"name":"a","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"2","content":"ok"}]}`)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"the system prompt comes from the first system or developer message", r.System, "sys"},
		{"the first user message is read from content parts", r.FirstUser, "first"},
		{"the latest user message is the last one", r.LastUser, "second"},
		{"a tool result is not a user turn", r.UserTurn, false},
		{"every message is counted", r.Messages, 7},
		{"the turn's calls are those since the latest user message", strings.Join(r.TurnCalled, ","), "b,a"},
		{"the turn's steps count its tool-calling messages, not its calls", r.TurnSteps, 1},
		{"tool_choice names its function", r.ToolChoice, "b"},
		{"called tools are listed once in first-call order", len(r.Called) == 2 && r.Called[0] == "a" && r.Called[1] == "b", true},
		{"the tail lists the last assistant's calls", len(r.CalledTail) == 2 && r.CalledTail[0] == "b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestTheTailsNewCallsAreThoseTheTurnHadNotMade(t *testing.T) {
	var many []string // past scanTurnCalled: the turn's names are indexed
	for i := range 2 * scanTurnCalled {
		many = append(many, fmt.Sprintf("n%d", i))
	}
	step := func(id string, names ...string) string {
		var calls []string
		for i, n := range names {
			calls = append(calls, fmt.Sprintf(`{"id":"%s%d","type":"function","function":{"name":%q,"arguments":"{}"}}`, id, i, n))
		}
		return `{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]},{"role":"tool","tool_call_id":"` + id + `0","content":"ok"}`
	}
	for _, tc := range []struct {
		name, msgs, want string
	}{
		{"the turn's first step: all its calls are new", `{"role":"user","content":"go"},` + step("x", "a", "b"), "a,b"},
		{"a later step: only the tools not called before in the turn", `{"role":"user","content":"go"},` + step("x", "a") + `,` + step("y", "a", "c", "c"), "c"},
		{"a tool called in an earlier turn is new to this one", `{"role":"user","content":"one"},` + step("x", "a") + `,{"role":"user","content":"two"},` + step("y", "a"), "a"},
		{"a user turn has no tail of its own", `{"role":"user","content":"one"},` + step("x", "a") + `,{"role":"user","content":"two"}`, ""},
		{"a turn of more names than a scan serves still knows what it called", `{"role":"user","content":"go"},` + step("x", many...) + `,` + step("y", "n3", "z", "n19", "z"), "z"},
		{"a turn of many names forgets them at the next user message", `{"role":"user","content":"one"},` + step("x", many...) + `,{"role":"user","content":"two"},` + step("y", "n3", "n3"), "n3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"m","messages":[` + tc.msgs + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(r.TailNew, ","); got != tc.want {
				t.Errorf("TailNew %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLastCalledListsTheLatestCallsMostRecentLast: the recency a session
// keeps must follow the agent's latest calls, where Called follows its
// first ones.
func TestLastCalledListsTheLatestCallsMostRecentLast(t *testing.T) {
	step := func(id string, names ...string) string {
		var calls []string
		for i, n := range names {
			calls = append(calls, fmt.Sprintf(`{"id":"%s%d","type":"function","function":{"name":%q,"arguments":"{}"}}`, id, i, n))
		}
		return `{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]},{"role":"tool","tool_call_id":"` + id + `0","content":"ok"}`
	}
	var ten []string
	for i := range 10 {
		ten = append(ten, fmt.Sprintf("t%d", i))
	}
	for _, tc := range []struct {
		name, msgs, wantCalled, wantLast string
	}{
		{"a tool called again moves to the end", `{"role":"user","content":"one"},` + step("x", "read", "edit") + `,{"role":"user","content":"two"},` + step("y", "read"),
			"read,edit", "edit,read"},
		{"a tool called twice in a step is listed once", `{"role":"user","content":"go"},` + step("x", "a", "b", "a"),
			"a,b", "b,a"},
		{"only the latest LastCalls names are kept", `{"role":"user","content":"go"},` + step("x", ten...) + `,` + step("y", "t0"),
			strings.Join(ten, ","), "t3,t4,t5,t6,t7,t8,t9,t0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"m","messages":[` + tc.msgs + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(r.Called, ","); got != tc.wantCalled {
				t.Errorf("Called %q, want %q", got, tc.wantCalled)
			}
			if got := strings.Join(r.LastCalled, ","); got != tc.wantLast {
				t.Errorf("LastCalled %q, want %q", got, tc.wantLast)
			}
		})
	}
}

func TestParseRequestReadsEachFormOfToolChoice(t *testing.T) {
	for _, tc := range []struct {
		name        string
		choice      string
		wantChoice  string
		wantAllowed string
	}{
		{"a mode names no tool", `"required"`, "", ""},
		{"a named function is the forced tool", `{"type":"function","function":{"name":"b"}}`, "b", ""},
		{"a named custom tool is the forced tool", `{"type":"custom","custom":{"name":"run"}}`, "run", ""},
		{"allowed_tools lists every tool it allows, functions and custom", `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"a"}},{"type":"custom","custom":{"name":"run"}},{"type":"function"}]}}`, "", "a,run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":` + tc.choice + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if r.ToolChoice != tc.wantChoice || strings.Join(r.Allowed, ",") != tc.wantAllowed {
				t.Errorf("ToolChoice %q, Allowed %q; want %q, %q", r.ToolChoice, strings.Join(r.Allowed, ","), tc.wantChoice, tc.wantAllowed)
			}
		})
	}
}

func TestParseRequestTakesTheFirstOfARepeatedKey(t *testing.T) {
	// gjson.Get reads a repeated member's first value; the one-pass parse
	// must agree, or the gateway and the fast path would disagree.
	r, err := ParseRequest([]byte(`{"model":"a","stream":false,"n":1,"messages":[{"role":"user","content":"hi"}],` +
		`"model":"b","stream":true,"n":3,"messages":"not an array"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "a" || r.Stream || r.N != 1 || r.LastUser != "hi" {
		t.Errorf("model %q stream %v n %d last user %q; want the first occurrences", r.Model, r.Stream, r.N, r.LastUser)
	}
}

func TestAddUsageSumsEveryNumber(t *testing.T) {
	acc := AddUsage(nil, gjson.Parse(`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}`))
	acc = AddUsage(acc, gjson.Parse(`{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":7}}`))
	for path, want := range map[string]int64{"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35, "prompt_tokens_details.cached_tokens": 5, "prompt_tokens_details.audio_tokens": 7} {
		if got := gjson.GetBytes(acc, path).Int(); got != want {
			t.Errorf("%s = %d, want %d (%s)", path, got, want, acc)
		}
	}
}

func TestUsageKeepsFractionalNumbers(t *testing.T) {
	// OpenRouter reports what a call cost in dollars next to the token
	// counts; summed as whole numbers, a two-round turn would cost nothing.
	first := gjson.Parse(`{"prompt_tokens":10,"cost":0.00014,"cost_details":{"upstream_inference_cost":0.0001}}`)
	second := gjson.Parse(`{"prompt_tokens":20,"cost":0.0002,"cost_details":{"upstream_inference_cost":2e-4}}`)
	for _, tc := range []struct {
		name  string
		merge func([]byte, gjson.Result) []byte
		want  map[string]string
	}{
		{"a sum of rounds adds the fractions", AddUsage, map[string]string{"prompt_tokens": "30", "cost": "0.00034", "cost_details.upstream_inference_cost": "0.0003"}},
		{"a stream's latest usage takes the later fraction", LatestUsage, map[string]string{"prompt_tokens": "20", "cost": "0.0002", "cost_details.upstream_inference_cost": "2e-4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := tc.merge(tc.merge(nil, first), second)
			if !gjson.ValidBytes(acc) {
				t.Fatalf("invalid JSON %s", acc)
			}
			for path, want := range tc.want {
				if got := gjson.GetBytes(acc, path).Raw; got != want {
					t.Errorf("%s = %s, want %s (%s)", path, got, want, acc)
				}
			}
		})
	}
}

func TestLatestUsageTakesEachNumbersLastValue(t *testing.T) {
	acc := LatestUsage(nil, gjson.Parse(`{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4}}`))
	acc = LatestUsage(acc, gjson.Parse(`{"prompt_tokens":10,"completion_tokens":6,"total_tokens":16,"completion_tokens_details":{"reasoning_tokens":3}}`))
	for path, want := range map[string]int64{"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16, "prompt_tokens_details.cached_tokens": 4, "completion_tokens_details.reasoning_tokens": 3} {
		if got := gjson.GetBytes(acc, path).Int(); got != want {
			t.Errorf("%s = %d, want %d (%s)", path, got, want, acc)
		}
	}
}

func TestContextUsageCountsTheLastRoundsInputAndEveryRoundsOutput(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second string
		want          map[string]string
	}{
		{"chat completions",
			`{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}}`,
			`{"prompt_tokens":1100,"completion_tokens":30,"total_tokens":1130,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":7}}`,
			map[string]string{"prompt_tokens": "1100", "prompt_tokens_details.cached_tokens": "1024", "completion_tokens": "50", "completion_tokens_details.reasoning_tokens": "12", "total_tokens": "1150"}},
		{"the Responses API",
			`{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":1020}`,
			`{"input_tokens":1100,"input_tokens_details":{"cached_tokens":1024},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":1130}`,
			map[string]string{"input_tokens": "1100", "input_tokens_details.cached_tokens": "1024", "output_tokens": "50", "output_tokens_details.reasoning_tokens": "12", "total_tokens": "1150"}},
		{"Anthropic's Messages API, its cache reads and writes included",
			`{"input_tokens":10,"cache_creation_input_tokens":900,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":900},"output_tokens":20,"server_tool_use":{"web_search_requests":1}}`,
			`{"input_tokens":110,"cache_creation_input_tokens":0,"cache_read_input_tokens":900,"cache_creation":{"ephemeral_5m_input_tokens":0},"output_tokens":30,"server_tool_use":{"web_search_requests":1}}`,
			map[string]string{"input_tokens": "110", "cache_creation_input_tokens": "0", "cache_read_input_tokens": "900", "cache_creation.ephemeral_5m_input_tokens": "0", "output_tokens": "50", "server_tool_use.web_search_requests": "2", "total_tokens": ""}},
		{"DeepSeek's cache hits and misses are the last round's, as its prompt is",
			`{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1000}`,
			`{"prompt_tokens":1100,"completion_tokens":30,"total_tokens":1130,"prompt_tokens_details":{"cached_tokens":960},"prompt_cache_hit_tokens":960,"prompt_cache_miss_tokens":140}`,
			map[string]string{"prompt_tokens": "1100", "prompt_cache_hit_tokens": "960", "prompt_cache_miss_tokens": "140", "prompt_tokens_details.cached_tokens": "960", "completion_tokens": "50", "total_tokens": "1150"}},
		{"a provider's cost stays what every round cost",
			`{"prompt_tokens":1000,"completion_tokens":20,"cost":0.001}`,
			`{"prompt_tokens":1100,"completion_tokens":30,"cost":0.002}`,
			map[string]string{"prompt_tokens": "1100", "completion_tokens": "50", "cost": "0.003"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := gjson.Parse(tc.first), gjson.Parse(tc.second)
			got := ContextUsage(AddUsage(AddUsage(nil, first), second), []byte(second.Raw))
			if !gjson.ValidBytes(got) {
				t.Fatalf("invalid JSON %s", got)
			}
			for path, want := range tc.want {
				if v := gjson.GetBytes(got, path).Raw; v != want {
					t.Errorf("%s = %s, want %q (%s)", path, v, want, got)
				}
			}
		})
	}
	t.Run("a turn of one round, or without usage, is left as it is", func(t *testing.T) {
		if got := ContextUsage(nil, []byte(`{"prompt_tokens":1}`)); got != nil {
			t.Errorf("no sum: %s", got)
		}
		sum := []byte(`{"prompt_tokens":1}`)
		for _, last := range [][]byte{nil, {}} {
			if got := ContextUsage(sum, last); string(got) != string(sum) {
				t.Errorf("a last round without usage (%q): %s", last, got)
			}
		}
	})
}

func TestClientResponseStripsInternalCalls(t *testing.T) {
	body := []byte(`{"id":"r2","created":2,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"s","type":"function","function":{"name":"tool_search","arguments":"{}"}},{"id":"x","type":"function","function":{"name":"real","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`)
	r, err := ParseResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	keepReal := func(c Call) bool { return c.Name != "tool_search" }
	got, err := Chat{}.ClientResponse(r, Turn{Keep: keepReal, Usage: []byte(`{"prompt_tokens":9}`), ID: "r1", Created: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := gjson.ParseBytes(got)
	if n := len(g.Get("choices.0.message.tool_calls").Array()); n != 1 || g.Get("choices.0.message.tool_calls.0.function.name").String() != "real" {
		t.Errorf("tool_calls = %s", g.Get("choices.0.message.tool_calls"))
	}
	if g.Get("id").String() != "r1" || g.Get("usage.prompt_tokens").Int() != 9 || g.Get("choices.0.finish_reason").String() != "tool_calls" {
		t.Errorf("response = %s", got)
	}
	onlySearch := func(c Call) bool { return false }
	got, _ = Chat{}.ClientResponse(r, Turn{Keep: onlySearch})
	if gjson.GetBytes(got, "choices.0.message.tool_calls").Exists() || gjson.GetBytes(got, "choices.0.finish_reason").String() != "stop" {
		t.Errorf("without kept calls: %s", got)
	}
}

// TestARoundGoesBackAsTheModelSentIt: the assistant message of a round the
// gateway answered goes back upstream with every member the model sent
// (reasoning a provider requires back, a call's thought signature), only
// nulls dropped.
func TestARoundGoesBackAsTheModelSentIt(t *testing.T) {
	const call = `{"id":"call_1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"chat\"}"}`
	for _, tc := range []struct{ name, message, want string }{
		{
			name:    "an OpenAI message keeps its members but not its nulls",
			message: `{"role":"assistant","content":null,"tool_calls":[` + call + `}],"refusal":null,"annotations":[]}`,
			want:    `{"role":"assistant","content":null,"annotations":[],"tool_calls":[` + call + `}]}`,
		},
		{
			name:    "DeepSeek's reasoning_content goes back",
			message: `{"role":"assistant","content":"","reasoning_content":"Search first.","tool_calls":[` + call + `}]}`,
			want:    `{"role":"assistant","content":null,"reasoning_content":"Search first.","tool_calls":[` + call + `}]}`,
		},
		{
			name:    "Gemini's thought signature goes back on its call",
			message: `{"role":"assistant","tool_calls":[` + call + `,"extra_content":{"google":{"thought_signature":"c2ln"}}}]}`,
			want:    `{"role":"assistant","content":null,"tool_calls":[` + call + `,"extra_content":{"google":{"thought_signature":"c2ln"}}}]}`,
		},
		{
			name:    "OpenRouter's reasoning details go back with the text",
			message: `{"role":"assistant","content":"Looking.","reasoning":"r","reasoning_details":[{"type":"reasoning.encrypted","data":"e","index":0}],"tool_calls":[` + call + `}]}`,
			want:    `{"role":"assistant","content":"Looking.","reasoning":"r","reasoning_details":[{"type":"reasoning.encrypted","data":"e","index":0}],"tool_calls":[` + call + `}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ParseResponse([]byte(`{"id":"x","choices":[{"index":0,"message":` + tc.message + `,"finish_reason":"tool_calls"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			req, err := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Chat{}.Build(req, nil, []Round{{Content: resp.Content, Extra: resp.Extra, Calls: resp.Calls,
				Results: []ToolResult{{CallID: "call_1", Content: "Found."}}}})
			if err != nil {
				t.Fatal(err)
			}
			if msg := gjson.GetBytes(got, "messages.1").Raw; msg != tc.want {
				t.Errorf("round message\n got %s\nwant %s", msg, tc.want)
			}
		})
	}
}

func TestTheTurnsEarlierTextLeadsTheClientsMessage(t *testing.T) {
	tests := []struct {
		name, message, text, want string
	}{
		{"the earlier text comes before the round's content", `{"role":"assistant","content":"It is filed."}`, "Let me look. ", "Let me look. It is filed."},
		{"a round with only calls gets the earlier text as its content", `{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"real","arguments":"{}"}}]}`, "On it. ", "On it. "},
		{"without earlier text the content is the round's", `{"role":"assistant","content":"It is filed."}`, "", "It is filed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResponse([]byte(`{"id":"r1","choices":[{"index":0,"message":` + tt.message + `,"finish_reason":"stop"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Chat{}.ClientResponse(r, Turn{Keep: func(Call) bool { return true }, Text: tt.text})
			if err != nil {
				t.Fatal(err)
			}
			if c := gjson.GetBytes(got, "choices.0.message.content").String(); c != tt.want {
				t.Errorf("content %q, want %q: %s", c, tt.want, got)
			}
		})
	}
}

// TestParseRequestReadsThePromptCacheKey: the id a client keeps for a
// conversation (Codex CLI's conversation id) is read from
// prompt_cache_key, by both dialects that have it, on the cached tools
// array's path too; anything but a string is none.
func TestParseRequestReadsThePromptCacheKey(t *testing.T) {
	tools := bigTools(60)
	chat := func(key string) string {
		return `{"model":"m",` + key + `"messages":[{"role":"user","content":"hi"}],"tools":` + tools + `}`
	}
	responses := func(key string) string {
		return `{"model":"m",` + key + `"input":"hi","tools":[{"type":"function","name":"a","parameters":{}}]}`
	}
	cache := &mapCache{m: map[string][]Tool{}}
	if _, err := ParseRequestCached([]byte(chat("")), cache); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		parse func() (*Request, error)
		want  string
	}{
		{"a chat request's key is read", func() (*Request, error) { return ParseRequest([]byte(chat(`"prompt_cache_key":"conv-1",`))) }, "conv-1"},
		{"a chat request with a cached tools array has its key read", func() (*Request, error) {
			return ParseRequestCached([]byte(chat(`"prompt_cache_key":"conv-2",`)), cache)
		}, "conv-2"},
		{"a responses request's key is read", func() (*Request, error) {
			return Responses{}.ParseRequest([]byte(responses(`"prompt_cache_key":"019a-conv",`)), nil)
		}, "019a-conv"},
		{"a chat request without a key has none", func() (*Request, error) { return ParseRequest([]byte(chat(""))) }, ""},
		{"a key that is not a string is none", func() (*Request, error) {
			return Responses{}.ParseRequest([]byte(responses(`"prompt_cache_key":null,`)), nil)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.parse()
			if err != nil {
				t.Fatal(err)
			}
			if r.Conversation != tc.want {
				t.Errorf("Conversation %q, want %q", r.Conversation, tc.want)
			}
		})
	}
}

func TestAHistoryCallingTooManyNamesIsRefused(t *testing.T) {
	// calls returns a body of dialect api whose history calls n distinct
	// names in one step, and the first again.
	calls := func(api string, n int) []byte {
		var b strings.Builder
		for i := range n + 1 {
			if i > 0 {
				b.WriteByte(',')
			}
			name := fmt.Sprintf("f%d", i%n)
			switch api {
			case "chat":
				fmt.Fprintf(&b, `{"id":"c%d","type":"function","function":{"name":%q,"arguments":"{}"}}`, i, name)
			case "responses":
				fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","name":%q,"arguments":"{}"}`, i, name)
			case "messages":
				fmt.Fprintf(&b, `{"type":"tool_use","id":"c%d","name":%q,"input":{}}`, i, name)
			}
		}
		switch api {
		case "chat":
			return []byte(`{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[` + b.String() + `]}]}`)
		case "responses":
			return []byte(`{"model":"m","input":[{"role":"user","content":"go"},` + b.String() + `]}`)
		default:
			return []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[` + b.String() + `]}]}`)
		}
	}
	for _, tc := range []struct {
		api, param string
		d          Dialect
	}{
		{"chat", "messages", Chat{}},
		{"responses", "input", Responses{}},
		{"messages", "messages", Messages{}},
	} {
		t.Run("a "+tc.api+" history of as many names as the cap allows is read whole", func(t *testing.T) {
			r, err := tc.d.ParseRequest(calls(tc.api, MaxHistoryNames), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.HistoryErr(); err != nil {
				t.Fatalf("HistoryErr: %v", err)
			}
			if len(r.Called) != MaxHistoryNames || len(r.TurnCalled) != MaxHistoryNames || len(r.CalledTail) != MaxHistoryNames+1 {
				t.Errorf("Called %d, TurnCalled %d, CalledTail %d names; want %d, %d, %d", len(r.Called), len(r.TurnCalled), len(r.CalledTail), MaxHistoryNames, MaxHistoryNames, MaxHistoryNames+1)
			}
		})
		t.Run("a "+tc.api+" history of one name more is refused, naming its conversation", func(t *testing.T) {
			r, err := tc.d.ParseRequest(calls(tc.api, MaxHistoryNames+1), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = r.HistoryErr()
			var pe *ParamError
			if !errors.Is(err, ErrBadRequest) || !errors.As(err, &pe) || pe.Param != tc.param {
				t.Fatalf("HistoryErr %v; want an ErrBadRequest naming %q", err, tc.param)
			}
			if len(r.Called) > MaxHistoryNames || len(r.TurnCalled) > MaxHistoryNames {
				t.Errorf("Called %d, TurnCalled %d names: the lists went past the cap", len(r.Called), len(r.TurnCalled))
			}
		})
	}
}
