package rewrite

import "testing"

func TestMissingCallOutputReadsTheResponsesAPIsRefusal(t *testing.T) {
	tests := []struct {
		name, body string
		want       bool
	}{
		{"the refusal", `{"error":{"message":"No tool output found for function call call_abc.","type":"invalid_request_error","param":"input","code":null}}`, true},
		{"another 400", `{"error":{"message":"Unknown parameter: 'x'.","type":"invalid_request_error"}}`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MissingCallOutput([]byte(tt.body)); got != tt.want {
				t.Errorf("MissingCallOutput = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNoteErrorMessageAppendsToTheMessageOnly(t *testing.T) {
	tests := []struct {
		name, body, want string
		ok               bool
	}{
		{"a message", `{"error":{"message":"No tool output.","code":null},"x":1}`, `{"error":{"message":"No tool output. (note)","code":null},"x":1}`, true},
		{"a message that is not a string", `{"error":{"message":{"detail":[]}}}`, "", false},
		{"no error object", `{"message":"bad"}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NoteErrorMessage([]byte(tt.body), " (note)")
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("NoteErrorMessage = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
