package rewrite

import (
	"strings"
	"testing"
)

func TestLastUsageFindsTheLastObjectValuedUsageMember(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // the usage object's JSON, which its Raw begins with; "" when none
	}{
		{name: "none", line: `{"choices":[{"delta":{"content":"hi"}}]}`},
		{name: "null usage of a chat chunk", line: `{"choices":[],"usage":null}`},
		{name: "chat usage chunk", line: `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`, want: `{"prompt_tokens":3,"completion_tokens":1}`},
		{name: "spaces around the colon", line: `{"usage" :	 {"input_tokens":2}}`, want: `{"input_tokens":2}`},
		{
			name: "a tool schema's usage property before the response's usage",
			line: `{"type":"response.completed","response":{"tools":[{"parameters":{"properties":{"usage":{"type":"string"}}}}],"usage":{"input_tokens":5}}}`,
			want: `{"input_tokens":5}`,
		},
		{
			name: "a later usage that is not an object is skipped",
			line: `{"message":{"usage":{"input_tokens":7}},"x":{"usage":"none"}}`,
			want: `{"input_tokens":7}`,
		},
		{name: "the key as a value", line: `{"name":"usage"}`},
		{name: "the key at the line's end", line: `{"a":1,"usage"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LastUsage([]byte(tt.line))
			if ok != (tt.want != "") || !strings.HasPrefix(got.Raw, tt.want) {
				t.Errorf("LastUsage(%s) = %q, %v; want %q", tt.line, got.Raw, ok, tt.want)
			}
		})
	}
}
