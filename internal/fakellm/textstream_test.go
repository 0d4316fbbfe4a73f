package fakellm

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTextStreamIsAChatCompletionStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		words []string
	}{
		{"words arrive one chunk each and end with a finish, usage and [DONE]", []string{"Done: ", "the ", "report."}},
		{"quotes, newlines and control bytes in a word stay valid JSON", []string{`say "hi"`, "\nbye", "\x01<>&"}},
		{"no words still make a complete stream", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var text, finish string
			var events, dones, usage int
			for _, line := range strings.Split(TextStream("c1", "m", tc.words...), "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				if data == "[DONE]" {
					dones++
					continue
				}
				events++
				var ev struct {
					ID      string
					Choices []struct {
						Delta        struct{ Content string }
						FinishReason *string `json:"finish_reason"`
					}
					Usage *struct {
						TotalTokens int `json:"total_tokens"`
					}
				}
				if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.ID != "c1" {
					t.Fatalf("event %q: id %q, %v", data, ev.ID, err)
				}
				for _, c := range ev.Choices {
					text += c.Delta.Content
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
				if ev.Usage != nil {
					usage = ev.Usage.TotalTokens
				}
			}
			if want := strings.Join(tc.words, ""); text != want || finish != "stop" || dones != 1 || usage == 0 || events != len(tc.words)+3 {
				t.Errorf("text %q finish %q [DONE] %d usage %d events %d; want %q, stop, 1, >0, %d", text, finish, dones, usage, events, want, len(tc.words)+3)
			}
		})
	}
}
