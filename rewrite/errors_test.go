package rewrite

import (
	"errors"
	"testing"
)

func TestUnreadableResponsesWrapErrBadResponse(t *testing.T) {
	parseEvent := func(data string) error {
		var ev Event
		return Chat{}.ParseEvent([]byte(data), &ev)
	}
	parse := func(d Dialect) func(string) error {
		return func(body string) error {
			_, err := d.ParseResponse([]byte(body))
			return err
		}
	}
	tests := []struct {
		name  string
		read  func(string) error
		input string
		want  string // the error's whole text, as it read before it wrapped ErrBadResponse
	}{
		{"chat: not JSON", parse(Chat{}), `{"id":`, "upstream response is not valid JSON"},
		{"chat: no choices", parse(Chat{}), `{"id":"x"}`, "upstream response has no choices array"},
		{"responses: not JSON", parse(Responses{}), `nope`, "upstream response is not valid JSON"},
		{"responses: no output", parse(Responses{}), `{"id":"x"}`, "upstream response has no output array"},
		{"messages: not JSON", parse(Messages{}), `[`, "upstream response is not valid JSON"},
		{"messages: no content", parse(Messages{}), `{"id":"x"}`, "upstream response has no content array"},
		{"chat stream: not JSON", parseEvent, `{"choices":`, "stream chunk is not valid JSON"},
		{"chat stream: not an object", parseEvent, `[1]`, "stream chunk is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read(tt.input)
			if !errors.Is(err, ErrBadResponse) || err.Error() != tt.want {
				t.Errorf("error %v; want %q wrapping ErrBadResponse", err, tt.want)
			}
		})
	}
}
