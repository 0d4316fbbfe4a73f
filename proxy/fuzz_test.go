package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// readEvents reads every event of r with the gateway's SSE reader, and
// the comments between, marked "(comment)".
func readEvents(r io.Reader) ([]string, error) {
	s := newSSEReader(r)
	var out []string
	for {
		data, comment, err := s.Next()
		if err != nil {
			return out, err
		}
		if comment {
			out = append(out, "(comment) "+string(data))
			continue
		}
		if len(data) > maxEventSize {
			return out, fmt.Errorf("event of %d bytes passed the %d limit", len(data), maxEventSize)
		}
		out = append(out, string(data))
	}
}

// FuzzSSEReader feeds arbitrary bytes to the SSE reader: it must end with
// io.EOF or errEventTooLarge, never panic, and read
// the same events whether the bytes arrive at once or one at a time.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"", "data: x\n\n", "data: a\ndata: b\n\n", "data: x\r\n\r\n", ": comment\n\ndata: [DONE]\n\n",
		"event: message\nid: 1\ndata: {}\n\n", "data:no-space\n\n", "data: cut", "data: x\n", "\n\n\n",
		textChunk("hi") + finishChunk("stop") + doneEvent, searchRound, "data: " + strings.Repeat("x", 70000) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, werr := readEvents(bytes.NewReader(in))
		bytewise, berr := readEvents(iotest.OneByteReader(bytes.NewReader(in)))
		for _, err := range []error{werr, berr} {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errEventTooLarge) {
				t.Fatalf("reader ended with %v", err)
			}
		}
		if !errors.Is(werr, berr) || fmt.Sprint(whole) != fmt.Sprint(bytewise) {
			t.Fatalf("whole read gave %q (%v), byte-wise read %q (%v)", whole, werr, bytewise, berr)
		}
		if len(whole) > len(in)/2+1 {
			t.Fatalf("%d events from %d bytes", len(whole), len(in))
		}
	})
}

// streamOps builds an upstream stream from fuzz bytes: each byte picks a
// chunk from a menu of what real upstreams send (and some of what broken
// ones do), so the fuzzer explores orders of fragments, not JSON syntax.
func streamOps(ops []byte, tail string) string {
	names := []string{"repo_create_issue", SearchToolName, "chat_post_message", "fs_read_file"}
	var b strings.Builder
	for _, op := range ops {
		p := int(op / 10)
		i := p % 4
		switch op % 10 {
		case 0:
			if p >= 12 { // a thinking model's reasoning, which rounds must send back
				b.WriteString(sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"r%d "},"finish_reason":null}]}`, p)))
				break
			}
			b.WriteString(textChunk(fmt.Sprintf("t%d ", p)))
		case 1:
			if p >= 12 { // a whole call with no index and a signature, as Gemini sends
				b.WriteString(sseData(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"g%d","type":"function","function":{"name":%q,"arguments":"{}"},"extra_content":{"google":{"thought_signature":"s"}}}]},"finish_reason":null}]}`, p, names[p%len(names)])))
				break
			}
			b.WriteString(callChunk(i, fmt.Sprintf("call_%d", p), names[p%len(names)], ""))
		case 2:
			b.WriteString(callChunk(i, "", "", `{"query":`))
		case 3:
			b.WriteString(callChunk(i, "", "", `"create issue"}`))
		case 4:
			b.WriteString(finishChunk([]string{"stop", "tool_calls", "length"}[p%3]))
		case 5:
			b.WriteString(sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`))
		case 6:
			b.WriteString(doneEvent)
		case 7:
			if p >= 12 { // the role on a call's first fragment, as OpenAI sends it
				b.WriteString(withRole(callChunk(i, fmt.Sprintf("call_r%d", p), names[p%len(names)], "")))
				break
			}
			b.WriteString(sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`))
		case 8:
			b.WriteString([]string{": keep-alive\n\n", "data: {broken\n\n", "event: ping\n\n", "data: 42\n\n"}[p%4])
		case 9:
			b.WriteString(sseData(`{"error":{"message":"overloaded","type":"server_error"}}`))
		}
	}
	b.WriteString(tail)
	return b.String()
}

// checkClientStream asserts what any client may rely on in a 200 stream:
// every line is an event or a comment; every event is JSON or [DONE]; it ends with exactly one [DONE] or with one
// error event, nothing after; at most one finish; tool-call indices are
// contiguous from 0; tool_search never appears as a call.
func checkClientStream(body string) error {
	var events []string
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, data)
		} else if line != "" && !strings.HasPrefix(line, ":") { // a comment is the upstream's keep-alive, passed on
			return fmt.Errorf("a line that is not an event: %q", line)
		}
	}
	if len(events) == 0 {
		return errors.New("an empty stream")
	}
	finishes, roles, next := 0, 0, int64(0)
	for i, ev := range events {
		last := i == len(events)-1
		if ev == "[DONE]" {
			if !last {
				return fmt.Errorf("[DONE] at event %d of %d", i, len(events))
			}
			continue
		}
		if !gjson.Valid(ev) {
			return fmt.Errorf("event %d is not JSON: %q", i, ev)
		}
		j := gjson.Parse(ev)
		if j.Get("error").Exists() {
			if !last {
				return fmt.Errorf("an error event before the end: %q", ev)
			}
			continue
		}
		if last {
			return fmt.Errorf("the stream ends without [DONE] or an error: %q", ev)
		}
		if j.Get("choices.0.finish_reason").String() != "" {
			finishes++
		}
		if j.Get("choices.0.delta.role").Exists() {
			roles++
		}
		var bad error
		j.Get("choices.0.delta.tool_calls").ForEach(func(_, c gjson.Result) bool {
			idx := c.Get("index").Int()
			switch {
			case c.Get("index").Type != gjson.Number:
				bad = fmt.Errorf("a tool-call fragment without an index: %q", ev)
			case c.Get("function.name").String() == SearchToolName:
				bad = fmt.Errorf("the client saw a %s call: %q", SearchToolName, ev)
			case idx > next:
				bad = fmt.Errorf("tool-call index %d after %d: %q", idx, next-1, ev)
			case idx == next:
				next++
			}
			return bad == nil
		})
		if bad != nil {
			return bad
		}
	}
	if finishes > 1 {
		return fmt.Errorf("%d finish chunks", finishes)
	}
	if roles > 1 {
		return fmt.Errorf("%d role deltas", roles)
	}
	return nil
}

// FuzzStreamRelay sends fuzzed upstream streams through the whole gateway
// (search loop and relay, no network): the first round is the fuzz stream,
// later rounds answer in text. The client gets a well-formed stream or an
// OpenAI-shaped error status.
func FuzzStreamRelay(f *testing.F) {
	f.Add([]byte{0, 10, 40, 6}, "")                    // text, finish stop
	f.Add([]byte{11, 2, 3, 14, 6}, "")                 // a tool_search call
	f.Add([]byte{1, 2, 3, 21, 32, 33, 14, 5, 6}, "")   // a real call and a search
	f.Add([]byte{7, 0, 2, 3, 1, 14, 6}, "")            // arguments before the name
	f.Add([]byte{0, 10, 9}, "")                        // an error event mid-way
	f.Add([]byte{0, 1, 31, 2, 3}, "data: {\"cut\":")   // cut mid-event
	f.Add([]byte{4, 4, 6}, "")                         // two finishes
	f.Add([]byte{0, 8, 18, 28, 38, 40, 6}, ": done\n") // noise
	f.Add([]byte{120, 131, 121, 40, 6}, "")            // reasoning, then unnumbered whole calls
	f.Add([]byte{7, 11, 12, 13, 14, 6}, "")            // a role, then a search: the next round has a role too
	f.Add([]byte{137, 12, 13, 14, 6}, "")              // the role on the search call's first fragment
	u, _ := url.Parse("http://upstream.invalid/v1")
	snap := policy.Default()
	body := chatRequestBytes(testCatalog(30))
	// Shared by every input: the store starts a goroutine, and compiling
	// the same catalog each time would only slow the fuzzer.
	sessions, catalogs := session.NewMemory(100, 0), selector.NewCache(2)
	f.Fuzz(func(t *testing.T, ops []byte, tail string) {
		if len(ops) > 256 || len(tail) > 4096 {
			return
		}
		first := streamOps(ops, tail)
		g := &Gateway{Upstream: u, Policy: func() *policy.Snapshot { return snap }, Sessions: sessions, Catalogs: catalogs, Logger: testLogger(),
			Transport: streamsThen(first, withRole(textChunk("after"))+finishChunk("stop")+doneEvent)}
		out, ok := fuzzTurn(t, g, "/v1/chat/completions", body)
		if !ok {
			return
		}
		if err := checkClientStream(out); err != nil {
			t.Fatalf("%v\nupstream:\n%s\nclient:\n%s", err, first, out)
		}
	})
}

// streamsThen is an upstream that answers its first request with the
// stream first and every later one with next.
func streamsThen(first, next string) http.RoundTripper {
	var calls atomic.Int32
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		stream := next
		if calls.Add(1) == 1 {
			stream = first
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream)), Request: r}, nil
	})
}

// fuzzTurn posts body to path on g and returns what the client read when
// the status is 200; any other status must be a gateway error with a
// message, in Anthropic's shape on the Messages route (ok false).
func fuzzTurn(t *testing.T, g *Gateway, path string, body []byte) (out string, ok bool) {
	t.Helper()
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	out = rec.Body.String()
	if rec.Code != http.StatusOK {
		anthropicShape := !strings.HasSuffix(path, "/messages") || gjson.Get(out, "type").String() == "error"
		if rec.Code != http.StatusBadGateway && rec.Code != http.StatusGatewayTimeout || !gjson.Get(out, "error.message").Exists() || !anthropicShape {
			t.Fatalf("status %d with %q", rec.Code, out)
		}
		return out, false
	}
	return out, true
}

func chatRequestBytes(tools []map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "tools": tools,
		"messages": []map[string]any{{"role": "user", "content": "File a bug and tell the team."}}})
	return b
}

// FuzzItemRelay feeds the Responses relay upstream streams made of event
// templates in any order (items of every kind, deltas for items never
// announced, two terminals, an error, a cut) and holds what the client
// gets to what its SDKs require: either an OpenAI-shaped error status, or
// named events numbered 0, 1, 2, ..., one response id, nothing after the
// one terminal event, and no event of the gateway's search.
func FuzzItemRelay(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 9}, "")    // text
	f.Add([]byte{0, 4, 6, 9}, "")       // reasoning, then a search
	f.Add([]byte{0, 4, 1, 5, 9}, "")    // reasoning, text, a client call
	f.Add([]byte{0, 6, 5, 7, 9}, "")    // a search and a client call
	f.Add([]byte{0, 2, 8, 9, 9}, "")    // a delta of nothing announced, an error, two ends
	f.Add([]byte{0, 1, 2}, "data: {\"") // cut
	var tools []map[string]any
	for _, tool := range testCatalog(30) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "parameters": fn["parameters"]})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "input": "File a bug and tell the team.", "tools": tools})
	fuzzItemStreams(f, "/v1/responses", body, itemOps, checkItemStream)
}

// fuzzItemStreams fuzzes the item relay of the route at path with one
// request body: the upstream's first stream is build(ops, tail), every
// later one a text answer (build's ops 0, 1, 2, 3, 9), and what the
// client gets must pass check, or be an error status (fuzzTurn).
func fuzzItemStreams(f *testing.F, path string, body []byte, build func(ops []byte, tail string) string, check func(out string) error) {
	u, _ := url.Parse("http://upstream.invalid/v1")
	snap := policy.Default()
	sessions, catalogs := session.NewMemory(100, 0), selector.NewCache(2)
	f.Fuzz(func(t *testing.T, ops []byte, tail string) {
		if len(ops) > 64 || len(tail) > 1024 {
			return
		}
		first := build(ops, tail)
		g := &Gateway{Upstream: u, Policy: func() *policy.Snapshot { return snap }, Sessions: sessions, Catalogs: catalogs, Logger: testLogger(),
			Transport: streamsThen(first, build([]byte{0, 1, 2, 3, 9}, ""))}
		out, ok := fuzzTurn(t, g, path, body)
		if !ok {
			return
		}
		if err := check(out); err != nil {
			t.Fatalf("%v\nupstream:\n%s\nclient:\n%s", err, first, out)
		}
	})
}

// itemOps builds a Responses stream from op codes: 0 created, 1 a message
// added, 2 a text delta, 3 the message done, 4 a reasoning item added, 5
// a client call added and done, 6 a search call added and done, 7 a
// client call's arguments, 8 an error event, 9 response.completed with the
// items added so far; op/10 picks the output index for deltas. tail ends
// the stream raw.
func itemOps(ops []byte, tail string) string {
	var b strings.Builder
	var items []string
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, 0
		data, _ := json.Marshal(fields)
		b.WriteString("event: " + typ + "\ndata: " + string(data) + "\n\n")
	}
	add := func(item string) {
		var v map[string]any
		_ = json.Unmarshal([]byte(item), &v)
		ev("response.output_item.added", map[string]any{"output_index": len(items), "item": v})
		ev("response.output_item.done", map[string]any{"output_index": len(items), "item": v})
		items = append(items, item)
	}
	for _, op := range ops {
		at := int(op/10) % 4
		switch op % 10 {
		case 0:
			ev("response.created", map[string]any{"response": map[string]any{"id": "resp_up", "status": "in_progress", "output": []any{}}})
		case 1:
			add(`{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}`)
		case 2:
			ev("response.output_text.delta", map[string]any{"output_index": at, "item_id": "m", "content_index": 0, "delta": "Hi"})
		case 3:
			ev("response.output_text.done", map[string]any{"output_index": at, "item_id": "m", "content_index": 0, "text": "Hi"})
		case 4:
			add(`{"type":"reasoning","id":"rs","summary":[]}`)
		case 5:
			add(`{"type":"function_call","id":"fc","call_id":"c` + strconv.Itoa(len(items)) + `","name":"repo_create_issue","arguments":"{}"}`)
		case 6:
			add(`{"type":"function_call","id":"fs","call_id":"s` + strconv.Itoa(len(items)) + `","name":"tool_search","arguments":"{\"query\":\"send message\"}"}`)
		case 7:
			ev("response.function_call_arguments.delta", map[string]any{"output_index": at, "item_id": "fc", "delta": "{}"})
		case 8:
			ev("error", map[string]any{"code": "server_error", "message": "boom"})
		case 9:
			var out []any
			for _, it := range items {
				var v any
				_ = json.Unmarshal([]byte(it), &v)
				out = append(out, v)
			}
			ev("response.completed", map[string]any{"response": map[string]any{"id": "resp_up", "status": "completed", "output": out,
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}}})
		}
	}
	b.WriteString(tail)
	return b.String()
}

// checkItemStream checks a Responses stream as a client reads it.
func checkItemStream(out string) error {
	id := ""
	return eachNamedEvent(out, func(n int, name, data string) (bool, error) {
		if got := gjson.Get(data, "sequence_number").Int(); got != int64(n) {
			return false, fmt.Errorf("event %d has sequence_number %d", n, got)
		}
		if rid := gjson.Get(data, "response.id").String(); rid != "" {
			if id != "" && rid != id {
				return false, fmt.Errorf("event %d names response %s after %s", n, rid, id)
			}
			id = rid
		}
		if raw, _ := sjson.Delete(data, "response.tools"); strings.Contains(raw, SearchToolName) {
			return false, fmt.Errorf("event %d shows the gateway's search: %s", n, raw)
		}
		return name == "response.completed" || name == "response.incomplete" || name == "error" || name == "response.failed", nil
	})
}

// eachNamedEvent calls check with each event of an item stream, numbered
// from 0, after checking that it is one named data line whose data is
// JSON of the named type and that no event follows the one check said
// ends the stream. A comment (the upstream's keep-alive, passed on, or
// the gateway's own) is no event and may come anywhere.
func eachNamedEvent(out string, check func(n int, name, data string) (end bool, err error)) error {
	ended, n := false, -1
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		if !strings.Contains(block, "\n") && strings.HasPrefix(block, ":") {
			continue
		}
		n++
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			return fmt.Errorf("event %d is not one named data line: %q", n, block)
		}
		if ended {
			return fmt.Errorf("event %d follows the end", n)
		}
		name, data := strings.TrimPrefix(lines[0], "event: "), strings.TrimPrefix(lines[1], "data: ")
		if !gjson.Valid(data) || gjson.Get(data, "type").String() != name {
			return fmt.Errorf("event %d: name %s, data %s", n, name, data)
		}
		var err error
		if ended, err = check(n, name, data); err != nil {
			return err
		}
	}
	return nil
}

// FuzzBlockRelay feeds the Messages relay upstream streams made of event
// templates in any order (blocks of every kind, deltas and stops of
// blocks never started, two message_deltas, an error, a cut) and holds
// what the client gets to what Anthropic's SDKs require: either an error
// status, or named events with one message_start first, blocks started
// at indices 0, 1, 2, ..., events only of started blocks, nothing after
// the message_stop or the error, and no block of the gateway's search.
func FuzzBlockRelay(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 9}, "")    // text
	f.Add([]byte{0, 4, 6, 9}, "")       // thinking, then a search
	f.Add([]byte{0, 4, 1, 5, 9}, "")    // thinking, text, a client call
	f.Add([]byte{0, 6, 5, 7, 9}, "")    // a search and a client call
	f.Add([]byte{0, 2, 8, 9, 9}, "")    // a delta of no block, an error, two ends
	f.Add([]byte{0, 1, 2}, "data: {\"") // cut
	tools, _ := json.Marshal(anthropicTools(30))
	body := []byte(`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"File a bug and tell the team."}],"tools":` + string(tools) + `}`)
	fuzzItemStreams(f, "/v1/messages", body, blockOps, checkBlockStream)
}

// blockOps builds a Messages stream from op codes: 0 message_start, 1 a
// text block started, 2 a text delta, 3 a block stopped, 4 a thinking
// block (started, thought, signed, stopped), 5 a client call (started,
// its input, stopped), 6 a search call (the same), 7 an input delta, 8
// an error event, 9 message_delta and message_stop; op/10 picks the
// block index for deltas and stops. tail ends the stream raw.
func blockOps(ops []byte, tail string) string {
	var b strings.Builder
	n := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		data, _ := json.Marshal(fields)
		b.WriteString("event: " + typ + "\ndata: " + string(data) + "\n\n")
	}
	start := func(block map[string]any) int {
		ev("content_block_start", map[string]any{"index": n, "content_block": block})
		n++
		return n - 1
	}
	for _, op := range ops {
		at := int(op/10) % 4
		switch op % 10 {
		case 0:
			ev("message_start", map[string]any{"message": map[string]any{"id": "msg_up", "type": "message", "role": "assistant", "content": []any{},
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		case 1:
			start(map[string]any{"type": "text", "text": ""})
		case 2:
			ev("content_block_delta", map[string]any{"index": at, "delta": map[string]any{"type": "text_delta", "text": "Hi"}})
		case 3:
			ev("content_block_stop", map[string]any{"index": at})
		case 4:
			i := start(map[string]any{"type": "thinking", "thinking": "", "signature": ""})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": "hmm"}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": "sig"}})
			ev("content_block_stop", map[string]any{"index": i})
		case 5, 6:
			name := map[byte]string{5: "repo_create_issue", 6: "tool_search"}[op%10]
			i := start(map[string]any{"type": "tool_use", "id": "t" + strconv.Itoa(n), "name": name, "input": map[string]any{}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"query":"send message"}`}})
			ev("content_block_stop", map[string]any{"index": i})
		case 7:
			ev("content_block_delta", map[string]any{"index": at, "delta": map[string]any{"type": "input_json_delta", "partial_json": "{}"}})
		case 8:
			ev("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
		case 9:
			ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 2}})
			ev("message_stop", map[string]any{})
		}
	}
	b.WriteString(tail)
	return b.String()
}

// checkBlockStream checks a Messages stream as a client reads it.
func checkBlockStream(out string) error {
	started := int64(0)
	return eachNamedEvent(out, func(n int, name, data string) (bool, error) {
		if (n == 0) != (name == "message_start") && name != "error" {
			return false, fmt.Errorf("event %d is %s: want one message_start, first", n, name)
		}
		switch i := gjson.Get(data, "index").Int(); name {
		case "content_block_start":
			if i != started {
				return false, fmt.Errorf("event %d starts block %d, want %d", n, i, started)
			}
			started++
		case "content_block_delta", "content_block_stop":
			if i >= started {
				return false, fmt.Errorf("event %d is of block %d, which never started", n, i)
			}
		}
		if strings.Contains(data, SearchToolName) {
			return false, fmt.Errorf("event %d shows the gateway's search: %s", n, data)
		}
		return name == "message_stop" || name == "error", nil
	})
}
