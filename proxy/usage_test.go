package proxy

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestTheClientsUsageCountsEveryRoundOrTheContextAsThePolicySays runs a
// turn with a search round through each API, streamed and not, with the
// official SDKs, and reads the input tokens of the usage the client gets:
// every round's summed by default (what the upstream billed), and with
// gateway.usage context the last round's, the size of the context the
// model answered from, which agents that size their context window from
// usage need. The scripted upstream counts a quarter of each request
// body's bytes as its input tokens.
func TestTheClientsUsageCountsEveryRoundOrTheContextAsThePolicySays(t *testing.T) {
	const profile = "profiles:\n  - name: context-sized\n    match: {model: \"*-context\"}\n    gateway: {usage: context}\n"
	apis := []struct {
		name string
		// input runs the turn and returns the input tokens its usage says.
		input func(t *testing.T, base, model string, stream bool) int64
	}{
		{"a Chat Completions turn", func(t *testing.T, base, model string, stream bool) int64 {
			params := openai.ChatCompletionNewParams{
				Model: model, Tools: sdkTools(40),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(twoStepTask.Prompt)},
			}
			client := sdkClient(base)
			if !stream {
				c, err := client.Chat.Completions.New(context.Background(), params)
				if err != nil {
					t.Fatal(err)
				}
				return c.Usage.PromptTokens
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			return acc.Usage.PromptTokens
		}},
		{"a Responses API turn", func(t *testing.T, base, model string, stream bool) int64 {
			resp, err := sdkResponse(context.Background(), t, sdkClient(base), responses.ResponseNewParams{
				Model: model, Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}, stream)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Usage.InputTokens
		}},
		{"an Anthropic Messages API turn", func(t *testing.T, base, model string, stream bool) int64 {
			client := anthropicClient(base)
			params := anthropic.MessageNewParams{
				Model: anthropic.Model(model), MaxTokens: 1024, Tools: anthropicTools(40),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
			}
			var msg *anthropic.Message
			var err error
			if stream {
				msg, err = streamedMessage(t, client.Messages.NewStreaming(context.Background(), params))
			} else {
				msg, err = client.Messages.New(context.Background(), params)
			}
			if err != nil {
				t.Fatal(err)
			}
			return msg.Usage.InputTokens
		}},
	}
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			for _, tc := range []struct {
				name, model string
				context     bool
			}{
				{"sums every round's input by default", "m-test", false},
				{"counts the last round's input under usage: context", "m-context", true},
			} {
				mode := map[bool]string{false: "answered whole", true: "streamed"}[stream]
				t.Run(api.name+" "+mode+" "+tc.name, func(t *testing.T) {
					model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
					base := newTestGateway(t, model, withPolicy(loadPolicy(t, profile)))
					got := api.input(t, base, tc.model, stream)
					recs := model.Records()
					if len(recs) < 2 {
						t.Fatalf("%d upstream calls: the turn did not search", len(recs))
					}
					var sum int64
					for _, r := range recs {
						sum += r.PromptTokens
					}
					want := sum
					if tc.context {
						want = recs[len(recs)-1].PromptTokens
					}
					if got != want {
						t.Errorf("input tokens %d, want %d (rounds summed %d, last round %d)", got, want, sum, recs[len(recs)-1].PromptTokens)
					}
				})
			}
		}
	}
}
