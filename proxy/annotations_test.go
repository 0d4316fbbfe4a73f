package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// Azure OpenAI's streams, as its content-streaming documentation shows
// them: a chunk without choices that judges the prompt comes first, the
// role chunk carries an empty verdict, and with the asynchronous filter
// the verdicts on the completion follow the text in chunks of their own,
// with id "" and no delta.
const (
	azurePromptNote = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"%s"}}}]}`
	azureChunk      = `{"choices":[{"content_filter_results":%s,"delta":%s,"finish_reason":%s,"index":0,"logprobs":null}],"created":7,"id":"%s","model":"gpt-4o","object":"chat.completion.chunk"}`
	azureVerdict    = `{"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":%d},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":""}`
)

// azureRounds answers the gateway's upstream calls in turn with rounds.
func azureRounds(rounds ...string) (http.Handler, *atomic.Int32) {
	var n atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := int(n.Add(1)) - 1
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, rounds[min(i, len(rounds)-1)])
	}), &n
}

func TestAzureAnnotationsReachTheClientOfARewrittenStream(t *testing.T) {
	text := func(id, content string) string {
		return fmt.Sprintf(azureChunk, `{"hate":{"filtered":false,"severity":"safe"}}`, fmt.Sprintf(`{"content":%q}`, content), "null", id)
	}
	role := func(id string) string {
		return fmt.Sprintf(azureChunk, `{}`, `{"content":"","role":"assistant"}`, "null", id)
	}
	finish := func(id, reason string) string { return fmt.Sprintf(azureChunk, `{}`, `{}`, `"`+reason+`"`, id) }
	search := fmt.Sprintf(azureChunk, `{}`, `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"send chat message\"}"}}]}`, "null", "a1")
	for _, tc := range []struct {
		name     string
		rounds   []string
		upstream int
		severity string // of the one prompt verdict the client must get
		content  string
		verdicts []int // end offsets of the completion verdicts the client must get, in order
	}{
		{
			name: "a turn answered at once keeps the prompt's verdict first and the text's verdict after the text",
			rounds: []string{sseEvents(
				fmt.Sprintf(azurePromptNote, "safe"), role("a1"), text("a1", "Hello"), text("a1", " world"),
				finish("a1", "stop"), fmt.Sprintf(azureVerdict, 11),
			)},
			upstream: 1, severity: "safe", content: "Hello world", verdicts: []int{11},
		},
		{
			name: "a turn that searched first gets the client's prompt's verdict, not the search round's or its call's",
			rounds: []string{
				sseEvents(
					fmt.Sprintf(azurePromptNote, "safe"), role("a1"), search,
					fmt.Sprintf(azureVerdict, 40), finish("a1", "tool_calls"),
				),
				sseEvents(
					fmt.Sprintf(azurePromptNote, "low"), role("a2"), text("a2", "Posted."),
					finish("a2", "stop"), fmt.Sprintf(azureVerdict, 7),
				),
			},
			upstream: 2, severity: "safe", content: "Posted.", verdicts: []int{7},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, calls := azureRounds(tc.rounds...)
			base := newTestGateway(t, up)
			msgs := []map[string]any{{"role": "user", "content": "Tell the team in chat that the build is green."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), nil)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			rep := readStream(t, resp.Body)
			if got := int(calls.Load()); got != tc.upstream {
				t.Fatalf("upstream called %d times, want %d: the turn was not the one under test", got, tc.upstream)
			}
			if rep.content != tc.content || len(rep.roles) != 1 || rep.dones != 1 {
				t.Errorf("content %q, roles %v, [DONE] %d times: want %q, one role, one [DONE]", rep.content, rep.roles, rep.dones, tc.content)
			}
			var notes []gjson.Result
			var verdicts []gjson.Result
			for _, data := range rep.raw {
				ev := gjson.Parse(data)
				if ev.Get("prompt_filter_results").Exists() {
					notes = append(notes, ev)
				}
				if ev.Get("choices.0.content_filter_offsets").Exists() {
					verdicts = append(verdicts, ev)
				}
			}
			if len(notes) != 1 {
				t.Fatalf("client got %d prompt verdicts, want 1: %q", len(notes), rep.raw)
			}
			if rep.raw[0] != notes[0].Raw {
				t.Errorf("the prompt verdict is not the stream's first event: %q", rep.raw)
			}
			if got := notes[0].Get("prompt_filter_results.0.content_filter_results.hate.severity").String(); got != tc.severity {
				t.Errorf("prompt verdict severity %q, want %q (the client's prompt's)", got, tc.severity)
			}
			if len(verdicts) != len(tc.verdicts) {
				t.Fatalf("client got %d completion verdicts, want %d: %q", len(verdicts), len(tc.verdicts), rep.raw)
			}
			for i, v := range verdicts {
				if got := int(v.Get("choices.0.content_filter_offsets.end_offset").Int()); got != tc.verdicts[i] {
					t.Errorf("verdict %d ends at %d, want %d", i, got, tc.verdicts[i])
				}
				if id := v.Get("id").String(); id != "a1" {
					t.Errorf("verdict %d has id %q, want the turn's a1", i, id)
				}
			}
			last := verdicts[len(verdicts)-1].Raw
			if i := strings.Index(strings.Join(rep.raw, "\n"), last); i < strings.Index(strings.Join(rep.raw, "\n"), tc.content[:3]) {
				t.Errorf("the verdict came before the text it judges: %q", rep.raw)
			}
		})
	}
}

// TestTheSDKsAccumulatorTakesEveryChunkOfAnAzureTurn: openai-go's
// accumulator refuses a chunk whose id differs from the turn's, as
// Azure's verdicts (id "") would be direct. Through the gateway they carry
// the turn's id, so the SDK takes every chunk and its verdicts with them.
func TestTheSDKsAccumulatorTakesEveryChunkOfAnAzureTurn(t *testing.T) {
	chunk := func(id, cfr, delta, finish string) string { return fmt.Sprintf(azureChunk, cfr, delta, finish, id) }
	const safe = `{"hate":{"filtered":false,"severity":"safe"}}`
	up, calls := azureRounds(
		sseEvents(
			fmt.Sprintf(azurePromptNote, "safe"), chunk("a1", `{}`, `{"content":"","role":"assistant"}`, "null"),
			chunk("a1", `{}`, `{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"post chat message\"}"}}]}`, "null"),
			chunk("a1", `{}`, `{}`, `"tool_calls"`),
		),
		sseEvents(
			fmt.Sprintf(azurePromptNote, "low"), chunk("a2", `{}`, `{"content":"","role":"assistant"}`, "null"),
			chunk("a2", safe, `{"content":"Posted."}`, "null"), chunk("a2", `{}`, `{}`, `"stop"`),
			fmt.Sprintf(azureVerdict, 7),
		),
	)
	client := sdkClient(newTestGateway(t, up))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Tools:    sdkTools(40),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell the team in chat that the build is green.")},
	})
	var acc openai.ChatCompletionAccumulator
	refused, verdicts := 0, 0
	for stream.Next() {
		c := stream.Current()
		if !acc.AddChunk(c) {
			refused++
		}
		if strings.Contains(c.RawJSON(), "content_filter_offsets") {
			verdicts++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("upstream called %d times, want 2 (a search round, then the answer)", calls.Load())
	}
	if refused != 0 || verdicts != 1 {
		t.Errorf("the accumulator refused %d chunks and the client read %d verdicts; want 0 and 1", refused, verdicts)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Posted." || acc.ID != "a1" {
		t.Errorf("accumulated id %q, choices %+v; want a1 and the answer", acc.ID, acc.Choices)
	}
}

// TestAWholeAzureAnswerCarriesTheClientsPromptVerdict: a non-streamed turn
// is the last round's body, but its prompt_filter_results are the first
// round's, whose prompt is the client's, as a stream's first event is.
func TestAWholeAzureAnswerCarriesTheClientsPromptVerdict(t *testing.T) {
	verdict := func(severity string) string {
		return `"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"` + severity + `"}}}]`
	}
	search := `{"id":"a1","object":"chat.completion","created":7,"model":"gpt-4o",` + verdict("safe") + `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"post chat message\"}"}}]},"finish_reason":"tool_calls","content_filter_results":{}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`
	answer := `{"id":"a2","object":"chat.completion","created":8,"model":"gpt-4o",` + verdict("low") + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Posted."},"finish_reason":"stop","content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`
	for _, tc := range []struct {
		name     string
		rounds   []string
		severity string
	}{
		{"a turn that searched gets the first round's verdict", []string{search, answer}, "safe"},
		{"a turn answered at once keeps its round's verdict", []string{answer}, "low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				i := int(n.Add(1)) - 1
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.rounds[min(i, len(tc.rounds)-1)])
			})
			x := send(t, newTestGateway(t, up), bigRequest(t, false), nil)
			if x.status != http.StatusOK || int(n.Load()) != len(tc.rounds) {
				t.Fatalf("status %d after %d upstream calls, want 200 after %d: %s", x.status, n.Load(), len(tc.rounds), x.body)
			}
			body := gjson.ParseBytes(x.body)
			if got := body.Get("prompt_filter_results.0.content_filter_results.hate.severity").String(); got != tc.severity {
				t.Errorf("prompt verdict severity %q, want %q: %s", got, tc.severity, x.body)
			}
			if body.Get("choices.0.message.content").String() != "Posted." || !body.Get("choices.0.content_filter_results.hate").Exists() {
				t.Errorf("the answer or its completion verdict is not the last round's: %s", x.body)
			}
		})
	}
}
