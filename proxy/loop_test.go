package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
)

// agentRun is what a plain HTTP agent loop saw while completing a task.
type agentRun struct {
	answer      string
	calls       []string // tool calls the client received, in order
	clientUsage int64    // prompt tokens the client was billed, summed
	turns       int
}

// runAgent plays an unchanged agent: it sends the full catalog every turn,
// executes every tool call it gets with a canned result, and stops at text.
func runAgent(t *testing.T, base string, task fakellm.Task, tools []map[string]any, stream bool, hdr map[string]string) agentRun {
	t.Helper()
	msgs := []map[string]any{
		{"role": "system", "content": "You are a helpful agent."},
		{"role": "user", "content": task.Prompt},
	}
	var run agentRun
	for turn := 0; turn < 10; turn++ {
		run.turns++
		extra := map[string]any{}
		if stream {
			extra["stream_options"] = map[string]any{"include_usage": true}
		}
		resp := post(t, base, chatRequest(t, msgs, tools, stream, extra), hdr)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("turn %d: status %d: %s", turn, resp.StatusCode, b)
		}
		var content string
		var calls []gjson.Result
		if stream {
			rep := readStream(t, resp.Body)
			if rep.dones != 1 || len(rep.finishes) != 1 || len(rep.ids) != 1 || len(rep.usage) != 1 {
				t.Fatalf("turn %d: stream shape: %d [DONE], finishes %v, ids %v, %d usage chunks", turn, rep.dones, rep.finishes, rep.ids, len(rep.usage))
			}
			content, calls = rep.content, rep.calls
			run.clientUsage += rep.usage[0].Get("prompt_tokens").Int()
		} else {
			b, _ := io.ReadAll(resp.Body)
			body := gjson.ParseBytes(b)
			content = body.Get("choices.0.message.content").String()
			body.Get("choices.0.message.tool_calls").ForEach(func(_, c gjson.Result) bool {
				j, _ := json.Marshal(map[string]string{"id": c.Get("id").String(), "name": c.Get("function.name").String(), "arguments": c.Get("function.arguments").String()})
				calls = append(calls, gjson.ParseBytes(j))
				return true
			})
			run.clientUsage += body.Get("usage.prompt_tokens").Int()
		}
		resp.Body.Close()
		if len(calls) == 0 {
			run.answer = content
			return run
		}
		var tcs []map[string]any
		for _, c := range calls {
			run.calls = append(run.calls, c.Get("name").String())
			tcs = append(tcs, map[string]any{"id": c.Get("id").String(), "type": "function",
				"function": map[string]any{"name": c.Get("name").String(), "arguments": c.Get("arguments").String()}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs})
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.Get("id").String(), "content": `{"ok":true}`})
		}
	}
	t.Fatal("agent did not finish in 10 turns")
	return run
}

func TestAgentCompletesMultiStepTaskThroughTheGateway(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a non-streamed agent completes every step", false},
		{"a streamed agent completes every step", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, MaxTools: 20}
			base := newTestGateway(t, model)
			tools := testCatalog(40)
			run := runAgent(t, base, twoStepTask, tools, tc.stream, nil)

			if run.answer != twoStepTask.Answer {
				t.Errorf("answer = %q, want %q", run.answer, twoStepTask.Answer)
			}
			want := []string{"repo_create_issue", "chat_post_message"}
			if strings.Join(run.calls, ",") != strings.Join(want, ",") {
				t.Errorf("client saw calls %v, want %v", run.calls, want)
			}
			recs := model.Records()
			var upstreamPrompt int64
			for i, r := range recs {
				if r.Tools == 0 || r.Names[0] != SearchToolName {
					t.Errorf("upstream request %d: tools %v, want tool_search first", i, r.Names)
				}
				if max := policy.Default().Gateway.MaxActive + 1; r.Tools > max {
					t.Errorf("upstream request %d carried %d of the catalog's %d tools, over max_active+1 = %d", i, r.Tools, len(tools), max)
				}
				upstreamPrompt += r.PromptTokens
			}
			if run.clientUsage != upstreamPrompt {
				t.Errorf("client was billed %d prompt tokens, upstream counted %d", run.clientUsage, upstreamPrompt)
			}
		})
	}
}

func TestSearchRoundIsInvisibleToTheClient(t *testing.T) {
	// In search mode nothing is preselected, so the model must search; the
	// client must only ever see its own tools.
	task := fakellm.Task{
		Prompt: "Let everyone know the deploy finished.",
		Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{}`)}},
		Answer: "Done.",
	}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "without streaming the search call never reaches the client", true: "with streaming the search call never reaches the client"}[stream]
		t.Run(name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{task}, Keep: true}
			base := newTestGateway(t, model, searchOnly(t))
			run := runAgent(t, base, task, testCatalog(30), stream, nil)
			for _, c := range run.calls {
				if c == SearchToolName {
					t.Fatalf("client received a %s call", SearchToolName)
				}
			}
			recs := model.Records()
			searched := false
			for _, r := range recs {
				searched = searched || strings.Contains(string(r.Body), `"name":"tool_search","arguments"`)
			}
			if !searched {
				t.Fatalf("the model never had to search; the test no longer covers the search round")
			}
			if len(run.calls) != 1 || run.calls[0] != "chat_post_message" {
				t.Errorf("client calls = %v, want [chat_post_message]", run.calls)
			}
		})
	}
}

// TestTextBeforeASearchReadsTheSameStreamedOrNot: a model may say
// something before it calls tool_search ("Let me look. "). A stream
// relays it as it comes; the whole answer must carry it too, or one
// upstream behaviour gives two different answers.
func TestTextBeforeASearchReadsTheSameStreamedOrNot(t *testing.T) {
	const search = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look. ","tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]},"finish_reason":"tool_calls"}]}`
	const answer = `{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"It is filed."},"finish_reason":"stop"}]}`
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "a whole answer leads with the search round's text", true: "a streamed answer leads with the search round's text"}[stream]
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				if !stream {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, map[bool]string{true: search, false: answer}[n == 1])
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 1 {
					_, _ = io.WriteString(w, textChunk("Let me look. ")+callChunk(0, "call_s1", SearchToolName, `{"query":"create issue"}`)+finishChunk("tool_calls")+doneEvent)
					return
				}
				_, _ = io.WriteString(w, textChunk("It is filed.")+finishChunk("stop")+doneEvent)
			})
			base := newTestGateway(t, up)
			x := send(t, base, bigRequest(t, stream), nil)
			content := gjson.GetBytes(x.body, "choices.0.message.content").String()
			if stream {
				content = readStream(t, bytes.NewReader(x.body)).content
			}
			if x.status != http.StatusOK || content != "Let me look. It is filed." || calls.Load() != 2 {
				t.Errorf("status %d, content %q, upstream calls %d; want 200, %q, 2 calls", x.status, content, calls.Load(), "Let me look. It is filed.")
			}
		})
	}
}

// TestAWholeAnswerKeepsTheSearchRoundsWordsConsistent: the text a search
// round said leads a whole answer's content, so its logprobs must lead the
// answer's logprobs (tokens and content one to one, as in the stream),
// and an answer that must be JSON cannot be led by it at all.
func TestAWholeAnswerKeepsTheSearchRoundsWordsConsistent(t *testing.T) {
	lp := func(tokens ...string) string {
		var items []string
		for _, tok := range tokens {
			items = append(items, fmt.Sprintf(`{"token":%q,"logprob":-0.1,"bytes":null,"top_logprobs":[]}`, tok))
		}
		return `{"content":[` + strings.Join(items, ",") + `],"refusal":null}`
	}
	search := func(logprobs string) string {
		return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look. ","tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]},"logprobs":` + logprobs + `,"finish_reason":"tool_calls"}]}`
	}
	answer := func(content, logprobs string) string {
		return `{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + strconv.Quote(content) + `},"logprobs":` + logprobs + `,"finish_reason":"stop"}]}`
	}
	const callAnswer = `{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_r1","type":"function","function":{"name":"repo_create_issue","arguments":"{}"}}]},"logprobs":{"content":null,"refusal":null},"finish_reason":"tool_calls"}]}`
	tests := []struct {
		name          string
		extra         map[string]any
		rounds        [2]string
		wantContent   string
		wantLogprobed string // the tokens of the answer's logprobs, joined
	}{
		{"the search round's logprobs lead the answer's", map[string]any{"logprobs": true},
			[2]string{search(lp("Let", " me", " look", ". ")), answer("It is filed.", lp("It", " is", " filed", "."))},
			"Let me look. It is filed.", "Let me look. It is filed."},
		{"an answer with only calls gets the search round's words and their logprobs", map[string]any{"logprobs": true},
			[2]string{search(lp("Let", " me", " look", ". ")), callAnswer},
			"Let me look. ", "Let me look. "},
		{"an answer with only calls and null logprobs gets the search round's", map[string]any{"logprobs": true},
			[2]string{search(lp("Let", " me", " look", ". ")), strings.Replace(callAnswer, `"logprobs":{"content":null,"refusal":null}`, `"logprobs":null`, 1)},
			"Let me look. ", "Let me look. "},
		{"without logprobs asked for, none appear", nil,
			[2]string{search("null"), answer("It is filed.", "null")},
			"Let me look. It is filed.", ""},
		{"a json_schema answer is not led by the search round's words", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "r", "schema": map[string]any{"type": "object"}}}},
			[2]string{search("null"), answer(`{"issue":42}`, "null")},
			`{"issue":42}`, ""},
		{"a json_object answer is not led by them either", map[string]any{"response_format": map[string]any{"type": "json_object"}},
			[2]string{search("null"), answer(`{"issue":42}`, "null")},
			`{"issue":42}`, ""},
		{"a text response_format keeps them", map[string]any{"response_format": map[string]any{"type": "text"}},
			[2]string{search("null"), answer("It is filed.", "null")},
			"Let me look. It is filed.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				_, _ = io.WriteString(w, tt.rounds[min(n, 2)-1])
			})
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}
			x := send(t, base, chatRequest(t, msgs, testCatalog(30), false, tt.extra), nil)
			if x.status != http.StatusOK || calls.Load() != 2 {
				t.Fatalf("status %d after %d upstream calls: %s", x.status, calls.Load(), x.body)
			}
			choice := gjson.GetBytes(x.body, "choices.0")
			if got := choice.Get("message.content").String(); got != tt.wantContent {
				t.Errorf("content %q, want %q", got, tt.wantContent)
			}
			var tokens strings.Builder
			choice.Get("logprobs.content").ForEach(func(_, v gjson.Result) bool {
				tokens.WriteString(v.Get("token").String())
				return true
			})
			if tokens.String() != tt.wantLogprobed {
				t.Errorf("logprobs' tokens read %q, want %q", tokens.String(), tt.wantLogprobed)
			}
		})
	}
}

// TestAStreamedJSONAnswerIsNotLedByTheSearchRoundsWords: a stream whose
// answer must be JSON (response_format json_schema or json_object) holds
// each round's text until the round's end shows it is the answer, as it
// holds reasoning: a search round's words never reach the client, whose
// SDK parses the whole content as JSON (the openai package's
// finalChatCompletion throws on "Let me look. {...}"), and a round that
// ends with a call of the client's keeps its words, as a whole answer does.
func TestAStreamedJSONAnswerIsNotLedByTheSearchRoundsWords(t *testing.T) {
	jsonSchema := map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "r", "schema": map[string]any{"type": "object"}}}}
	jsonObject := map[string]any{"response_format": map[string]any{"type": "json_object"}}
	searchRound := textChunk("Let me ") + textChunk("look. ") + callChunk(0, "call_s1", SearchToolName, `{"query":"create issue"}`) + finishChunk("tool_calls") + doneEvent
	verdict := func(end int) string { return sseData(fmt.Sprintf(azureVerdict, end)) }
	for _, tc := range []struct {
		name        string
		extra       map[string]any
		rounds      []string
		wantContent string
		wantCalls   []string
		verdicts    int // Azure's verdicts on text the client gets, after it
	}{
		{"a json_schema answer streams without the search round's words", jsonSchema,
			[]string{searchRound, textChunk(`{"issue":`) + textChunk(`42}`) + finishChunk("stop") + doneEvent},
			`{"issue":42}`, nil, 0},
		{"a json_object answer streams without them either", jsonObject,
			[]string{searchRound, textChunk(`{"issue":42}`) + finishChunk("stop") + doneEvent},
			`{"issue":42}`, nil, 0},
		{"a round that calls a client tool beside its search keeps its words", jsonObject,
			[]string{textChunk("Filing. ") + callChunk(0, "call_s1", SearchToolName, `{"query":"chat"}`) + callChunk(1, "call_r1", "repo_create_issue", `{}`) + finishChunk("tool_calls") + doneEvent},
			"Filing. ", []string{"repo_create_issue"}, 0},
		{"a text response_format streams the search round's words", map[string]any{"response_format": map[string]any{"type": "text"}},
			[]string{searchRound, textChunk("It is filed.") + finishChunk("stop") + doneEvent},
			"Let me look. It is filed.", nil, 0},
		{"a content filter's verdict waits with the text it judges, and goes with it", jsonObject,
			[]string{textChunk("Let me look. ") + verdict(13) + callChunk(0, "call_s1", SearchToolName, `{"query":"create issue"}`) + finishChunk("tool_calls") + doneEvent,
				textChunk(`{"issue":42}`) + verdict(12) + finishChunk("stop") + doneEvent},
			`{"issue":42}`, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				n := int(calls.Add(1))
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.rounds[min(n, len(tc.rounds))-1])
			})
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}
			x := send(t, base, chatRequest(t, msgs, testCatalog(30), true, tc.extra), nil)
			if x.status != http.StatusOK || int(calls.Load()) != len(tc.rounds) {
				t.Fatalf("status %d after %d upstream calls, want 200 after %d: %s", x.status, calls.Load(), len(tc.rounds), x.body)
			}
			rep := readStream(t, bytes.NewReader(x.body))
			var names []string
			for _, c := range rep.calls {
				names = append(names, c.Get("name").String())
			}
			if rep.content != tc.wantContent || !slices.Equal(names, tc.wantCalls) || len(rep.finishes) != 1 || rep.dones != 1 {
				t.Errorf("content %q, calls %v, finishes %v, [DONE]s %d; want %q, %v, one finish, one [DONE]", rep.content, names, rep.finishes, rep.dones, tc.wantContent, tc.wantCalls)
			}
			body := string(x.body)
			if n := strings.Count(body, "content_filter_offsets"); n != tc.verdicts || n > 0 && strings.Index(body, "content_filter_offsets") < strings.LastIndex(body, `"content":`) {
				t.Errorf("the client got %d verdicts, want %d, each after the text it judges:\n%s", n, tc.verdicts, body)
			}
		})
	}
}
