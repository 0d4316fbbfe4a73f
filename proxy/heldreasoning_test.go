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

// roundsUpstream answers the n-th request with the n-th of its rounds (the
// last repeats): the stream form to a streamed request, the whole form to
// one that is not. It keeps the bodies it was sent.
type roundsUpstream struct {
	stream, whole []string

	mu     sync.Mutex
	bodies []gjson.Result
}

func (u *roundsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, gjson.ParseBytes(b))
	n := len(u.bodies) - 1
	u.mu.Unlock()
	if gjson.GetBytes(b, "stream").Bool() {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, u.stream[min(n, len(u.stream)-1)])
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, u.whole[min(n, len(u.whole)-1)])
}

// reasoningOf is the reasoning a client reads from its answer: a whole
// answer's message members, or a stream's deltas accumulated as the SDKs
// accumulate them (strings continue, reasoning_details merge by index).
// It returns the reasoning text, and each reasoning detail's text and
// signature by index, joined with "|".
func reasoningOf(body []byte, stream bool) (text, details string) {
	var b strings.Builder
	var texts, sigs []string
	add := func(m gjson.Result) {
		b.WriteString(m.Get("reasoning_content").String())
		b.WriteString(m.Get("reasoning").String())
		m.Get("reasoning_details").ForEach(func(_, d gjson.Result) bool {
			i := int(d.Get("index").Int())
			for len(texts) <= i {
				texts, sigs = append(texts, ""), append(sigs, "")
			}
			texts[i] += d.Get("text").String()
			sigs[i] += d.Get("signature").String()
			return true
		})
	}
	if !stream {
		add(gjson.GetBytes(body, "choices.0.message"))
	} else {
		for _, line := range strings.Split(string(body), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				add(gjson.Get(data, "choices.0.delta"))
			}
		}
	}
	for i := range texts {
		details += texts[i] + "/" + sigs[i] + "|"
	}
	return b.String(), details
}

// TestASearchRoundsReasoningStaysWithTheGateway: the reasoning of a round
// that ended with only the gateway's calls goes back upstream with its
// round, as the providers require, and never to the client, streamed or
// not: a whole answer is the last round's message, and a stream now holds
// a round's reasoning until the round shows the client something. Before,
// a stream relayed every round's reasoning as it came, and OpenRouter's
// reasoning_details of the search round and of the answer reached the
// client under the same index, which an accumulator merged into one
// detail with both texts and both signatures ("SIG0SIG1").
func TestASearchRoundsReasoningStaysWithTheGateway(t *testing.T) {
	const (
		ck     = `{"id":"r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
		whole  = `{"id":"r1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
		search = `"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]`
	)
	detail := func(i int, text, sig string) string {
		return fmt.Sprintf(`{"type":"reasoning.text","text":%q,"signature":%q,"format":"anthropic-claude-v1","index":%d}`, text, sig, i)
	}
	for _, tc := range []struct {
		name          string
		stream, whole []string
		text, details string // the reasoning the client reads
		echo          string // a member of the search round's message upstream, and its value
		echoed        string
	}{
		{
			name: "OpenRouter's reasoning_details of the search round stay apart from the answer's",
			stream: []string{
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","content":"","reasoning":"think0","reasoning_details":[`+detail(0, "think0", "")+`]}`, "null"),
					fmt.Sprintf(ck, `{"content":"","reasoning_details":[`+detail(0, "", "SIG0")+`]}`, "null"),
					fmt.Sprintf(ck, `{"content":"",`+search+`}`, "null"),
					fmt.Sprintf(ck, `{}`, `"tool_calls"`),
				),
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","content":"","reasoning":"think1","reasoning_details":[`+detail(0, "think1", "")+`]}`, "null"),
					fmt.Sprintf(ck, `{"content":"","reasoning_details":[`+detail(0, "", "SIG1")+`]}`, "null"),
					fmt.Sprintf(ck, `{"content":"Posted."}`, "null"),
					fmt.Sprintf(ck, `{}`, `"stop"`),
				),
			},
			whole: []string{
				fmt.Sprintf(whole, `{"role":"assistant","content":null,"reasoning":"think0","reasoning_details":[`+detail(0, "think0", "SIG0")+`],`+search+`}`, "tool_calls"),
				fmt.Sprintf(whole, `{"role":"assistant","content":"Posted.","reasoning":"think1","reasoning_details":[`+detail(0, "think1", "SIG1")+`]}`, "stop"),
			},
			text: "think1", details: "think1/SIG1|",
			echo: "reasoning_details.0.signature", echoed: "SIG0",
		},
		{
			name: "DeepSeek's reasoning_content of the search round stays apart from the answer's",
			stream: []string{
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","content":null,"reasoning_content":"I should look "}`, "null"),
					fmt.Sprintf(ck, `{"reasoning_content":"for a chat tool."}`, "null"),
					fmt.Sprintf(ck, `{`+search+`}`, "null"),
					fmt.Sprintf(ck, `{}`, `"tool_calls"`),
				),
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","content":null,"reasoning_content":"Now post it."}`, "null"),
					fmt.Sprintf(ck, `{"content":"Posted."}`, "null"),
					fmt.Sprintf(ck, `{}`, `"stop"`),
				),
			},
			whole: []string{
				fmt.Sprintf(whole, `{"role":"assistant","content":null,"reasoning_content":"I should look for a chat tool.",`+search+`}`, "tool_calls"),
				fmt.Sprintf(whole, `{"role":"assistant","content":"Posted.","reasoning_content":"Now post it."}`, "stop"),
			},
			text: "Now post it.",
			echo: "reasoning_content", echoed: "I should look for a chat tool.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				up := &roundsUpstream{stream: tc.stream, whole: tc.whole}
				base := newTestGateway(t, up, searchOnly(t))
				x := send(t, base, bigRequest(t, stream), nil)
				if x.status != http.StatusOK {
					t.Fatalf("stream %v: status %d: %s", stream, x.status, x.body)
				}
				if text, details := reasoningOf(x.body, stream); text != tc.text || details != tc.details {
					t.Errorf("stream %v: the client read reasoning %q and details %q, want %q and %q: %s", stream, text, details, tc.text, tc.details, x.body)
				}
				if stream {
					rep := readStream(t, bytes.NewReader(x.body))
					if rep.content != "Posted." || !slices.Equal(rep.roles, []string{"assistant"}) || rep.lateRole || rep.dones != 1 {
						t.Errorf("content %q, roles %v (late %v), [DONE] %d; want the answer under one role: %s", rep.content, rep.roles, rep.lateRole, rep.dones, x.body)
					}
				}
				if len(up.bodies) != 2 {
					t.Fatalf("stream %v: the upstream got %d requests, want 2", stream, len(up.bodies))
				}
				if got := up.bodies[1].Get(`messages.#(tool_calls).` + tc.echo).String(); got != tc.echoed {
					t.Errorf("stream %v: the search round went back upstream with %s %q, want %q", stream, tc.echo, got, tc.echoed)
				}
			}
		})
	}
}

// TestHeldReasoningGoesBeforeWhatItLedTo: a round's reasoning reaches the
// client, in its place before what the round shows, once the round shows
// something: text (even in a round that then searches: the text cannot
// wait), a call of the client's, or the turn's end.
func TestHeldReasoningGoesBeforeWhatItLedTo(t *testing.T) {
	const ck = `{"id":"r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	searchChunk := fmt.Sprintf(ck, `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]}`, "null")
	for _, tc := range []struct {
		name   string
		rounds []string
		order  []string // what the client's events carry, in order: reasoning, text, a call, the finish
	}{
		{
			name: "a search round's reasoning goes before the text it says",
			rounds: []string{
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","reasoning_content":"Find a tool."}`, "null"),
					fmt.Sprintf(ck, `{"content":"Let me look."}`, "null"),
					searchChunk,
					fmt.Sprintf(ck, `{}`, `"tool_calls"`),
				),
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","content":"Posted."}`, "null"),
					fmt.Sprintf(ck, `{}`, `"stop"`),
				),
			},
			order: []string{"reasoning Find a tool.", "text Let me look.", "text Posted.", "finish stop"},
		},
		{
			name: "the reasoning goes before the client's call it led to",
			rounds: []string{
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","reasoning_content":"Post it."}`, "null"),
					fmt.Sprintf(ck, `{"tool_calls":[{"index":0,"id":"call_c","type":"function","function":{"name":"chat_post_message","arguments":"{}"}}]}`, "null"),
					fmt.Sprintf(ck, `{}`, `"tool_calls"`),
				),
			},
			order: []string{"reasoning Post it.", "call chat_post_message", "finish tool_calls"},
		},
		{
			name: "the reasoning of a round that ends the turn without a word goes before its finish",
			rounds: []string{
				sseEvents(
					fmt.Sprintf(ck, `{"role":"assistant","reasoning_content":"Nothing to do."}`, "null"),
					fmt.Sprintf(ck, `{}`, `"stop"`),
				),
			},
			order: []string{"reasoning Nothing to do.", "finish stop"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &roundsUpstream{stream: tc.rounds}
			base := newTestGateway(t, up, searchOnly(t))
			x := send(t, base, bigRequest(t, true), nil)
			rep := readStream(t, bytes.NewReader(x.body))
			var order []string
			for _, data := range rep.raw {
				ch := gjson.Get(data, "choices.0")
				if r := ch.Get("delta.reasoning_content").String(); r != "" {
					order = append(order, "reasoning "+r)
				}
				if c := ch.Get("delta.content").String(); c != "" {
					order = append(order, "text "+c)
				}
				if n := ch.Get("delta.tool_calls.0.function.name").String(); n != "" {
					order = append(order, "call "+n)
				}
				if f := ch.Get("finish_reason").String(); f != "" {
					order = append(order, "finish "+f)
				}
			}
			if !slices.Equal(order, tc.order) {
				t.Errorf("the client's events carry %q, want %q: %s", order, tc.order, x.body)
			}
			if !slices.Equal(rep.roles, []string{"assistant"}) || rep.lateRole {
				t.Errorf("roles %v (late %v), want one assistant role first: %s", rep.roles, rep.lateRole, x.body)
			}
		})
	}
}

// TestReasoningDetailsIndexesRunOnAcrossRounds: a search round that shows
// text releases its reasoning before it, and OpenRouter numbers every
// response's reasoning_details from 0; the answering round's go to the
// client numbered on past the earlier round's, so an accumulator merging
// details by index keeps both apart. Before, it merged them into one
// detail with both texts and both signatures.
func TestReasoningDetailsIndexesRunOnAcrossRounds(t *testing.T) {
	const ck = `{"id":"r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
	detail := func(i int, text, sig string) string {
		return fmt.Sprintf(`{"type":"reasoning.text","text":%q,"signature":%q,"format":"anthropic-claude-v1","index":%d}`, text, sig, i)
	}
	up := &roundsUpstream{stream: []string{
		sseEvents(
			fmt.Sprintf(ck, `{"role":"assistant","content":"","reasoning_details":[`+detail(0, "think0", "")+`]}`, "null"),
			fmt.Sprintf(ck, `{"content":"","reasoning_details":[`+detail(0, "", "SIG0")+`]}`, "null"),
			fmt.Sprintf(ck, `{"content":"Let me look. "}`, "null"),
			fmt.Sprintf(ck, `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]}`, "null"),
			fmt.Sprintf(ck, `{}`, `"tool_calls"`),
		),
		sseEvents(
			fmt.Sprintf(ck, `{"role":"assistant","content":"","reasoning_details":[`+detail(0, "think1", "")+`]}`, "null"),
			fmt.Sprintf(ck, `{"content":"Posted.","reasoning_details":[`+detail(0, "", "SIG1")+`]}`, "null"),
			fmt.Sprintf(ck, `{}`, `"stop"`),
		),
	}}
	base := newTestGateway(t, up, searchOnly(t))
	x := send(t, base, bigRequest(t, true), nil)
	if _, details := reasoningOf(x.body, true); details != "think0/SIG0|think1/SIG1|" {
		t.Errorf("the client read details %q, want each round's apart: %s", details, x.body)
	}
	if rep := readStream(t, bytes.NewReader(x.body)); rep.content != "Let me look. Posted." {
		t.Errorf("content %q, want both rounds' text", rep.content)
	}
	if len(up.bodies) != 2 {
		t.Fatalf("the upstream got %d requests, want 2", len(up.bodies))
	}
	if got := up.bodies[1].Get(`messages.#(tool_calls).reasoning_details`).Raw; got != `[`+detail(0, "think0", "SIG0")+`]` {
		t.Errorf("the search round went back upstream with reasoning_details %s, want its own, numbered from 0", got)
	}
}
