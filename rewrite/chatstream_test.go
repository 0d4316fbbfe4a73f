package rewrite

import "testing"

func TestParseEventReadsWhatAClientWouldRead(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	tests := []struct {
		name      string
		delta     string
		wantText  bool
		content   string
		wantParts bool
	}{
		{"string content is text", `{"content":"Hi"}`, true, "Hi", false},
		{"an array of parts is text, its text parts read as the content", `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]},{"type":"text","text":"Hi"}]}`, true, "Hi", true},
		{"thinking parts alone still reach the client", `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]}]}`, true, "", true},
		{"reasoning is text", `{"reasoning":"hm"}`, true, "", false},
		{"a provider's number is not (Together's token_id)", `{"token_id":421}`, false, "", false},
		{"a role alone is not", `{"role":"assistant"}`, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev Event
			if err := ParseEvent([]byte(head+tt.delta+`,"finish_reason":null}]}`), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Text != tt.wantText || ev.Content != tt.content || (ev.ContentParts != "") != tt.wantParts {
				t.Errorf("Text %v, Content %q, ContentParts %q; want %v, %q, parts %v", ev.Text, ev.Content, ev.ContentParts, tt.wantText, tt.content, tt.wantParts)
			}
		})
	}
}
