package proxy

import (
	"context"
	"strings"
	"sync/atomic"
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
			client := sdkClient(base)
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-test",
				Tools:    sdkTools(40),
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
				upstream += r.PromptTokens
			}
			if billed != upstream {
				t.Errorf("SDK was billed %d prompt tokens, upstream counted %d", billed, upstream)
			}
		})
	}
}

// sdkClient is the official client pointed at the gateway at base, with
// its retries off so a test sees each failure.
func sdkClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(0))
}

// sdkTools is testCatalog(n) as the SDK's tool params.
func sdkTools(n int) []openai.ChatCompletionToolUnionParam {
	var tools []openai.ChatCompletionToolUnionParam
	for _, tool := range testCatalog(n) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        fn["name"].(string),
			Description: openai.String(fn["description"].(string)),
			Parameters:  shared.FunctionParameters(fn["parameters"].(map[string]any)),
		}))
	}
	return tools
}

// TestTheSDKsStreamAccumulatorKeepsTheUpstreamsIdentity: the SDK's
// accumulator takes system_fingerprint and service_tier from the last
// chunk it reads, and the last chunk of a rewritten stream is one the
// gateway wrote (the summed usage, or a finish of its own). Without the
// upstream's fields there, a client lost the service tier it was billed
// at.
func TestTheSDKsStreamAccumulatorKeepsTheUpstreamsIdentity(t *testing.T) {
	identity := func(chunks string) string {
		return strings.ReplaceAll(chunks, `"model":"m"`, `"model":"m","service_tier":"flex","system_fingerprint":"fp_up"`)
	}
	usage := sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
	search := withRole(callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`)) + finishChunk("tool_calls") + usage + doneEvent
	answer := withRole(textChunk("Filed.")) + finishChunk("stop") + usage + doneEvent
	tests := []struct {
		name   string
		rounds []string
		usage  bool
	}{
		{"a turn with a search round, usage asked for", []string{identity(search), identity(answer)}, true},
		{"a turn with a search round, no usage asked for", []string{identity(search), identity(answer)}, false},
		{"a turn answered at once, usage asked for", []string{identity(answer)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			base := newTestGateway(t, sseHandler(&calls, tt.rounds...))
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-test",
				Tools:    sdkTools(40),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Open an issue in the repository.")},
			}
			if tt.usage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			client := sdkClient(base)
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if int(calls.Load()) != len(tt.rounds) {
				t.Fatalf("upstream calls = %d, want %d", calls.Load(), len(tt.rounds))
			}
			if acc.SystemFingerprint != "fp_up" || acc.ServiceTier != "flex" {
				t.Errorf("accumulated system_fingerprint %q, service_tier %q; want the upstream's fp_up and flex", acc.SystemFingerprint, acc.ServiceTier)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Filed." {
				t.Errorf("accumulated choices %+v, want the answer", acc.Choices)
			}
		})
	}
}
