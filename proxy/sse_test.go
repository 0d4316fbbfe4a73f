package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
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

func TestAFramesDataLinesEachGetTheirField(t *testing.T) {
	for _, tc := range []struct{ name, event, data, want string }{
		{"data of one line is one data line", "", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"each line of the data is a data line", "", "{\"a\":1,\n\"b\":2}", "data: {\"a\":1,\ndata: \"b\":2}\n\n"},
		{"an empty line of the data is an empty data line, not the event's end", "", "a\n\nb", "data: a\ndata: \ndata: b\n\n"},
		{"a named event's name comes first", "ping", "{}", "event: ping\ndata: {}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendFrame(nil, tc.event, []byte(tc.data)))
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if evs := readSpecEvents(got); len(evs) != 1 || evs[0] != tc.data {
				t.Errorf("a client reads %q, want %q", evs, tc.data)
			}
		})
	}
}

// TestAnEventWhoseDataSpansLinesReachesTheClientWhole: an event's data may
// come in several "data:" lines, which a client's parser joins with
// newlines (a server that pretty-prints its JSON sends them). The client
// must read the data the upstream sent, edits aside: before, the relay
// wrote the joined data after one "data: ", so its later lines, without
// a field name, were lost to the client and the JSON it read was cut.
func TestAnEventWhoseDataSpansLinesReachesTheClientWhole(t *testing.T) {
	const said = "Nothing does that."
	// spread puts every member of each event's data on a line of its own.
	spread := func(stream string) string { return strings.ReplaceAll(stream, `,"`, ",\ndata: \"") }
	responses := func(output string) string {
		rec := httptest.NewRecorder()
		writeResponse(rec, "resp_1", output, true)
		return rec.Body.String()
	}
	streams := map[string][2]string{ // a search round, then an answer
		"chat": {searchRound, textChunk(said) + finishChunk("stop") + doneEvent},
		"responses": {
			responses(`[{"type":"function_call","id":"fc_s","call_id":"call_s","name":"tool_search","arguments":"{\"query\":\"xqzv\"}","status":"completed"}]`),
			responses(`[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"` + said + `"}]}]`),
		},
		"messages": {
			messagesReply("msg_s", []string{`{"type":"tool_use","id":"toolu_s","name":"tool_search","input":{"query":"xqzv"}}`}, "tool_use", true),
			messagesReply("msg_1", []string{`{"type":"text","text":"` + said + `"}`}, "end_turn", true),
		},
	}
	paths := map[string]string{"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
	for _, tc := range []struct {
		name, api string
		searches  bool // a search round comes before the answer
	}{
		{"a Chat Completions answer in multi-line events parses", "chat", false},
		{"a Chat Completions answer in multi-line events after a search parses", "chat", true},
		{"a Responses answer in multi-line events parses", "responses", false},
		{"a Responses answer in multi-line events after a search parses", "responses", true},
		{"a Messages answer in multi-line events parses", "messages", false},
		{"a Messages answer in multi-line events after a search parses", "messages", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rounds := []string{spread(streams[tc.api][1])}
			if tc.searches {
				rounds = []string{spread(streams[tc.api][0]), rounds[0]}
			}
			var calls atomic.Int32
			base := newTestGateway(t, sseHandler(&calls, rounds...), searchOnly(t))
			x := sendTo(t, base, paths[tc.api], fruitlessRequest(t, tc.api, true), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			if n := int(calls.Load()); n != len(rounds) {
				t.Fatalf("%d upstream calls, want %d", n, len(rounds))
			}
			// The events as a client's parser reads them, each on one line
			// again, for answerText.
			var flat strings.Builder
			for _, ev := range readSpecEvents(string(x.body)) {
				if ev == "[DONE]" {
					continue
				}
				var b bytes.Buffer
				if err := json.Compact(&b, []byte(ev)); err != nil {
					t.Fatalf("the client read an event that is not JSON (%v): %q\nthe stream: %s", err, ev, x.body)
				}
				if gjson.GetBytes(b.Bytes(), "error").Exists() || gjson.GetBytes(b.Bytes(), "type").String() == "error" {
					t.Fatalf("the stream failed: %s", x.body)
				}
				flat.WriteString("data: " + b.String() + "\n\n")
			}
			if !strings.Contains(flat.String(), said) {
				t.Errorf("the client's events do not say %q: %s", said, x.body)
			}
		})
	}
}

// readSpecEvents reads the data of each event of an SSE stream as the
// specification's parser does: data lines joined with newlines, comments,
// names and ids left out.
func readSpecEvents(stream string) []string {
	var events, data []string
	for _, line := range strings.Split(stream, "\n") {
		if line == "" {
			if data != nil {
				events = append(events, strings.Join(data, "\n"))
			}
			data = nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	return events
}
