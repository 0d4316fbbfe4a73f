package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHeldReasoningKeepsTheStreamAlive: a reasoning model streams its
// reasoning (Chat deltas), summary (Responses) or thinking (Messages) for
// a while before what it decided on; the gateway holds those events until
// what the client sees follows them, and meanwhile the client gets a
// comment every HeldKeepAlive, so an idle timeout between does not cut
// the stream. Before, the client got nothing from the first held event to
// the answer.
func TestHeldReasoningKeepsTheStreamAlive(t *testing.T) {
	const (
		deltas = 8
		pause  = 60 * time.Millisecond
		said   = "Nothing does that."
	)
	event := func(w io.Writer, name string, fields map[string]any) {
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	// Each upstream writes its held events through think, then waits
	// for the client to have a keep-alive before it answers.
	responses := func(w io.Writer, think func(func())) {
		seq := 0
		emit := func(typ string, fields map[string]any) {
			fields["type"], fields["sequence_number"] = typ, seq
			seq++
			event(w, typ, fields)
		}
		resp := map[string]any{"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "m", "output": []any{}}
		emit("response.created", map[string]any{"response": resp})
		reasoning := map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}}
		emit("response.output_item.added", map[string]any{"output_index": 0, "item": reasoning})
		think(func() {
			emit("response.reasoning_summary_text.delta", map[string]any{"output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "thinking "})
		})
		emit("response.output_item.done", map[string]any{"output_index": 0, "item": reasoning})
		msg := map[string]any{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "annotations": []any{}, "text": said}}}
		emit("response.output_item.added", map[string]any{"output_index": 1, "item": msg})
		emit("response.output_item.done", map[string]any{"output_index": 1, "item": msg})
		resp["status"], resp["output"] = "completed", []any{reasoning, msg}
		resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
		emit("response.completed", map[string]any{"response": resp})
	}
	messages := func(w io.Writer, think func(func())) {
		event(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 9, "output_tokens": 1}}})
		event(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		think(func() {
			event(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": "thinking "}})
		})
		event(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "signature_delta", "signature": "s"}})
		event(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		event(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "text", "text": ""}})
		event(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "text_delta", "text": said}})
		event(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
		event(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
		event(w, "message_stop", map[string]any{"type": "message_stop"})
	}
	chat := func(w io.Writer, think func(func())) {
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		think(func() { chunk(`{"reasoning_content":"thinking "}`, "null") })
		chunk(`{"content":"`+said+`"}`, "null")
		chunk(`{}`, `"stop"`)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
	// chatJSON is an answer that must be JSON: its text is held until the
	// round ends, as reasoning is.
	chatJSON := func(w io.Writer, think func(func())) {
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		think(func() { chunk(`{"content":"thinking "}`, "null") })
		chunk(`{"content":"`+said+`"}`, "null")
		chunk(`{}`, `"stop"`)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
	paths := map[string]string{"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
	for _, tc := range []struct {
		name, api string
		write     func(io.Writer, func(func()))
		jsonOut   bool
	}{
		{"a Chat client gets keep-alives while the reasoning deltas are held", "chat", chat, false},
		{"a Chat client that asks for JSON gets keep-alives while the answer's text is held", "chat", chatJSON, true},
		{"a Responses client gets keep-alives while the reasoning summary is held", "responses", responses, false},
		{"a Messages client gets keep-alives while the thinking is held", "messages", messages, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alive := make(chan struct{}) // the client has a keep-alive
			var waited atomic.Bool
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				tc.write(w, func(delta func()) {
					for i := 0; i < deltas; i++ {
						delta()
						fl.Flush()
						time.Sleep(pause)
					}
					delta() // one more after the pauses: the keep-alive goes out as a held event comes
					fl.Flush()
					select {
					case <-alive:
					case <-time.After(2 * time.Second):
						waited.Store(true)
					}
				})
				fl.Flush()
			})
			base := newTestGateway(t, up, searchOnly(t), func(g *Gateway) { g.HeldKeepAlive = 150 * time.Millisecond })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reqBody := fruitlessRequest(t, tc.api, true)
			if tc.jsonOut {
				reqBody = chatRequest(t, []map[string]any{{"role": "user", "content": fruitlessTask.Prompt}}, testCatalog(40), true, map[string]any{"response_format": map[string]any{"type": "json_object"}})
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+paths[tc.api], strings.NewReader(string(reqBody)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var lines []string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			once := false
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, ":") && !once {
					once = true
					close(alive)
				}
				lines = append(lines, line)
			}
			if !once {
				close(alive)
			}
			body := strings.Join(lines, "\n")
			if waited.Load() || !once {
				t.Fatalf("the client got no keep-alive while the reasoning was held; it got:\n%s", body)
			}
			keep := strings.Index(body, ": keep-alive")
			answer := strings.Index(body, said)
			if keep < 0 || answer < 0 || keep > answer {
				t.Fatalf("want a keep-alive comment before the answer %q; got:\n%s", said, body)
			}
			if !strings.Contains(body, "thinking ") {
				t.Errorf("the held reasoning did not reach the client with the answer:\n%s", body)
			}
		})
	}
}
