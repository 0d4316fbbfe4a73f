package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// strictThinker plays a thinking model that, like DeepSeek's thinking mode
// and Gemini 3, refuses a conversation in which its own tool-calling
// message comes back without the reasoning and the thought signature it
// was sent with. Its first reply calls tool_search; its second answers.
type strictThinker struct {
	first  string // the first reply: a JSON body, or SSE events
	stream bool

	mu     sync.Mutex
	bodies []gjson.Result
}

func (u *strictThinker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, gjson.ParseBytes(b))
	n := len(u.bodies)
	u.mu.Unlock()
	if n == 1 {
		if u.stream {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		_, _ = io.WriteString(w, u.first)
		return
	}
	asked := gjson.GetBytes(b, `messages.#(tool_calls).tool_calls.0`)
	msg := gjson.GetBytes(b, `messages.#(tool_calls)`)
	if msg.Get("reasoning_content").String() != "I should look for a chat tool." ||
		asked.Get("extra_content.google.thought_signature").String() != "sig-1" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","code":"invalid_request_error"}}`)
		return
	}
	if u.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvents(
			`{"id":"c2","object":"chat.completion.chunk","created":2,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Posted."},"finish_reason":null}]}`,
			`{"id":"c2","object":"chat.completion.chunk","created":2,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		))
		return
	}
	_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Posted."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
}

// sseEvents frames each chunk as a data event and ends with [DONE].
func sseEvents(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		fmt.Fprintf(&b, "data: %s\n\n", c)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

func TestAProvidersReasoningAndSignaturesGoBackWithTheSearchRound(t *testing.T) {
	const chunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	for _, tc := range []struct {
		name   string
		stream bool
		first  string
	}{
		{
			name: "a non-streamed reply's message goes back with its reasoning and its call's signature",
			first: `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
				`"reasoning_content":"I should look for a chat tool.","tool_calls":[{"id":"call_s","type":"function",` +
				`"function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"},"extra_content":{"google":{"thought_signature":"sig-1"}}}]},` +
				`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		},
		{
			name:   "a streamed reply's message is assembled from its deltas, reasoning and signature included",
			stream: true,
			first: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","content":null,"reasoning_content":"I should look "}`, "null"),
				fmt.Sprintf(chunk, `{"reasoning_content":"for a chat tool."}`, "null"),
				fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":""},"extra_content":{"google":{"thought_signature":"sig-1"}}}]}`, "null"),
				fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"function":{"arguments":"{\"query\":\"send chat message\"}"}}]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"tool_calls"`),
			),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &strictThinker{first: tc.first, stream: tc.stream}
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "Tell the team the deploy is done."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(30), tc.stream, nil), nil)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var content string
			if tc.stream {
				rep := readStream(t, resp.Body)
				content = rep.content
				if rep.errorEvent {
					t.Errorf("the stream carried an error event: %v", rep.raw)
				}
			} else {
				b, _ := io.ReadAll(resp.Body)
				content = gjson.GetBytes(b, "choices.0.message.content").String()
			}
			if content != "Posted." {
				t.Errorf("client content = %q, want the second round's answer", content)
			}
			if len(up.bodies) != 2 {
				t.Fatalf("upstream saw %d requests, want 2", len(up.bodies))
			}
			msg := up.bodies[1].Get(`messages.#(tool_calls)`)
			if got := msg.Get("tool_calls.0.function.name").String(); got != "tool_search" {
				t.Errorf("the round's call = %q, want tool_search; message %s", got, msg.Raw)
			}
			if got := msg.Get("tool_calls.#").Int(); got != 1 {
				t.Errorf("the round's message has %d calls, want 1: %s", got, msg.Raw)
			}
			if msg.Get("tool_calls.0.index").Exists() {
				t.Errorf("a stream's fragment index leaked into the request's call: %s", msg.Raw)
			}
		})
	}
}

func TestCallsWithoutDistinctIndexesReachTheClientAsSeparateCalls(t *testing.T) {
	const chunk = `{"id":"g1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	whole := func(index, id, name, args string) string {
		return fmt.Sprintf(`{%s"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}`, index, id, name, args)
	}
	for _, tc := range []struct {
		name   string
		events string
		noIDs  bool // the calls come without ids: the gateway gives them none
	}{
		{
			name: "two whole calls without an index in one chunk (Gemini) stay two",
			events: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","tool_calls":[`+whole("", "a1", "chat_post_message", `{"id":"eng"}`)+`,`+whole("", "a2", "repo_create_issue", `{"id":"web"}`)+`]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"stop"`),
			),
		},
		{
			name: "two whole calls each numbered 0 in their own chunk stay two",
			events: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","tool_calls":[`+whole(`"index":0,`, "a1", "chat_post_message", `{"id":"eng"}`)+`]}`, "null"),
				fmt.Sprintf(chunk, `{"tool_calls":[`+whole(`"index":0,`, "a2", "repo_create_issue", `{"id":"web"}`)+`]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"tool_calls"`),
			),
		},
		{
			name: "two whole calls without an index or an id in one chunk stay two",
			events: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"chat_post_message","arguments":"{\"id\":\"eng\"}"}},{"type":"function","function":{"name":"repo_create_issue","arguments":"{\"id\":\"web\"}"}}]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"stop"`),
			),
			noIDs: true,
		},
		{
			name: "a call split over fragments without an index stays one",
			events: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","tool_calls":[{"id":"a1","type":"function","function":{"name":"chat_post_message","arguments":"{\"id\":"}}]}`, "null"),
				fmt.Sprintf(chunk, `{"tool_calls":[{"function":{"arguments":"\"eng\"}"}}]}`, "null"),
				fmt.Sprintf(chunk, `{"tool_calls":[`+whole("", "a2", "repo_create_issue", `{"id":"web"}`)+`]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"stop"`),
			),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.events)
			})
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "Tell the team and file the bug."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), nil)
			defer resp.Body.Close()
			rep := readStream(t, resp.Body)
			want := []struct{ id, name, args string }{{"a1", "chat_post_message", `{"id":"eng"}`}, {"a2", "repo_create_issue", `{"id":"web"}`}}
			if len(rep.calls) != len(want) {
				t.Fatalf("client got %d calls, want %d: %v", len(rep.calls), len(want), rep.raw)
			}
			for i, w := range want {
				c := rep.calls[i]
				if tc.noIDs {
					w.id = c.Get("id").String()
				}
				if c.Get("id").String() != w.id || c.Get("name").String() != w.name || c.Get("arguments").String() != w.args {
					t.Errorf("call %d = %s, want %+v", i, c.Raw, w)
				}
			}
			for _, ev := range rep.raw {
				gjson.Get(ev, "choices.0.delta.tool_calls").ForEach(func(_, c gjson.Result) bool {
					if i := c.Get("index"); i.Type != gjson.Number || i.Int() < 0 || i.Int() > 1 {
						t.Errorf("client saw a fragment with index %s, want 0 or 1: %s", i.Raw, c.Raw)
					}
					return true
				})
			}
		})
	}
}

// TestARunningUsageTotalIsCountedOncePerRound: Gemini's compatible endpoint
// sends the running usage total with every chunk. A round counts its last
// one, and the client's usage is the sum over rounds.
func TestARunningUsageTotalIsCountedOncePerRound(t *testing.T) {
	const chunk = `{"id":"g1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`
	rounds := []string{
		sseEvents(
			fmt.Sprintf(chunk, `{"role":"assistant","content":"Let me look."}`, "null", 100, 3, 103),
			fmt.Sprintf(chunk, `{"tool_calls":[{"id":"s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"chat message\"}"}}]}`, "null", 100, 9, 109),
			fmt.Sprintf(chunk, `{}`, `"stop"`, 100, 9, 109),
		),
		sseEvents(
			fmt.Sprintf(chunk, `{"role":"assistant","content":"Done"}`, "null", 150, 1, 151),
			fmt.Sprintf(chunk, `{"content":" now."}`, "null", 150, 2, 152),
			fmt.Sprintf(chunk, `{}`, `"stop"`, 150, 2, 152),
		),
	}
	var mu sync.Mutex
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		next := rounds[0]
		rounds = rounds[1:]
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, next)
	})
	base := newTestGateway(t, up)
	msgs := []map[string]any{{"role": "user", "content": "Tell the team the deploy is done."}}
	extra := map[string]any{"stream_options": map[string]any{"include_usage": true}}
	resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, extra), nil)
	defer resp.Body.Close()
	rep := readStream(t, resp.Body)
	if rep.content != "Let me look.Done now." {
		t.Errorf("content = %q, want both rounds' text", rep.content)
	}
	if len(rep.usage) != 1 {
		t.Fatalf("client got %d usage objects, want 1: %v", len(rep.usage), rep.raw)
	}
	for path, want := range map[string]int64{"prompt_tokens": 250, "completion_tokens": 11, "total_tokens": 261} {
		if got := rep.usage[0].Get(path).Int(); got != want {
			t.Errorf("usage %s = %d, want %d (each round's last total, summed)", path, got, want)
		}
	}
}

func TestACallWithoutAnIDIsGivenOneBeforeTheGatewayAnswersIt(t *testing.T) {
	const chunk = `{"id":"k1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	for _, tc := range []struct {
		name   string
		stream bool
		first  string
	}{
		{
			name:  "a non-streamed call with an empty id",
			first: `{"id":"k1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"chat\"}"}}]},"finish_reason":"tool_calls"}]}`,
		},
		{
			name:   "a streamed call with no id at all",
			stream: true,
			first: sseEvents(
				fmt.Sprintf(chunk, `{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"chat\"}"}}]}`, "null"),
				fmt.Sprintf(chunk, `{}`, `"tool_calls"`),
			),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []gjson.Result
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, gjson.ParseBytes(b))
				n := len(bodies)
				mu.Unlock()
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				switch {
				case n == 1:
					_, _ = io.WriteString(w, tc.first)
				case tc.stream:
					_, _ = io.WriteString(w, sseEvents(fmt.Sprintf(chunk, `{"content":"ok"}`, `"stop"`)))
				default:
					_, _ = io.WriteString(w, `{"id":"k2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
				}
			})
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "Tell the team."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(30), tc.stream, nil), nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if len(bodies) != 2 {
				t.Fatalf("upstream saw %d requests, want 2", len(bodies))
			}
			id := bodies[1].Get(`messages.#(tool_calls).tool_calls.0.id`).String()
			answer := bodies[1].Get(`messages.#(role=="tool").tool_call_id`).String()
			if id == "" || id != answer {
				t.Errorf("the round's call id %q and its answer's tool_call_id %q: want the same, not empty", id, answer)
			}
		})
	}
}

func TestAnUpstreamThatRefusesStreamOptionsStreamsWithout(t *testing.T) {
	for _, refusal := range []struct {
		name   string
		status int
		body   string
	}{
		{"an OpenAI-style 400 naming stream_options is read as its refusal", http.StatusBadRequest, `{"error":{"message":"Unknown parameter: 'stream_options'.","type":"invalid_request_error","param":"stream_options","code":"unknown_parameter"}}`},
		{"Mistral's 422 naming stream_options is read as its refusal", http.StatusUnprocessableEntity, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","include_usage"],"msg":"Extra inputs are not permitted"}]},"type":"invalid_request_message_error"}`},
	} {
		t.Run(refusal.name, func(t *testing.T) { testStreamOptionsRefusal(t, refusal.status, refusal.body) })
	}
}

func testStreamOptionsRefusal(t *testing.T, status int, refusal string) {
	var mu sync.Mutex
	var seen []bool // whether each upstream request carried stream_options
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		has := gjson.GetBytes(b, "stream_options").Exists()
		mu.Lock()
		seen = append(seen, has)
		mu.Unlock()
		if has {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, refusal)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvents(
			`{"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello."},"finish_reason":null}]}`,
			`{"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		))
	})
	base := newTestGateway(t, up, func(g *Gateway) { g.Metrics = NewMetrics() })
	msgs := []map[string]any{{"role": "user", "content": "Say hello."}}
	turn := func(extra map[string]any) (int, streamReply) {
		resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, extra), nil)
		defer resp.Body.Close()
		return resp.StatusCode, readStream(t, resp.Body)
	}
	t.Run("the first turn is sent again without the member the gateway added", func(t *testing.T) {
		status, rep := turn(nil)
		if status != http.StatusOK || rep.content != "Hello." {
			t.Errorf("status %d, content %q; want 200 and the answer", status, rep.content)
		}
		if len(seen) != 2 || !seen[0] || seen[1] {
			t.Errorf("upstream requests carried stream_options: %v, want [true false]", seen)
		}
		// The refused attempt and its resend are one round, one call.
		text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, "toolgate_upstream_rounds_count") == 1 })
		if calls := metricValue(t, text, "toolgate_upstream_rounds_sum"); calls != 1 {
			t.Errorf("toolgate_upstream_rounds counted %v calls for the turn; want 1", calls)
		}
	})
	t.Run("later turns go without it from the start", func(t *testing.T) {
		seen = nil
		status, rep := turn(nil)
		if status != http.StatusOK || rep.content != "Hello." || len(seen) != 1 || seen[0] {
			t.Errorf("status %d, content %q, upstream requests with stream_options %v; want 200, the answer, [false]", status, rep.content, seen)
		}
	})
	t.Run("a client that asks for usage itself gets the upstream's refusal", func(t *testing.T) {
		seen = nil
		got, _ := turn(map[string]any{"stream_options": map[string]any{"include_usage": true}})
		if got != status || len(seen) != 1 {
			t.Errorf("status %d after %d upstream requests; want the upstream's %d after 1", got, len(seen), status)
		}
	})
}

// TestAnUpstreamThatRefusesItsModelsMessageExtrasGetsRoundsWithout: the
// gateway sends a search round's assistant message back with the members
// the model added (DeepSeek needs its reasoning_content back); Groq
// answers 400 "property 'reasoning' is unsupported" to its own
// reasoning. The round is sent again without them, and later turns for
// the model go without from the start; the calls keep theirs.
func TestAnUpstreamThatRefusesItsModelsMessageExtrasGetsRoundsWithout(t *testing.T) {
	const search = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning":"I need an issue tool.","tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]},"finish_reason":"tool_calls"}]}`
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{
			false: "a refused round of whole answers goes again without the reasoning, and the next turn's without it from the start",
			true:  "a refused streamed round goes again without the reasoning, and the next turn's without it from the start",
		}[stream], func(t *testing.T) {
			var mu sync.Mutex
			var echoed []bool // whether each re-issued request carried the reasoning
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				msgs := gjson.GetBytes(b, "messages")
				if !msgs.Get(`#(role=="tool")`).Exists() { // a turn's first round
					if stream {
						w.Header().Set("Content-Type", "text/event-stream")
						_, _ = io.WriteString(w, sseEvents(
							`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning":"I need an issue tool."},"finish_reason":null}]}`,
							`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]},"finish_reason":null}]}`,
							`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
						return
					}
					_, _ = io.WriteString(w, search)
					return
				}
				has := msgs.Get(`#(role=="assistant").reasoning`).Exists()
				mu.Lock()
				echoed = append(echoed, has)
				mu.Unlock()
				if has {
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":{"message":"'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property 'reasoning' is unsupported)]","type":"invalid_request_error"}}`)
					return
				}
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, textChunk("Filed.")+finishChunk("stop")+doneEvent)
					return
				}
				_, _ = io.WriteString(w, plainAnswer)
			})
			base := newTestGateway(t, up)
			for turn, want := range [][]bool{{true, false}, {false}} {
				echoed = nil
				x := send(t, base, bigRequest(t, stream), nil)
				if x.status != http.StatusOK || bytes.Contains(x.body, []byte(`"error"`)) {
					t.Fatalf("turn %d: status %d: %s", turn, x.status, x.body)
				}
				if !slices.Equal(echoed, want) {
					t.Errorf("turn %d: re-issued requests carried the reasoning %v, want %v", turn, echoed, want)
				}
			}
		})
	}
}

// TestAThoughtSignatureOnTheGatewaysCallMovesToTheClientsFirst: Gemini
// puts a step's thought signature on its first function call only, and
// refuses the next request unless the first call sent back carries it.
// When the model's first call is tool_search and a client's call follows
// in the same answer, the client's call is the first it gets, so it must
// carry the signature.
func TestAThoughtSignatureOnTheGatewaysCallMovesToTheClientsFirst(t *testing.T) {
	const search = `{"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"},"extra_content":{"google":{"thought_signature":"sig-1"}}}`
	const real = `{"id":"call_r","type":"function","function":{"name":"chat_post_message","arguments":"{}"}}`
	const signed = `{"id":"call_r","type":"function","function":{"name":"chat_post_message","arguments":"{}"},"extra_content":{"google":{"thought_signature":"own"}}}`
	whole := func(calls string) string {
		return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` + calls + `]},"finish_reason":"tool_calls"}]}`
	}
	streamed := func(calls ...string) string {
		var b strings.Builder
		for _, c := range calls {
			b.WriteString(sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[` + strings.Replace(c, `{"id"`, `{"index":0,"id"`, 1) + `]},"finish_reason":null}]}`))
		}
		return b.String() + finishChunk("tool_calls") + doneEvent
	}
	tests := []struct {
		name   string
		calls  []string
		stream bool
		want   string // the client's first call's signature
	}{
		{"a whole answer: the client's call gets the signature", []string{search, real}, false, "sig-1"},
		{"a stream: the client's call gets the signature", []string{search, real}, true, "sig-1"},
		{"a client's call with a signature of its own keeps it", []string{search, signed}, false, "own"},
		{"a stream's client call with its own keeps it", []string{search, signed}, true, "own"},
		{"a client's call that came first is left as it is", []string{real, search}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, streamed(tt.calls...))
					return
				}
				_, _ = io.WriteString(w, whole(strings.Join(tt.calls, ",")))
			})
			base := newTestGateway(t, up)
			x := send(t, base, bigRequest(t, tt.stream), nil)
			var first gjson.Result
			if tt.stream {
				rep := readStream(t, bytes.NewReader(x.body))
				for _, raw := range rep.raw {
					if c := gjson.Get(raw, "choices.0.delta.tool_calls.0"); c.Exists() {
						first = c
						break
					}
				}
			} else {
				first = gjson.GetBytes(x.body, "choices.0.message.tool_calls.0")
			}
			if first.Get("function.name").String() != "chat_post_message" {
				t.Fatalf("the client's first call is %s, want chat_post_message: %s", first.Raw, x.body)
			}
			if got := first.Get("extra_content.google.thought_signature").String(); got != tt.want {
				t.Errorf("its thought signature is %q, want %q: %s", got, tt.want, first.Raw)
			}
		})
	}
}

// TestContentWrittenAsPartsStaysParts: Magistral writes a message's
// content as an array of parts, thinking and text. A search round goes
// back upstream with the array it was (its JSON text in a string made the
// model read its own thinking as prose), and a whole answer led by the
// round's words keeps its parts, the words leading as a text part.
func TestContentWrittenAsPartsStaysParts(t *testing.T) {
	const thinking = `{"type":"thinking","thinking":[{"type":"text","text":"I need an issue tool."}]}`
	searchCall := `"tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]`
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{
			false: "a whole answer's parts go back upstream as parts and reach the client as parts",
			true:  "a streamed round's parts go back upstream as parts",
		}[stream], func(t *testing.T) {
			var mu sync.Mutex
			var sentBack gjson.Result
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				msgs := gjson.ParseBytes(b).Get("messages")
				first := !msgs.Get(`#(role=="tool")`).Exists()
				if !first {
					mu.Lock()
					sentBack = msgs.Get(`#(role=="assistant").content`)
					mu.Unlock()
				}
				switch {
				case stream && first:
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, sseEvents(
						`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":[`+thinking+`]},"finish_reason":null}]}`,
						`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Let me look. "}]},"finish_reason":null}]}`,
						`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"create issue\"}"}}]},"finish_reason":null}]}`,
						`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
				case stream:
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, textChunk("Filed.")+finishChunk("stop")+doneEvent)
				case first:
					_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[`+thinking+`,{"type":"text","text":"Let me look. "}],`+searchCall+`},"finish_reason":"tool_calls"}]}`)
				default:
					_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[`+thinking+`,{"type":"text","text":"Filed."}]},"finish_reason":"stop"}]}`)
				}
			})
			base := newTestGateway(t, up)
			x := send(t, base, bigRequest(t, stream), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			if !sentBack.IsArray() || sentBack.Get("0.type").String() != "thinking" || sentBack.Get("1.text").String() != "Let me look. " {
				t.Errorf("the search round went back upstream with content %s, want its parts as an array", sentBack.Raw)
			}
			if stream {
				return // the client's stream relays the upstream's chunks as they are
			}
			content := gjson.GetBytes(x.body, "choices.0.message.content")
			if !content.IsArray() || content.Get("0.text").String() != "Let me look. " || content.Get("1.type").String() != "thinking" || content.Get("2.text").String() != "Filed." {
				t.Errorf("the client's content is %s, want the round's words as a text part, then the answer's parts", content.Raw)
			}
		})
	}
}

func TestARefusalThatIsNotOfStreamOptionsLeavesUsageOnForEveryone(t *testing.T) {
	const (
		ofRole = `{"error":{"message":"Invalid value: 'stream_options'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.","type":"invalid_request_error","param":"messages[0].role","code":"invalid_value"}}`
		ofOpts = `{"error":{"message":"Unknown parameter: 'stream_options'.","type":"invalid_request_error","param":"stream_options","code":"unknown_parameter"}}`
	)
	for _, tc := range []struct {
		name string
		// refuse answers the other tenant's request, whose message has
		// the role "stream_options"; opts is whether it carried them.
		refuse func(opts bool) string
	}{
		{"an error about another parameter that quotes stream_options", func(bool) string { return ofRole }},
		{"a refusal of stream_options whose resend without them is refused too", func(opts bool) string {
			if opts {
				return ofOpts
			}
			return ofRole
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var victim []bool // whether each of the victim's upstream requests carried stream_options
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				opts := gjson.GetBytes(b, "stream_options").Exists()
				if gjson.GetBytes(b, `messages.#(role=="stream_options")`).Exists() {
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, tc.refuse(opts))
					return
				}
				mu.Lock()
				victim = append(victim, opts)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, textChunk("Hello.")+finishChunk("stop")+doneEvent)
			})
			base := newTestGateway(t, up)
			send := func(role, key string) int {
				msgs := []map[string]any{{"role": role, "content": "Say hello."}}
				resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), map[string]string{"Authorization": key})
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			if status := send("stream_options", "Bearer sk-other-tenant"); status != http.StatusBadRequest {
				t.Fatalf("the other tenant's request: status %d, want the upstream's 400", status)
			}
			if status := send("user", "Bearer sk-victim"); status != http.StatusOK {
				t.Fatalf("the victim's request: status %d", status)
			}
			if len(victim) != 1 || !victim[0] {
				t.Errorf("the victim's upstream requests carried stream_options: %v, want [true]", victim)
			}
		})
	}
}
