package proxy

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestSSEReaderReadsEachEventsData(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"events end at a blank line", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF lines read like LF ones", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"comments, event names and ids are skipped", ": ping\n\nevent: message\nid: 7\ndata: a\n\n", []string{"a"}},
		{"data lines of one event are joined by newlines", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"a last event without its blank line is still read", "data: a\n\ndata: [DONE]\n", []string{"a", "[DONE]"}},
		{"a last line without a newline is still read", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"a chunk cut short is returned as it stands, for the parse to refuse", `data: {"choices":[{"del`, []string{`{"choices":[{"del`}},
		{"blank lines alone are no event", "\n\n\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readEvents(strings.NewReader(tt.in))
			if !errors.Is(err, io.EOF) || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %q, %v; want %q, io.EOF", got, err, tt.want)
			}
		})
	}
}
