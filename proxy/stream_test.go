package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/session"
)

// replay is an upstream that answers each request with the next recorded
// stream from testdata.
type replay struct {
	mu     sync.Mutex
	files  []string
	bodies [][]byte
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	b := make([]byte, r.ContentLength)
	_, _ = r.Body.Read(b)
	rp.bodies = append(rp.bodies, b)
	if len(rp.files) == 0 {
		http.Error(w, `{"error":{"message":"no more recordings"}}`, http.StatusInternalServerError)
		return
	}
	data, err := os.ReadFile(filepath.Join("testdata", "streams", rp.files[0]))
	rp.files = rp.files[1:]
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req_recorded")
	_, _ = w.Write(data)
}

func TestRecordedStreamsReplayAsOneCompletion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withUsage bool
	}{
		{"a client that asks for usage gets one summed usage chunk", true},
		{"a client that does not ask for usage gets none", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &replay{files: []string{"search_round1.sse", "search_round2.sse"}}
			base := newTestGateway(t, up)
			extra := map[string]any{}
			if tc.withUsage {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			msgs := []map[string]any{{"role": "user", "content": "Ping the team and open a ticket."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, extra), nil)
			defer resp.Body.Close()
			if got := resp.Header.Get("X-Request-Id"); got != "req_recorded" {
				t.Errorf("X-Request-Id = %q, want the upstream's", got)
			}
			rep := readStream(t, resp.Body)
			if rep.content != "Let me check." {
				t.Errorf("content = %q", rep.content)
			}
			if len(rep.ids) != 1 || !rep.ids["chatcmpl-R1"] {
				t.Errorf("chunk ids = %v, want only the first round's", rep.ids)
			}
			var names []string
			for _, c := range rep.calls {
				names = append(names, c.Get("name").String())
			}
			if strings.Join(names, ",") != "chat_post_message,repo_create_issue" {
				t.Errorf("client calls = %v (indexes %v), want chat_post_message at 0 and repo_create_issue at 1", names, rep.indexes)
			}
			if len(rep.calls) == 2 && rep.calls[0].Get("arguments").String() != `{"id": "eng"}` {
				t.Errorf("first call arguments = %s", rep.calls[0].Get("arguments"))
			}
			if len(rep.finishes) != 1 || rep.finishes[0] != "tool_calls" {
				t.Errorf("finishes = %v, want exactly [tool_calls]", rep.finishes)
			}
			if rep.dones != 1 || rep.comments != 0 {
				t.Errorf("[DONE] events = %d, comment lines = %d; want 1 and 0", rep.dones, rep.comments)
			}
			if !tc.withUsage {
				if len(rep.usage) != 0 {
					t.Errorf("got %d usage chunks, want none", len(rep.usage))
				}
				return
			}
			if len(rep.usage) != 1 {
				t.Fatalf("got %d usage chunks, want 1", len(rep.usage))
			}
			u := rep.usage[0]
			for path, want := range map[string]int64{"prompt_tokens": 1802, "completion_tokens": 60, "total_tokens": 1862, "prompt_tokens_details.cached_tokens": 768} {
				if got := u.Get(path).Int(); got != want {
					t.Errorf("usage %s = %d, want %d (sum over rounds)", path, got, want)
				}
			}
			// The second upstream request carries the search round.
			if len(up.bodies) != 2 {
				t.Fatalf("upstream saw %d requests, want 2", len(up.bodies))
			}
			second := gjson.ParseBytes(up.bodies[1])
			if !second.Get(`messages.#(role=="tool").content`).Exists() || second.Get("stream_options.include_usage").Bool() != true {
				t.Errorf("second upstream request lacks the search result or the usage request: %s", up.bodies[1])
			}
		})
	}
}

func TestStreamedTextReachesTheClientWhileTheUpstreamGenerates(t *testing.T) {
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = w.Write([]byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n"))
		_ = rc.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	})
	base := newTestGateway(t, up)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), nil)
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- ""
				return
			}
			if strings.Contains(line, "Hello") {
				got <- line
				return
			}
		}
	}()
	select {
	case line := <-got:
		if line == "" {
			t.Fatal("stream ended before the first text arrived")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first text did not reach the client while the upstream was still generating")
	}
	close(release)
}

func TestStreamCutByTheUpstreamEndsWithAnErrorEvent(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"},\"finish_reason\":null}]}\n\n"))
		// The handler returns: the connection ends without a finish or [DONE].
	})
	base := newTestGateway(t, up)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", strings.NewReader(string(chatRequest(t, msgs, testCatalog(30), true, nil))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rep := readStream(t, resp.Body)
	if rep.content != "partial" || !rep.errorEvent || rep.dones != 0 {
		t.Errorf("content %q, error event %v, [DONE] %d: want the partial text, an error event and no [DONE]", rep.content, rep.errorEvent, rep.dones)
	}
}

func TestASearchRoundWithoutDoneStillContinues(t *testing.T) {
	var calls int
	var mu sync.Mutex
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			// A server that ends its stream after the finish, without [DONE].
			_, _ = w.Write([]byte(callChunk(0, "call_s", "tool_search", `{"query":"send chat message"}`) + finishChunk("tool_calls")))
			return
		}
		_, _ = w.Write([]byte(textChunk("All done.") + finishChunk("stop") + "data: [DONE]\n\n"))
	})
	base := newTestGateway(t, up)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), nil)
	defer resp.Body.Close()
	rep := readStream(t, resp.Body)
	if rep.content != "All done." || rep.errorEvent || rep.dones != 1 || calls != 2 {
		t.Errorf("content %q, error event %v, [DONE] %d, upstream calls %d; want the second round's text, no error, one [DONE], 2 calls", rep.content, rep.errorEvent, rep.dones, calls)
	}
}

// TestTextBeforeASearchReachesTheClientBeforeTheNextRound: the relay
// writes events without flushing each one, so it must flush before a
// search round: text the model said before calling tool_search must not
// wait for the search and the next upstream round.
func TestTextBeforeASearchReachesTheClientBeforeTheNextRound(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			_, _ = w.Write([]byte(textChunk("Looking it up.") + callChunk(0, "call_s", "tool_search", `{"query":"send chat message"}`) + finishChunk("tool_calls") + "data: [DONE]\n\n"))
			return
		}
		select { // the second round answers only once the client has the first round's text
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(textChunk("Done.") + finishChunk("stop") + "data: [DONE]\n\n"))
	})
	base := newTestGateway(t, up)
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(30), true, nil)
	got := make(chan string, 1)
	go func() { // even the response headers wait for a flush
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- "request failed: " + err.Error()
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- "stream ended before the first round's text arrived"
				return
			}
			if strings.Contains(line, "Looking it up.") {
				got <- ""
				return
			}
		}
	}()
	select {
	case msg := <-got:
		if msg != "" {
			t.Fatal(msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first round's text was held while the next round waited")
	}
}

// slowSaves is a session store whose writes take a while, as a remote
// store's do; saved counts the writes that have finished.
type slowSaves struct {
	session.Store
	delay time.Duration
	saved atomic.Int32
}

func (s *slowSaves) Put(ctx context.Context, key string, st session.State) error {
	time.Sleep(s.delay)
	err := s.Store.Put(ctx, key, st)
	s.saved.Add(1)
	return err
}

// TestATurnIsSavedBeforeTheClientSeesItsEnd: an agent sends its next turn
// as soon as it has read the last one's end ([DONE], or the whole JSON
// body), and that turn must find this one's session state, even when the
// store takes a while to write.
func TestATurnIsSavedBeforeTheClientSeesItsEnd(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(b, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(textChunk("Done.") + finishChunk("stop") + "data: [DONE]\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}]}`))
	})
	for _, tc := range []struct {
		name   string
		stream bool
		end    string
	}{
		{"a streamed turn is saved before [DONE] reaches the client", true, "[DONE]"},
		{"a JSON turn is saved before its body reaches the client", false, `"finish_reason":"stop"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &slowSaves{Store: session.NewMemory(100, 0), delay: 200 * time.Millisecond}
			base := newTestGateway(t, up, func(g *Gateway) { g.Sessions = store })
			body := chatRequest(t, []map[string]any{{"role": "user", "content": "post a message to the team channel"}}, testCatalog(30), tc.stream, nil)
			resp := post(t, base, body, map[string]string{"X-Session-ID": "s-save"})
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if strings.Contains(line, tc.end) {
					break
				}
				if err != nil {
					t.Fatalf("the response ended without %s: %v", tc.end, err)
				}
			}
			if n := store.saved.Load(); n != 1 {
				t.Errorf("the client read the turn's end with %d session writes finished, want 1", n)
			}
		})
	}
}

// TestStreamedTurnsKeepTheUpstreamConnection: a relay that stops reading
// at [DONE] and closes the body makes an HTTP/1.1 transport discard the
// connection whenever the chunked body's end has not arrived yet, so
// every turn would open a new one. The upstream here flushes each event
// and ends its body after a pause, as a server that finishes its handler
// after writing [DONE] does.
func TestStreamedTurnsKeepTheUpstreamConnection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		search bool          // the first round calls tool_search
		pause  time.Duration // between [DONE] and the body's end
	}{
		{"a stream whose end comes with [DONE]", false, 0},
		{"a stream whose end comes after [DONE]", false, 20 * time.Millisecond},
		{"a search round whose end comes after [DONE]", true, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			conns, calls, ended := map[string]bool{}, 0, 0
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				conns[r.RemoteAddr] = true
				calls++
				n := calls
				mu.Unlock()
				defer func() { mu.Lock(); ended++; mu.Unlock() }()
				w.Header().Set("Content-Type", "text/event-stream")
				events := []string{textChunk("All "), textChunk("done."), finishChunk("stop"), "data: [DONE]\n\n"}
				if tc.search && n%2 == 1 {
					events = []string{callChunk(0, "call_s", "tool_search", `{"query":"send chat message"}`), finishChunk("tool_calls"), "data: [DONE]\n\n"}
				}
				for _, ev := range events {
					_, _ = io.WriteString(w, ev)
					w.(http.Flusher).Flush()
				}
				time.Sleep(tc.pause)
			})
			base := newTestGateway(t, up, func(g *Gateway) { g.Transport = NewTransport(0, 0) })
			msgs := []map[string]any{{"role": "user", "content": "hi"}}
			for turn := range 3 {
				resp := post(t, base, chatRequest(t, msgs, testCatalog(30), true, nil), nil)
				rep := readStream(t, resp.Body)
				resp.Body.Close()
				if rep.content != "All done." || rep.dones != 1 {
					t.Fatalf("turn %d: content %q, [DONE] %d; want the text and one [DONE]", turn, rep.content, rep.dones)
				}
				// The agent works between turns; on a loaded machine the
				// upstream may still be ending its answers, and a turn
				// sent before the gateway read their end would rightly
				// need a second connection.
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					mu.Lock()
					all := ended == calls
					mu.Unlock()
					if all {
						break
					}
				}
				time.Sleep(2 * tc.pause)
			}
			if len(conns) != 1 {
				t.Errorf("%d upstream calls over %d connections; want one connection", calls, len(conns))
			}
		})
	}
}

// streamRounds sends the streamed bigRequest through a gateway whose
// upstream answers its n-th call with rounds[n] (sseHandler), and returns
// the exchange, what the client assembled and the upstream calls made.
func streamRounds(t *testing.T, rounds ...string) (exchange, streamReply, int) {
	t.Helper()
	var calls atomic.Int32
	base := newTestGateway(t, sseHandler(&calls, rounds...))
	x := send(t, base, bigRequest(t, true), nil)
	return x, readStream(t, bytes.NewReader(x.body)), int(calls.Load())
}

// withRole gives a chunk made by textChunk or callChunk the assistant's
// role, as OpenAI sends it in a stream's first chunk.
func withRole(chunk string) string {
	return strings.Replace(chunk, `"delta":{`, `"delta":{"role":"assistant",`, 1)
}

// TestTheClientGetsTheRoleOnceBeforeAnythingElse: the openai SDK's stream
// helpers refuse a stream whose first delta has no role ("missing role
// for choice 0"). OpenAI sends the role in the first chunk, with the
// first call's start when the model calls a tool first, and the gateway
// cuts tool_search out of that chunk.
func TestTheClientGetsTheRoleOnceBeforeAnythingElse(t *testing.T) {
	search := callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`)
	answer := withRole(textChunk("")) + textChunk("Filed.") + finishChunk("stop") + doneEvent
	tests := []struct {
		name   string
		rounds []string
	}{
		{"the role rides with the search call, as OpenAI sends it", []string{withRole(search) + finishChunk("tool_calls") + doneEvent, answer}},
		{"the role comes in a chunk of its own before the search call", []string{withRole(textChunk("")) + search + finishChunk("tool_calls") + doneEvent, answer}},
		{"the role rides with a search call that a client's call follows", []string{
			withRole(search) + callChunk(1, "call_r1", "repo_create_issue", `{}`) + finishChunk("tool_calls") + doneEvent}},
		{"an answer without a search keeps its role", []string{answer}},
		{"a round after a search whose first call carries the role", []string{
			withRole(search) + finishChunk("tool_calls") + doneEvent,
			withRole(callChunk(0, "call_r1", "repo_create_issue", `{}`)) + finishChunk("tool_calls") + doneEvent}},
		{"a round after a search whose first text carries the role", []string{
			withRole(search) + finishChunk("tool_calls") + doneEvent,
			withRole(textChunk("Filed.")) + finishChunk("stop") + doneEvent}},
		{"a round after a search that said something first", []string{
			withRole(textChunk("Let me look. ")) + search + finishChunk("tool_calls") + doneEvent, answer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, rep, _ := streamRounds(t, tt.rounds...)
			if len(rep.roles) != 1 || rep.roles[0] != "assistant" || rep.lateRole || rep.errorEvent || rep.dones != 1 {
				t.Errorf("roles %q (late: %v), error event %v, [DONE] %d; want one assistant role before any content or call, no error, one [DONE]:\n%s",
					rep.roles, rep.lateRole, rep.errorEvent, rep.dones, x.body)
			}
		})
	}
}

// TestAStreamEndingWithoutItsLastBlankLineIsComplete: some servers end
// with "data: [DONE]\n" or no newline at all; the openai SDKs read such a
// stream as complete, and so must the gateway, in an answer and in a
// search round it continues.
func TestAStreamEndingWithoutItsLastBlankLineIsComplete(t *testing.T) {
	answer := textChunk("It is sunny.") + finishChunk("stop")
	search := callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`) + finishChunk("tool_calls")
	tests := []struct {
		name   string
		rounds []string
	}{
		{"an answer ending in [DONE] and one newline", []string{answer + "data: [DONE]\n"}},
		{"an answer ending in [DONE] and no newline", []string{answer + "data: [DONE]"}},
		{"a search round ending in [DONE] and one newline", []string{search + "data: [DONE]\n", answer + doneEvent}},
		{"a search round whose finish chunk has no blank line", []string{strings.TrimSuffix(search, "\n"), answer + doneEvent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, rep, calls := streamRounds(t, tt.rounds...)
			if x.status != http.StatusOK || rep.content != "It is sunny." || rep.errorEvent || rep.dones != 1 || calls != len(tt.rounds) {
				t.Errorf("status %d, content %q, error event %v, [DONE] %d, upstream calls %d; want 200, the answer, no error, one [DONE], %d calls:\n%s",
					x.status, rep.content, rep.errorEvent, rep.dones, calls, len(tt.rounds), x.body)
			}
		})
	}
}

func TestAChunkCutShortEndsWithAnErrorEvent(t *testing.T) {
	x, rep, _ := streamRounds(t, textChunk("half an ")+`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ans`)
	if rep.content != "half an " || !rep.errorEvent || rep.dones != 0 {
		t.Errorf("content %q, error event %v, [DONE] %d; want the whole chunks' text, an error event, no [DONE]:\n%s", rep.content, rep.errorEvent, rep.dones, x.body)
	}
}
