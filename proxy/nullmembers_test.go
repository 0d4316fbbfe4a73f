package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/session"
)

// sglangChunk is a chunk as SGLang writes it: every member of the delta,
// the null ones included.
func sglangChunk(delta, finish string) string {
	return fmt.Sprintf(`{"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s,"matched_stop":null}],"usage":null}`, delta, finish)
}

// TestAProvidersNullMembersAreNotCalls: SGLang (and the Kimi hosts on
// Chutes that run it) write "tool_calls": null and "role": null in every
// delta or message without them. gjson's ForEach calls back once over a
// null, so the gateway read a nameless call in every such delta: a
// stream's tool_search went unanswered and the client got an empty
// message that ended with stop after one upstream call, and a whole
// answer's nameless call was recorded as the client's in its session.
func TestAProvidersNullMembersAreNotCalls(t *testing.T) {
	t.Run("a stream whose deltas carry null calls runs the search and the next round", func(t *testing.T) {
		var calls atomic.Int32
		base := newTestGateway(t, sseHandler(&calls,
			sseEvents(
				sglangChunk(`{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}`, "null"),
				sglangChunk(`{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]}`, "null"),
				sglangChunk(`{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}`, `"tool_calls"`),
			),
			sseEvents(
				sglangChunk(`{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}`, "null"),
				sglangChunk(`{"role":null,"content":"Posted.","reasoning_content":null,"tool_calls":null}`, "null"),
				sglangChunk(`{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}`, `"stop"`),
			),
		), searchOnly(t))
		x := send(t, base, bigRequest(t, true), nil)
		rep := readStream(t, bytes.NewReader(x.body))
		if n := calls.Load(); n != 2 {
			t.Errorf("the upstream got %d requests, want 2: the search round and the answer", n)
		}
		if rep.content != "Posted." || len(rep.calls) != 0 {
			t.Errorf("client content %q and calls %v, want the second round's answer alone: %v", rep.content, rep.calls, rep.raw)
		}
		if !slices.Equal(rep.finishes, []string{"stop"}) || rep.dones != 1 || rep.errorEvent {
			t.Errorf("finishes %v, [DONE] %d, error event %v; want one stop and one [DONE]", rep.finishes, rep.dones, rep.errorEvent)
		}
		if len(rep.roles) == 0 || rep.roles[0] != "assistant" {
			t.Errorf("the client's first role is %q, want assistant: %v", rep.roles, rep.raw)
		}
	})
	t.Run("a whole answer with null calls is text and no call of the client's", func(t *testing.T) {
		var calls atomic.Int32
		var gw *Gateway
		base := newTestGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			calls.Add(1)
			_, _ = io.WriteString(w, `{"id":"s1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Nothing to do.","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":null}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`)
		}), searchOnly(t), func(g *Gateway) { gw = g })
		x := send(t, base, bigRequest(t, false), map[string]string{"X-Session-ID": "sglang"})
		if x.status != http.StatusOK || gjson.GetBytes(x.body, "choices.0.message.content").String() != "Nothing to do." {
			t.Fatalf("status %d: %s", x.status, x.body)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("the upstream got %d requests, want 1", n)
		}
		st, err := gw.Sessions.Get(context.Background(), session.Key(session.Tenant("Bearer sk-test"), "sglang", "", "", ""))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(st.Recent, "") || st.Last != "" {
			t.Errorf("the session recorded a nameless call as the client's: recent %q, last %q", st.Recent, st.Last)
		}
	})
}

// TestANullErrorIsNoError: a chunk may carry "error": null beside its
// choices, which gjson reads as existing. Before, the relay took such a
// chunk for the upstream's error event and ended the stream with it,
// after the first chunk; an error that is there still ends the stream.
func TestANullErrorIsNoError(t *testing.T) {
	chunk := func(errMember, delta, finish string) string {
		return sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","error":%s,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, errMember, delta, finish))
	}
	for _, tc := range []struct {
		name      string
		rounds    []string
		content   string
		upstream  int32
		wantError bool
	}{
		{
			name: "chunks with a null error stream on through a search round",
			rounds: []string{
				chunk("null", `{"role":"assistant","content":"Let me look. "}`, "null") +
					chunk("null", `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]}`, "null") +
					chunk("null", `{}`, `"tool_calls"`) + doneEvent,
				chunk("null", `{"role":"assistant","content":"Posted"}`, "null") +
					chunk("null", `{"content":" it."}`, "null") +
					chunk("null", `{}`, `"stop"`) + doneEvent,
			},
			content:  "Let me look. Posted it.",
			upstream: 2,
		},
		{
			name: "a chunk with an error object still ends the stream with it",
			rounds: []string{
				chunk("null", `{"role":"assistant","content":"Let"}`, "null") +
					chunk(`{"message":"upstream overloaded","code":502}`, `{"content":""}`, `"error"`) + doneEvent,
			},
			content:   "Let",
			upstream:  1,
			wantError: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := newTestGateway(t, sseHandler(&calls, tc.rounds...), searchOnly(t))
			x := send(t, base, bigRequest(t, true), nil)
			rep := readStream(t, bytes.NewReader(x.body))
			if rep.content != tc.content || calls.Load() != tc.upstream {
				t.Errorf("client content %q after %d upstream calls, want %q after %d: %s", rep.content, calls.Load(), tc.content, tc.upstream, x.body)
			}
			if tc.wantError {
				if !rep.errorEvent || rep.dones != 0 {
					t.Errorf("error event %v, [DONE] %d; want the upstream's error and no [DONE]: %s", rep.errorEvent, rep.dones, x.body)
				}
				return
			}
			if rep.errorEvent || rep.dones != 1 || !slices.Equal(rep.finishes, []string{"stop"}) {
				t.Errorf("error event %v, [DONE] %d, finishes %v; want a clean end with stop: %s", rep.errorEvent, rep.dones, rep.finishes, x.body)
			}
		})
	}
}
