package proxy

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestOfficialSDKAgentWorksUnchanged drives the gateway with the official
// openai-go client: only the base URL points at the gateway.
func TestOfficialSDKAgentWorksUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"the SDK completes a two-step task without streaming", false},
		{"the SDK completes a two-step task with streaming and sees summed usage", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			base := newTestGateway(t, model)
			client := openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(0))
			var tools []openai.ChatCompletionToolUnionParam
			for _, tool := range testCatalog(40) {
				fn := tool["function"].(map[string]any)
				tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name:        fn["name"].(string),
					Description: openai.String(fn["description"].(string)),
					Parameters:  shared.FunctionParameters(fn["parameters"].(map[string]any)),
				}))
			}
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-test",
				Tools:    tools,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are an agent."), openai.UserMessage(twoStepTask.Prompt)},
			}
			if tc.stream {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			ctx := context.Background()
			var called []string
			var billed int64
			for turn := 0; turn < 8; turn++ {
				var msg openai.ChatCompletionMessage
				if tc.stream {
					stream := client.Chat.Completions.NewStreaming(ctx, params)
					var acc openai.ChatCompletionAccumulator
					for stream.Next() {
						acc.AddChunk(stream.Current())
					}
					if err := stream.Err(); err != nil {
						t.Fatalf("turn %d: stream: %v", turn, err)
					}
					msg = acc.Choices[0].Message
					billed += acc.Usage.PromptTokens
				} else {
					resp, err := client.Chat.Completions.New(ctx, params)
					if err != nil {
						t.Fatalf("turn %d: %v", turn, err)
					}
					msg = resp.Choices[0].Message
					billed += resp.Usage.PromptTokens
				}
				if len(msg.ToolCalls) == 0 {
					if msg.Content != twoStepTask.Answer {
						t.Errorf("answer = %q, want %q", msg.Content, twoStepTask.Answer)
					}
					break
				}
				params.Messages = append(params.Messages, msg.ToParam())
				for _, c := range msg.ToolCalls {
					called = append(called, c.Function.Name)
					params.Messages = append(params.Messages, openai.ToolMessage(`{"ok":true}`, c.ID))
				}
			}
			if len(called) != 2 || called[0] != "repo_create_issue" || called[1] != "chat_post_message" {
				t.Errorf("SDK saw calls %v, want [repo_create_issue chat_post_message]", called)
			}
			var upstream int64
			for _, r := range model.Records() {
				upstream += int64(r.BodyBytes / 4)
			}
			if billed != upstream {
				t.Errorf("SDK was billed %d prompt tokens, upstream counted %d", billed, upstream)
			}
		})
	}
}
