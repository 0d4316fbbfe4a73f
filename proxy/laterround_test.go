package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestALaterRoundTheUpstreamRefusesEndsTheStreamWithItsError streams a
// turn whose first round says something and searches, and whose second
// round the upstream refuses: the client, which already has the first
// round's words, gets the upstream's own error, which the official SDK
// raises from its stream. Before, the client read "internal gateway
// error", and openai-go read the Responses error event as a stream that
// simply ended. The refused round is sent once: a refusal is resent only
// without members the gateway added that the upstream named, and the
// Responses and Messages rounds' items (whose "type" every error body
// names) were once read as such members, so the round went twice and the
// model was marked to lose its reasoning on every route.
func TestALaterRoundTheUpstreamRefusesEndsTheStreamWithItsError(t *testing.T) {
	const why = "prompt is too long: 210000 tokens, 200000 at most"
	for _, tc := range []struct {
		name    string
		refusal string // the upstream's 400 body
		code    string // the error code the client must read, when its API has codes
		stream  func(t *testing.T, base string) error
	}{
		{"a Chat Completions stream", `{"error":{"message":"` + why + `","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"context_length_exceeded",
			func(t *testing.T, base string) error {
				client := sdkClient(base)
				s := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
					Model: "gpt-test", Tools: sdkTools(40),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(twoStepTask.Prompt)},
				})
				for s.Next() {
				}
				return s.Err()
			}},
		{"a Responses API stream", `{"error":{"message":"` + why + `","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			"context_length_exceeded",
			func(t *testing.T, base string) error {
				client := sdkClient(base)
				s := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
					Model: "gpt-test", Tools: sdkResponseTools(40),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
				})
				for s.Next() {
					if s.Current().Type == "response.completed" {
						t.Error("a failed turn completed")
					}
				}
				return s.Err()
			}},
		{"an Anthropic Messages API stream", `{"type":"error","error":{"type":"invalid_request_error","message":"` + why + `"}}`, "",
			func(t *testing.T, base string) error {
				client := anthropicClient(base)
				s := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
					Model: "claude-test", MaxTokens: 256, Tools: anthropicTools(40),
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
				})
				for s.Next() {
					if s.Current().Type == "message_stop" {
						t.Error("a failed turn ended with message_stop")
					}
				}
				return s.Err()
			}},
	} {
		t.Run(tc.name+" ends with the upstream's refusal of a later round, which the SDK raises", func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Narrate: "Let me look that up. "}
			up, calls := firstRoundThen(model, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, tc.refusal)
			})
			g := testGateway(t, up)
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			err := tc.stream(t, srv.URL+"/v1")
			if calls.Load() < 2 {
				t.Fatalf("%d upstream calls: the first round did not search", calls.Load())
			}
			if calls.Load() != 2 {
				t.Errorf("%d upstream calls; want 2: the refused round was sent again", calls.Load())
			}
			if g.noExtras.Len() != 0 {
				t.Errorf("models %v marked to go without their message members; the upstream refused none", g.noExtras.Keys())
			}
			if err == nil || !strings.Contains(err.Error(), why) {
				t.Errorf("the stream's error is %v; want the upstream's %q", err, why)
			}
			var se *ssestream.StreamError
			if tc.code != "" && (!errors.As(err, &se) || gjson.GetBytes(se.Event.Data, "error.code").String() != tc.code) {
				t.Errorf("the stream's error is %v; want the upstream's code %s", err, tc.code)
			}
		})
	}
}

// TestAPassedThroughMessagesStreamThatBreaksRaisesInTheSDK cuts a
// Messages stream the gateway passes through (a prefill, a request
// without tools) after its first events: Anthropic's SDK must raise an
// error, which it does only for a named error event in its API's shape;
// the Chat-shaped chunk the gateway wrote read as a clean end, with the
// partial text and no stop reason.
func TestAPassedThroughMessagesStreamThatBreaksRaisesInTheSDK(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params anthropic.MessageNewParams
	}{
		{"a request without tools", anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}},
		{"a prefill", anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 64, Tools: anthropicTools(40),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi")), anthropic.NewAssistantMessage(anthropic.NewTextBlock("{"))}}},
	} {
		t.Run(tc.name+" cut mid-stream ends in an error the SDK raises", func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
					"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\nevent: content_blo")
				_ = http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			})
			client := anthropicClient(newTestGateway(t, up))
			s := client.Messages.NewStreaming(context.Background(), tc.params)
			for s.Next() {
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "upstream") {
				t.Errorf("the SDK's stream ended with %v; want the gateway's error event raised", err)
			}
		})
	}
}

// TestALaterRoundsFailedResponseKeepsTheStreamsID: the upstream fails a
// later round in band (response.failed); the client's stream ends with
// that event under the id its stream began with, as every other event.
func TestALaterRoundsFailedResponseKeepsTheStreamsID(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	up, calls := firstRoundThen(model, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_later\",\"status\":\"in_progress\",\"output\":[]}}\n\n"+
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_later\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n")
	})
	client := sdkClient(newTestGateway(t, up))
	s := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "gpt-test", Tools: sdkResponseTools(40),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
	})
	first, failed := "", ""
	for s.Next() {
		ev := s.Current()
		if ev.Type == "response.created" {
			first = ev.Response.ID
		}
		if ev.Type == "response.failed" {
			failed = ev.Response.ID
		}
	}
	if calls.Load() < 2 {
		t.Fatalf("%d upstream calls: the first round did not search", calls.Load())
	}
	if failed == "" || failed != first {
		t.Errorf("response.failed names %q, the stream began with %q", failed, first)
	}
}

// firstRoundThen serves a turn's first upstream call from model and every
// later one with later, counting the calls.
func firstRoundThen(model http.Handler, later func(http.ResponseWriter)) (http.Handler, *atomic.Int32) {
	calls := &atomic.Int32{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			model.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		later(w)
	}), calls
}

// TestALaterRoundsFailedResponseHoldsTheTurnsItemsAndUsage: the first
// round says something and searches, the second fails (status failed,
// in band when streamed). The client already has the first round's
// message, so the response that ends its turn holds it and the usage of
// both rounds, under the id the stream began with, streamed or not, with
// the upstream's status and error. Before, a stream ended with the
// failed round's response as the upstream sent it: no output, and that
// round's usage alone.
func TestALaterRoundsFailedResponseHoldsTheTurnsItemsAndUsage(t *testing.T) {
	const first = `[{"type":"message","id":"msg_A","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Let me look."}]},` +
		`{"type":"function_call","id":"fc_s","call_id":"call_search","name":"tool_search","arguments":"{\"query\":\"create issue\"}","status":"completed"}]`
	const failed = `{"id":"resp_2","object":"response","created_at":2,"status":"failed","model":"m","output":[],` +
		`"error":{"code":"server_error","message":"boom"},"usage":{"input_tokens":20,"output_tokens":3,"total_tokens":23}}`
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a whole answer holds the first round's message and both rounds' usage", false},
		{"a stream's response.failed holds them too", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if calls.Add(1) == 1 {
					writeResponse(w, "resp_1", first, tc.stream)
					return
				}
				if !tc.stream {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, failed)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_2\",\"status\":\"in_progress\",\"output\":[]}}\n\n"+
					"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":"+failed+"}\n\n")
			})
			base := newTestGateway(t, up)
			var tools []map[string]any
			for _, tool := range testCatalog(40) {
				fn := tool["function"].(map[string]any)
				tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "parameters": fn["parameters"]})
			}
			body, _ := json.Marshal(map[string]any{"model": "m", "input": "Open an issue.", "tools": tools, "stream": tc.stream})
			resp := postPath(t, base+"/responses", body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if calls.Load() != 2 {
				t.Fatalf("%d upstream calls; want the search round and the failed one", calls.Load())
			}
			got := gjson.ParseBytes(b)
			if tc.stream {
				for _, line := range strings.Split(string(b), "\n") {
					if data, ok := strings.CutPrefix(line, "data: "); ok && gjson.Get(data, "type").String() == "response.failed" {
						got = gjson.Get(data, "response")
					}
				}
			}
			var ids []string
			got.Get("output").ForEach(func(_, it gjson.Result) bool {
				ids = append(ids, it.Get("id").String())
				return true
			})
			wantID := map[bool]string{false: "resp_2", true: "resp_1"}[tc.stream]
			if got.Get("id").String() != wantID || got.Get("status").String() != "failed" || got.Get("error.message").String() != "boom" {
				t.Errorf("the turn ended with %s; want %s, status failed and the upstream's error", got.Raw, wantID)
			}
			if !slices.Equal(ids, []string{"msg_A"}) {
				t.Errorf("the response's output items %v; want the first round's msg_A", ids)
			}
			if in, out := got.Get("usage.input_tokens").Int(), got.Get("usage.output_tokens").Int(); in != 30 || out != 5 {
				t.Errorf("usage %d in, %d out; want both rounds', 30 and 5", in, out)
			}
		})
	}
}

// TestATurnRefusedAfterItsSearchesSaysWhatTheGatewayDid: a whole answer
// refused in a later round went out with no X-Toolgate-* header, and a
// stream refused after its first event kept in its trailers the numbers
// its headers had, its first round's, where the trailers are the whole
// turn's.
func TestATurnRefusedAfterItsSearchesSaysWhatTheGatewayDid(t *testing.T) {
	const refusal = `{"error":{"message":"prompt is too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	const prompt = 5000 // each search round's input tokens
	// scripted answers the first two upstream calls with a search round
	// (words, then a call of tool_search) that counts prompt input
	// tokens, and refuses the third.
	scripted := func(search func(w http.ResponseWriter, n int32, stream bool)) http.Handler {
		var calls atomic.Int32
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			n := calls.Add(1)
			if n == 3 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, refusal)
				return
			}
			search(w, n, gjson.GetBytes(b, "stream").Bool())
		})
	}
	chat := func(w http.ResponseWriter, n int32, stream bool) {
		id := fmt.Sprintf("call_s%d", n)
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, strings.NewReplacer(`"call_s1"`, `"`+id+`"`, `"prompt_tokens":10`, `"prompt_tokens":5000`).Replace(searchReply))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textChunk("Let me look. ")+callChunk(0, id, SearchToolName, `{"query":"create issue repository"}`)+finishChunk("tool_calls")+
			sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":2,"total_tokens":5002}}`)+doneEvent)
	}
	items := func(w http.ResponseWriter, n int32, stream bool) {
		output := fmt.Sprintf(`[{"type":"message","id":"msg_%d","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Let me look."}]},`+
			`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"tool_search","arguments":"{\"query\":\"create issue repository\"}","status":"completed"}]`, n, n, n)
		writeResponseUsage(w, fmt.Sprintf("resp_%d", n), output, `{"input_tokens":5000,"output_tokens":2,"total_tokens":5002}`, stream)
	}
	chatBody := func(stream bool) []byte {
		return chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug."}}, testCatalog(60), stream, nil)
	}
	responsesBody := func(stream bool) []byte {
		return []byte(`{"model":"m","input":"File a bug.","stream":` + fmt.Sprint(stream) + `,"tools":` + flatTools(t, 60) + `}`)
	}
	for _, tc := range []struct {
		name, path string
		search     func(w http.ResponseWriter, n int32, stream bool)
		body       func(bool) []byte
		stream     bool
	}{
		{"a whole chat answer refused in its third round has the turn's numbers in its headers", "/chat/completions", chat, chatBody, false},
		{"a chat stream refused in its third round has the turn's numbers in its trailers", "/chat/completions", chat, chatBody, true},
		{"a whole Responses answer refused in its third round has the turn's numbers in its headers", "/responses", items, responsesBody, false},
		{"a Responses stream refused in its third round has the turn's numbers in its trailers", "/responses", items, responsesBody, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestGateway(t, scripted(tc.search), searchOnly(t))
			resp := postPath(t, base+tc.path, tc.body(tc.stream))
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			final := resp.Header
			if tc.stream {
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "context_length_exceeded") {
					t.Fatalf("status %d: %s; want a stream that ends with the upstream's error", resp.StatusCode, body)
				}
				if got := resp.Header.Get("X-Toolgate-Rounds"); got != "1" {
					t.Fatalf("X-Toolgate-Rounds = %q in the headers; the test needs a stream whose headers left in its first round", got)
				}
				final = resp.Trailer
			} else if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %s; want the upstream's 400", resp.StatusCode, body)
			}
			if got := final.Get("X-Toolgate-Rounds"); got != "3" {
				t.Errorf("X-Toolgate-Rounds = %q, want 3 (the upstream calls made)", got)
			}
			if got := final.Get("X-Toolgate-Tools"); !strings.HasPrefix(got, "60->") {
				t.Errorf("X-Toolgate-Tools = %q, want 60->the tools of the refused round", got)
			}
			if _, gw := arrow(t, final, "X-Toolgate-Input-Tokens"); gw != 2*prompt {
				t.Errorf("X-Toolgate-Input-Tokens counts %d input tokens upstream, want the two answered rounds' %d", gw, 2*prompt)
			}
		})
	}
}
