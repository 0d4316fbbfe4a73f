package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAnAnswerAfterALongSilenceIsNotCutByTheWriteDeadline: a reasoning
// model may think in silence for longer than the idle timeout (first_byte
// allows it), then send its answer in one burst of small events. The
// write deadline guards each write to the client; one armed before the
// silence must not be the one the burst's bytes reach the socket under.
func TestAnAnswerAfterALongSilenceIsNotCutByTheWriteDeadline(t *testing.T) {
	const burst, lastWord = 400, "word399"
	for _, api := range []string{"responses", "messages"} {
		name := "a Responses stream's burst after a silence reaches the client whole"
		if api == "messages" {
			name = "a Messages stream's burst after a silence reaches the client whole"
		}
		t.Run(name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				event := func(w io.Writer, name string, fields map[string]any) {
					b, _ := json.Marshal(fields)
					fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
				}
				var sb strings.Builder
				if api == "responses" {
					seq := 0
					emit := func(w io.Writer, typ string, fields map[string]any) {
						fields["type"], fields["sequence_number"] = typ, seq
						seq++
						event(w, typ, fields)
					}
					resp := map[string]any{"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "m", "output": []any{}}
					emit(w, "response.created", map[string]any{"response": resp})
					emit(w, "response.in_progress", map[string]any{"response": resp})
					fl.Flush()
					time.Sleep(1500 * time.Millisecond) // thinking in silence, past idle
					msg := map[string]any{"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []any{}}
					emit(&sb, "response.output_item.added", map[string]any{"output_index": 0, "item": msg})
					emit(&sb, "response.content_part.added", map[string]any{"output_index": 0, "item_id": "msg_1", "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
					text := ""
					for i := 0; i < burst; i++ {
						d := fmt.Sprintf("word%03d ", i)
						text += d
						emit(&sb, "response.output_text.delta", map[string]any{"output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": d})
					}
					emit(&sb, "response.output_text.done", map[string]any{"output_index": 0, "item_id": "msg_1", "content_index": 0, "text": text})
					msg["status"], msg["content"] = "completed", []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}
					emit(&sb, "response.output_item.done", map[string]any{"output_index": 0, "item": msg})
					resp["status"], resp["output"] = "completed", []any{msg}
					resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
					emit(&sb, "response.completed", map[string]any{"response": resp})
				} else {
					event(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
						"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 9, "output_tokens": 1}}})
					fl.Flush()
					time.Sleep(1500 * time.Millisecond)
					event(&sb, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
					for i := 0; i < burst; i++ {
						event(&sb, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": fmt.Sprintf("word%03d ", i)}})
					}
					event(&sb, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
					event(&sb, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
					event(&sb, "message_stop", map[string]any{"type": "message_stop"})
				}
				_, _ = io.WriteString(w, sb.String())
				fl.Flush()
			})
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway:\n  mode: search\n  timeouts: {idle: 500ms, first_byte: 1m}\n")))
			path := map[string]string{"responses": "/responses", "messages": "/messages"}[api]
			req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(string(fruitlessRequest(t, api, true))))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || !strings.Contains(string(b), lastWord) {
				tail := string(b)
				if len(tail) > 300 {
					tail = tail[len(tail)-300:]
				}
				t.Fatalf("stream cut: err=%v tail=%q", err, tail)
			}
		})
	}
}
