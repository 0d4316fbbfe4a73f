package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// fruitlessTask needs a tool no search finds: the model searches, finds
// nothing, and must answer without it.
var fruitlessTask = fakellm.Task{
	Prompt: "Frobnicate the xqzv.",
	Steps:  []fakellm.Step{{Tool: "frobnicate_xqzv", Query: "xqzv"}},
}

// fruitlessRequest is fruitlessTask as a request of api's with 40 tools.
func fruitlessRequest(t *testing.T, api string, stream bool) []byte {
	t.Helper()
	var body any
	switch api {
	case "chat":
		return chatRequest(t, []map[string]any{{"role": "user", "content": fruitlessTask.Prompt}}, testCatalog(40), stream, nil)
	case "responses":
		var tools []map[string]any
		for _, tool := range testCatalog(40) {
			fn := tool["function"].(map[string]any)
			tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]})
		}
		body = map[string]any{"model": "m", "input": fruitlessTask.Prompt, "tools": tools, "stream": stream}
	case "messages":
		body = map[string]any{"model": "claude-test", "max_tokens": 1024, "tools": anthropicTools(40), "stream": stream,
			"messages": []map[string]any{{"role": "user", "content": fruitlessTask.Prompt}}}
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answerText is the text of a non-streamed answer of any API, or of a
// stream's text deltas.
func answerText(body []byte, stream bool) string {
	var b strings.Builder
	if !stream {
		for _, p := range []string{"choices.0.message.content", "output.#(type==\"message\")#.content.#.text", "content.#(type==\"text\")#.text"} {
			r := gjson.GetBytes(body, p)
			if r.IsArray() {
				r.ForEach(func(_, v gjson.Result) bool {
					if v.IsArray() {
						v.ForEach(func(_, s gjson.Result) bool { b.WriteString(s.String()); return true })
					} else {
						b.WriteString(v.String())
					}
					return true
				})
			} else {
				b.WriteString(r.String())
			}
		}
		return b.String()
	}
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !gjson.Valid(data) {
			continue
		}
		switch ev := gjson.Parse(data); ev.Get("type").String() {
		case "response.output_text.delta":
			b.WriteString(ev.Get("delta").String())
		case "content_block_delta":
			b.WriteString(ev.Get("delta.text").String())
		default:
			b.WriteString(ev.Get("choices.0.delta.content").String())
		}
	}
	return b.String()
}

// TestTheRoundWithoutSearchStillDefinesTools: in search mode the round
// after max_rounds offers no tool_search and, when the searches found
// nothing, no other tool; yet it carries the gateway's calls and their
// results, and Anthropic refuses tool_use and tool_result blocks in a
// request without tools. That round keeps tool_search's definition and
// forbids calling it with the API's "none" tool_choice, so the model
// answers from what it has.
func TestTheRoundWithoutSearchStillDefinesTools(t *testing.T) {
	paths := map[string]string{"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
	nones := map[string]string{"chat": `"none"`, "responses": `"none"`, "messages": `{"type":"none"}`}
	for _, tc := range []struct {
		name, api string
		stream    bool
	}{
		{"a Messages turn whose search found nothing gets the model's answer", "messages", false},
		{"a streamed Messages turn whose search found nothing gets the model's answer", "messages", true},
		{"a Chat Completions turn whose search found nothing gets the model's answer", "chat", false},
		{"a streamed Chat Completions turn whose search found nothing gets the model's answer", "chat", true},
		{"a Responses turn whose search found nothing gets the model's answer", "responses", false},
		{"a streamed Responses turn whose search found nothing gets the model's answer", "responses", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{fruitlessTask}, MaxSearches: 5, Keep: true}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search, max_rounds: 1}\n")))
			x := sendTo(t, base, paths[tc.api], fruitlessRequest(t, tc.api, tc.stream), map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"})
			if x.status != 200 {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			want := "I could not find a tool to xqzv."
			if got := answerText(x.body, tc.stream); got != want {
				t.Errorf("the client got %q, want %q: %s", got, want, x.body)
			}
			recs := model.Records()
			if len(recs) != 2 {
				t.Fatalf("the upstream got %d requests, want 2 (a search, then the round without one)", len(recs))
			}
			last := recs[1].Body
			if !slices.Equal(recs[1].Names, []string{SearchToolName}) {
				t.Errorf("the last round offered %v, want only %s's definition", recs[1].Names, SearchToolName)
			}
			if got := gjson.GetBytes(last, "tool_choice").Raw; got != nones[tc.api] {
				t.Errorf("the last round's tool_choice is %s, want %s", got, nones[tc.api])
			}
		})
	}
}

// TestAModelThatSearchesWhereCallsAreForbiddenStillAnswers: a model may
// call tool_search in the round whose tool_choice forbids it (it sees the
// definition and its earlier searches). As in any round without search,
// the call is answered "spent" and the model gets one round more, with
// calls still forbidden, to answer in.
func TestAModelThatSearchesWhereCallsAreForbiddenStillAnswers(t *testing.T) {
	search := `{"type":"tool_use","id":"toolu_s%d","name":"tool_search","input":{"query":"xqzv"}}`
	const answer = "Nothing here does that."
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a Messages turn gets the answer of the round after the forbidden search", false},
		{"a streamed Messages turn gets the answer of the round after the forbidden search", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			var mu sync.Mutex
			var bodies [][]byte
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, b)
				mu.Unlock()
				i := n.Add(1) // max_rounds 1: a search, a forbidden search, then the answer
				block, stop := fmt.Sprintf(search, i), "tool_use"
				if i == 3 {
					block, stop = `{"type":"text","text":"`+answer+`"}`, "end_turn"
				}
				w.Header().Set("Content-Type", map[bool]string{false: "application/json", true: "text/event-stream"}[tc.stream])
				_, _ = io.WriteString(w, messagesReply(fmt.Sprintf("msg_%d", i), []string{block}, stop, tc.stream))
			})
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway: {mode: search, max_rounds: 1}\n")))
			x := sendTo(t, base, "/messages", fruitlessRequest(t, "messages", tc.stream), nil)
			if x.status != 200 || n.Load() != 3 {
				t.Fatalf("status %d after %d upstream calls, want 200 after 3: %s", x.status, n.Load(), x.body)
			}
			if got := answerText(x.body, tc.stream); got != answer {
				t.Errorf("the client got %q, want %q: %s", got, answer, x.body)
			}
			if strings.Contains(string(x.body), SearchToolName) {
				t.Errorf("the client saw %s: %s", SearchToolName, x.body)
			}
			for i, b := range bodies[1:] {
				if names, choice := gjson.GetBytes(b, "tools.#.name").Raw, gjson.GetBytes(b, "tool_choice").Raw; names != `["`+SearchToolName+`"]` || choice != `{"type":"none"}` {
					t.Errorf("request %d offered %v with tool_choice %s, want only %s's definition and {\"type\":\"none\"}", i+1, names, choice, SearchToolName)
				}
			}
			if got := gjson.GetBytes(bodies[2], "messages.@reverse.0.content.0.content").String(); !strings.Contains(got, "searches are spent") {
				t.Errorf("the forbidden search was answered %q, want that the searches are spent", got)
			}
		})
	}
}

// TestAModelThatKeepsSearchingAnswersInTheLastRound: a model that calls
// tool_search in every round, the round without search included, is told
// its searches are spent; the round after that answer, the last the turn
// may take, used to go with the client's tool_choice, and the model's next
// search left the client an empty message (content null, finish stop).
// That round forbids every call, so the model answers in text.
func TestAModelThatKeepsSearchingAnswersInTheLastRound(t *testing.T) {
	const answer = "I could not find a tool for that."
	for _, tc := range []struct {
		name   string
		stream bool
		choice any // the client's tool_choice, nil for none sent
	}{
		{"a whole answer carries the model's text", false, nil},
		{"a streamed answer carries the model's text", true, nil},
		{"a whole answer carries the model's text when the client asked for calls", false, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var choices []string
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				choice := gjson.GetBytes(b, "tool_choice").Raw
				mu.Lock()
				choices = append(choices, choice)
				mu.Unlock()
				// An API that honours tool_choice "none" answers in
				// text; in any other round this model searches.
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					if choice == `"none"` {
						_, _ = io.WriteString(w, textChunk(answer)+finishChunk("stop")+doneEvent)
						return
					}
					_, _ = io.WriteString(w, searchRound)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if choice == `"none"` {
					_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`+answer+`"},"finish_reason":"stop"}]}`)
					return
				}
				_, _ = io.WriteString(w, searchReply)
			})
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway: {max_rounds: 2}\n")))
			extra := map[string]any{}
			if tc.choice != nil {
				extra["tool_choice"] = tc.choice
			}
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}, testCatalog(40), tc.stream, extra), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			if got := answerText(x.body, tc.stream); got != answer {
				t.Errorf("the client got %q, want the model's answer %q: %s", got, answer, x.body)
			}
			mu.Lock()
			defer mu.Unlock()
			// max_rounds 2: two rounds with search, one without, one after
			// the spent answer.
			if len(choices) != 4 || choices[3] != `"none"` {
				t.Errorf("the upstream got tool_choice %q; want 4 rounds, the last with \"none\"", choices)
			}
		})
	}
}
