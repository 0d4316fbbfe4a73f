package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestAPassthroughStreamThatFailsEndsWithAnErrorEvent: a stream the
// gateway passes through unchanged ends as a rewritten one does when its
// upstream fails: after timeouts.idle of silence (the upstream request
// cancelled), or cut short, with an error event and no [DONE], never with
// a clean end a client takes for a whole answer. (A stream still sending
// data is not cut at the request timeout: see
// TestAStreamStillSendingDataOutlivesTheRequestTimeout.)
func TestAPassthroughStreamThatFailsEndsWithAnErrorEvent(t *testing.T) {
	noTools := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fewTools := string(chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(3), true, nil))
	silent := func(cancelled chan<- struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, textChunk("partial"))
			_ = http.NewResponseController(w).Flush()
			if waitGone(r) {
				close(cancelled)
			}
		}
	}
	cut := func(cancelled chan<- struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			close(cancelled)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, textChunk("partial")+`data: {"id":"c1","choi`)
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
	}
	for _, tc := range []struct {
		name     string
		path     string
		body     string
		upstream func(chan<- struct{}) http.HandlerFunc
		code     string
	}{
		{"a chat stream without tools silent after its first event ends at the idle timeout", "/chat/completions", noTools, silent, "upstream_timeout"},
		{"a chat stream with fewer tools than min_tools silent after its first event ends at the idle timeout", "/chat/completions", fewTools, silent, "upstream_timeout"},
		{"a stream on another route silent after its first event ends at the idle timeout", "/responses", noTools, silent, "upstream_timeout"},
		{"a chat stream cut mid-event ends with an error event of its own", "/chat/completions", noTools, cut, "upstream_bad_response"},
		{"a stream on another route cut mid-event ends with an error event of its own", "/responses", noTools, cut, "upstream_bad_response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := make(chan struct{})
			base := newTestGateway(t, tc.upstream(cancelled), withPolicy(loadPolicy(t, "gateway:\n  timeouts: {idle: 300ms, request: 1s}\n")))
			x := sendTo(t, base, tc.path, []byte(tc.body), nil)
			rep := readStream(t, bytes.NewReader(x.body))
			if x.status != http.StatusOK || rep.content != "partial" || !rep.errorEvent || rep.dones != 0 {
				t.Fatalf("status %d content %q error event %v [DONE] %d; want the upstream's text, then an error event and no [DONE]:\n%s", x.status, rep.content, rep.errorEvent, rep.dones, x.body)
			}
			last := rep.raw[len(rep.raw)-1]
			if e := gjson.Get(last, "error"); e.Get("code").String() != tc.code || e.Get("type").String() != "gateway_error" || e.Get("param").Raw != "null" {
				t.Errorf("last event %s; want a gateway_error of code %s", last, tc.code)
			}
			event := "\n\ndata: " + last + "\n\n"
			if tc.path == "/responses" { // an API whose SDKs raise only a named error event
				event = "\n\nevent: error\ndata: " + last + "\n\n"
			}
			if !bytes.HasSuffix(x.body, []byte(event)) {
				t.Errorf("the error event is not an event of its own:\n%q", x.body)
			}
			if x.took > 3*time.Second {
				t.Errorf("the stream took %s to end; the idle timeout is 300 ms", x.took)
			}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Errorf("the upstream request was not cancelled")
			}
		})
	}
	t.Run("a passthrough stream that ends well reaches the client byte for byte", func(t *testing.T) {
		stream := textChunk("whole") + finishChunk("stop") + doneEvent
		base := newTestGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
		}), withPolicy(loadPolicy(t, "gateway:\n  timeouts: {idle: 300ms}\n")))
		for _, path := range []string{"/chat/completions", "/responses"} {
			if x := sendTo(t, base, path, []byte(noTools), nil); x.status != http.StatusOK || string(x.body) != stream {
				t.Errorf("%s: status %d body %q; want the upstream's stream", path, x.status, x.body)
			}
		}
	})
}

// failingBody returns its data, then err.
type failingBody struct {
	data []byte
	err  error
}

func (f *failingBody) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func (f *failingBody) Close() error { return nil }

func TestGuardStreamEndsAFailedStreamWithAnEventOfItsOwn(t *testing.T) {
	broken := errors.New("connection reset")
	event := `data: {"error":{"message":"upstream sent an unreadable response: stream ended early: connection reset","type":"gateway_error","param":null,"code":"upstream_bad_response"}}` + "\n\n"
	for _, tc := range []struct {
		name    string
		header  map[string]string
		data    string
		want    string
		wantErr error
	}{
		{"a stream cut mid-event gets a blank line, then the error event", map[string]string{"Content-Type": "text/event-stream"}, `data: {"id":`, `data: {"id":` + "\n\n" + event, nil},
		{"a stream cut after an event gets the error event right after it", map[string]string{"Content-Type": "text/event-stream; charset=utf-8"}, "data: {}\n\n", "data: {}\n\n" + event, nil},
		{"a stream cut after a line gets one more newline", map[string]string{"Content-Type": "text/event-stream"}, "data: {}\r\n", "data: {}\r\n\n" + event, nil},
		{"a compressed stream keeps its read error, for no event would be in its encoding", map[string]string{"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, "\x1f\x8b", "\x1f\x8b", broken},
		{"a JSON answer is left as it is", map[string]string{"Content-Type": "application/json"}, `{"id":`, `{"id":`, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Header: http.Header{}, Body: &failingBody{data: []byte(tc.data), err: broken}}
			for k, v := range tc.header {
				resp.Header.Set(k, v)
			}
			g := &Gateway{Logger: testLogger()}
			g.guardStream(context.Background(), resp, silences{first: time.Minute, between: time.Minute}, func() {}, nil)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestAStreamsUsageIsReadWhateverItsReads: the usage event of a
// passed-through stream is found however the relay's reads cut the
// stream, a stream without one counts nothing, and what the tap holds is
// never more than the line it is reading, nor more than two windows of a
// line longer than that (a response.completed repeating a generated
// image held the whole line, up to 64 MB).
func TestAStreamsUsageIsReadWhateverItsReads(t *testing.T) {
	usage := sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":4321,"completion_tokens":1,"total_tokens":4322}}`)
	long := strings.Repeat(textChunk(strings.Repeat("usage ", 40)), 300)
	// A Responses response.completed: tools whose schema names a
	// property usage, an image's base64 longer than the window, then the
	// usage and the members after it.
	completed := "event: response.completed\n" + sseData(`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","tools":[{"type":"function","name":"bill","parameters":{"type":"object","properties":{"usage":{"type":"string"}}}}],`+
		`"output":[{"type":"image_generation_call","result":"`+strings.Repeat("iVBORw0K", 40<<10)+`"}],"usage" : {"input_tokens":4321,"output_tokens":5},"user":null,"metadata":{}}}`)
	tests := []struct {
		name, stream string
		read         int
		want         int64
	}{
		{"a short stream read whole", textChunk("hi") + usage + doneEvent, 1 << 15, 4321},
		{"a long stream read in 7-byte pieces", long + usage + doneEvent, 7, 4321},
		{"a long stream read in 24 KiB pieces", long + usage + doneEvent, 24 << 10, 4321},
		{"a stream whose usage line has no final newline", long + strings.TrimSuffix(usage, "\n\n"), 4096, 4321},
		{"a stream without a usage event", long + doneEvent, 4096, 0},
		{"a response.completed longer than the window, read in 32 KiB pieces", long + completed, 32 << 10, 4321},
		{"a response.completed longer than the window, read in one piece", completed, len(completed), 4321},
		{"chunks whose usage is null before the usage chunk", strings.Repeat(sseData(`{"choices":[{"delta":{"content":"x"}}],"usage":null}`), 50) + usage, 100, 4321},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			longest := 0
			for _, l := range strings.Split(tt.stream, "\n") {
				longest = max(longest, len(l))
			}
			u := &usageTap{on: true, stream: true}
			for s := tt.stream; len(s) > 0; {
				n := min(tt.read, len(s))
				u.see([]byte(s[:n]))
				s = s[n:]
				if len(u.buf) > min(longest, 2*usageWindow+n) {
					t.Fatalf("held %d bytes; want at most the longest line's %d, and two windows and a read", len(u.buf), longest)
				}
			}
			if got, _ := u.tokens(); got != tt.want {
				t.Errorf("prompt tokens %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("a chunk whose usage is null costs no allocation", func(t *testing.T) {
		chunk := []byte(sseData(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}`))
		u := &usageTap{on: true, stream: true}
		if n := testing.AllocsPerRun(100, func() { u.see(chunk) }); n != 0 {
			t.Errorf("%v allocations a chunk; want 0", n)
		}
	})
}
