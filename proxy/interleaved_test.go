package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"
)

// messagesReply is a Messages response of blocks, whole or as the events
// of a stream (each block opened empty, then its deltas).
func messagesReply(id string, blocks []string, stop string, stream bool) string {
	if !stream {
		return fmt.Sprintf(`{"id":%q,"type":"message","role":"assistant","model":"m","content":[%s],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":5}}`, id, strings.Join(blocks, ","), stop)
	}
	event := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	out := event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`, id))
	for i, raw := range blocks {
		b := gjson.Parse(raw)
		var start string
		var deltas []string
		switch b.Get("type").String() {
		case "thinking":
			start = `{"type":"thinking","thinking":"","signature":""}`
			deltas = []string{`{"type":"thinking_delta","thinking":` + q(b.Get("thinking").String()) + `}`, `{"type":"signature_delta","signature":` + q(b.Get("signature").String()) + `}`}
		case "text":
			start = `{"type":"text","text":""}`
			deltas = []string{`{"type":"text_delta","text":` + q(b.Get("text").String()) + `}`}
		case "tool_use":
			start = fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":{}}`, b.Get("id").String(), b.Get("name").String())
			deltas = []string{`{"type":"input_json_delta","partial_json":` + q(b.Get("input").Raw) + `}`}
		}
		out += event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, start))
		for _, d := range deltas {
			out += event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d))
		}
		out += event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	return out + event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		event("message_stop", `{"type":"message_stop"}`)
}

// TestAWholeMessagesAnswerShowsWhatItsStreamShows: with interleaved
// thinking, a search round [thinking, text, tool_search] and a last round
// [thinking, the client's call] give the client every block but the
// gateway's call, in the order a stream relays them, streamed or not.
// Before, the whole answer lost the search round's thinking and put the
// last round's before the search round's text.
func TestAWholeMessagesAnswerShowsWhatItsStreamShows(t *testing.T) {
	rounds := [][]string{
		{`{"type":"thinking","thinking":"Which tool files issues?","signature":"s0"}`, `{"type":"text","text":"Searching."}`,
			`{"type":"tool_use","id":"toolu_s","name":"tool_search","input":{"query":"create issue repository"}}`},
		{`{"type":"thinking","thinking":"repo_create_issue does.","signature":"s1"}`,
			`{"type":"tool_use","id":"toolu_c","name":"repo_create_issue","input":{"id":"acme/web"}}`},
	}
	want := []string{"thinking:Which tool files issues?", "text:Searching.", "thinking:repo_create_issue does.", "tool_use:repo_create_issue"}
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a whole answer holds both rounds' thinking, the search round's text and the client's call, in the stream's order", false},
		{"a stream holds both rounds' thinking, the search round's text and the client's call", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				i := min(int(n.Add(1)), len(rounds)) - 1
				stream := gjson.GetBytes(b, "stream").Bool()
				w.Header().Set("Content-Type", map[bool]string{false: "application/json", true: "text/event-stream"}[stream])
				_, _ = io.WriteString(w, messagesReply(fmt.Sprintf("msg_%d", i), rounds[i], "tool_use", stream))
			})
			client := anthropicClient(newTestGateway(t, up, searchOnly(t)))
			params := anthropic.MessageNewParams{
				Model: "claude-test", MaxTokens: 1024, Tools: anthropicTools(40),
				Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(twoStepTask.Prompt))},
			}
			var msg *anthropic.Message
			var err error
			if tc.stream {
				msg, err = streamedMessage(t, client.Messages.NewStreaming(context.Background(), params))
			} else {
				msg, err = client.Messages.New(context.Background(), params)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range msg.Content {
				switch b.Type {
				case "thinking":
					got = append(got, "thinking:"+b.Thinking)
				case "text":
					got = append(got, "text:"+b.Text)
				case "tool_use":
					got = append(got, "tool_use:"+b.Name)
				default:
					got = append(got, b.Type)
				}
			}
			if !slices.Equal(got, want) || n.Load() != 2 {
				t.Errorf("after %d upstream calls the client got %q, want %q", n.Load(), got, want)
			}
		})
	}
}
