package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestALaterRoundTheUpstreamRefusesEndsTheStreamWithItsError streams a
// turn whose first round says something and searches, and whose second
// round the upstream refuses: the client, which already has the first
// round's words, gets the upstream's own error, which the official SDK
// raises from its stream. Before, the client read "internal gateway
// error", and openai-go read the Responses error event as a stream that
// simply ended.
func TestALaterRoundTheUpstreamRefusesEndsTheStreamWithItsError(t *testing.T) {
	const why = "prompt is too long: 210000 tokens, 200000 at most"
	for _, tc := range []struct {
		name    string
		refusal string // the upstream's 400 body
		stream  func(t *testing.T, base string) error
	}{
		{"the Responses API", `{"error":{"message":"` + why + `","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
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
		{"Anthropic's Messages API", `{"type":"error","error":{"type":"invalid_request_error","message":"` + why + `"}}`,
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
		t.Run(tc.name+": the SDK raises the upstream's refusal of a later round", func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Narrate: "Let me look that up. "}
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					model.ServeHTTP(w, r)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, tc.refusal)
			})
			err := tc.stream(t, newTestGateway(t, up))
			if calls.Load() < 2 {
				t.Fatalf("%d upstream calls: the first round did not search", calls.Load())
			}
			if err == nil || !strings.Contains(err.Error(), why) {
				t.Errorf("the stream's error is %v; want the upstream's %q", err, why)
			}
		})
	}
}
