package rewrite

import "testing"

func TestRefusedMemberReadsTheShapesThatNameTheMember(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		member string
		want   bool
	}{
		{"OpenAI's param", `{"error":{"message":"Unknown parameter: 'stream_options'.","type":"invalid_request_error","param":"stream_options","code":"unknown_parameter"}}`, "stream_options", true},
		{"OpenAI's param under the member", `{"error":{"message":"x","param":"stream_options.include_usage"}}`, "stream_options", true},
		{"OpenAI's param naming another member", `{"error":{"message":"Unknown parameter: 'stream_options'.","param":"tools"}}`, "stream_options", false},
		{"a member whose name the param begins with", `{"error":{"message":"x","param":"stream_options_x"}}`, "stream_options", false},
		{"Mistral's pydantic detail", `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","include_usage"],"msg":"Extra inputs are not permitted"}]},"type":"invalid_request_message_error"}`, "stream_options", true},
		{"vLLM's top-level detail", `{"detail":[{"loc":["body","reasoning"],"msg":"Extra inputs are not permitted"}]}`, "reasoning", true},
		{"a detail about another member", `{"detail":[{"loc":["body","tools"],"msg":"Extra inputs are not permitted"}]}`, "reasoning", false},
		{"Groq's message", `{"error":{"message":"'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property 'reasoning' is unsupported)]","type":"invalid_request_error"}}`, "reasoning", true},
		{"a top-level message", `{"message":"Unrecognized request argument \"reasoning\""}`, "reasoning", true},
		{"a message quoting the member without refusing it", `{"error":{"message":"'reasoning' must be a string"}}`, "reasoning", false},
		{"a message refusing a member it does not quote", `{"error":{"message":"unknown parameter reasoning"}}`, "reasoning", false},
		{"not JSON", `upstream exploded`, "reasoning", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RefusedMember([]byte(tt.body), tt.member); got != tt.want {
				t.Errorf("RefusedMember(%s, %q) = %v, want %v", tt.body, tt.member, got, tt.want)
			}
		})
	}
}

func TestChatRefusedExtrasReadsTheRoundsMembers(t *testing.T) {
	groq := []byte(`{"error":{"message":"property 'reasoning' is unsupported","type":"invalid_request_error"}}`)
	tests := []struct {
		name   string
		rounds []Round
		want   bool
	}{
		{"no rounds", nil, false},
		{"rounds without extras", []Round{{Content: "hi"}}, false},
		{"a round echoing the member", []Round{{}, {Extra: `"refusal":null,"reasoning":"thought"`}}, true},
		{"a round echoing other members", []Round{{Extra: `"reasoning_content":"thought"`}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Chat{}).RefusedExtras(groq, tt.rounds); got != tt.want {
				t.Errorf("RefusedExtras = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOnlyChatEchoesExtras(t *testing.T) {
	for _, d := range []Dialect{Chat{}, Responses{}, Messages{}} {
		_, echoes := d.(ExtrasEchoer)
		if _, chat := d.(Chat); echoes != chat {
			t.Errorf("%T: ExtrasEchoer %v", d, echoes)
		}
	}
}
