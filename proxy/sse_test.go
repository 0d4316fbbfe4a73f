package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
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
		{"event names and ids are skipped", "event: message\nid: 7\ndata: a\n\n", []string{"a"}},
		{"a comment before an event is read as it came", ": OPENROUTER PROCESSING\n\n:\r\nevent: message\n: ping\ndata: a\n\n", []string{"(comment) : OPENROUTER PROCESSING", "(comment) :", "(comment) : ping", "a"}},
		{"a comment inside an event's data is skipped", "data: a\n: ping\ndata: b\n\n", []string{"a\nb"}},
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

// TestAnEventAsLargeAsAWholeAnswerIsRelayed: a Responses stream's
// response.completed repeats the whole output, generated images' base64
// included, so one event can be as large as a whole answer; a rewritten
// stream relays it as the upstream sent it. An 8 MB bound cut such
// streams at their last event, though a whole answer of that size passed.
func TestAnEventAsLargeAsAWholeAnswerIsRelayed(t *testing.T) {
	big := strings.Repeat("iVBORw0KGgo", 1<<20) // 11 MB, one chunk
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textChunk(big)+finishChunk("stop")+doneEvent)
	})
	x := send(t, newTestGateway(t, up), bigRequest(t, true), nil)
	rep := readStream(t, bytes.NewReader(x.body))
	if x.status != http.StatusOK || rep.errorEvent || rep.dones != 1 || len(rep.content) != len(big) {
		t.Errorf("status %d, error event %v, [DONE] %d, %d bytes of content; want the whole %d bytes", x.status, rep.errorEvent, rep.dones, len(rep.content), len(big))
	}
}
