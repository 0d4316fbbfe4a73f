package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type call struct{ name, args string }

type reply struct {
	content      string
	call         *call
	promptTokens int64
}

func (r reply) completionTokens() int64 { return int64(len(r.content)/4 + 5) }

func (r reply) usage() map[string]any {
	c := r.completionTokens()
	return map[string]any{"prompt_tokens": r.promptTokens, "completion_tokens": c, "total_tokens": r.promptTokens + c,
		"prompt_tokens_details": map[string]any{"cached_tokens": 0}}
}

func (r reply) json(m *Model) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	if r.content != "" {
		msg["content"] = r.content
	}
	if r.call != nil {
		finish = "tool_calls"
		msg["tool_calls"] = []any{map[string]any{"id": m.id("call_fake"), "type": "function",
			"function": map[string]any{"name": r.call.name, "arguments": r.call.args}}}
	}
	b, _ := json.Marshal(map[string]any{
		"id": m.id("chatcmpl-fake"), "object": "chat.completion", "created": time.Now().Unix(),
		"model": "fake-model", "choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage": r.usage(),
	})
	return b
}

// id returns a fresh id: ids only need to differ between replies.
func (m *Model) id(prefix string) string { return fmt.Sprintf("%s%d", prefix, m.seq.Add(1)) }

// paced sends a streamed chunk on its way, unless Whole holds the stream
// back for one write, and waits ChunkDelay; false when the client left.
func (m *Model) paced(r *http.Request, rc *http.ResponseController) bool {
	if m.Whole {
		return true
	}
	_ = rc.Flush()
	if m.ChunkDelay > 0 {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(m.ChunkDelay):
		}
	}
	return true
}

// stream writes the reply as OpenAI does: a role chunk, content, tool-call
// fragments, a finish chunk, a usage chunk when asked, and [DONE].
func (m *Model) stream(w http.ResponseWriter, r *http.Request, rep reply, usage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req_fake")
	w.WriteHeader(http.StatusOK)
	id := m.id("chatcmpl-fake")
	created := time.Now().Unix()
	rc := http.NewResponseController(w)
	send := func(choices []any, extra map[string]any) bool {
		ch := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": "fake-model", "choices": choices}
		for k, v := range extra {
			ch[k] = v
		}
		b, _ := json.Marshal(ch)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return m.paced(r, rc)
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	if !send(delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil) {
		return
	}
	for _, word := range strings.SplitAfter(rep.content, " ") {
		if word != "" && !send(delta(map[string]any{"content": word}, nil), nil) {
			return
		}
	}
	finish := "stop"
	if rep.call != nil {
		finish = "tool_calls"
		first := map[string]any{"index": 0, "id": m.id("call_fake"), "type": "function", "function": map[string]any{"name": rep.call.name, "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []any{first}}, nil), nil) {
			return
		}
		half := len(rep.call.args) / 2
		for _, part := range []string{rep.call.args[:half], rep.call.args[half:]} {
			if !send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil), nil) {
				return
			}
		}
	}
	if !send(delta(map[string]any{}, finish), nil) {
		return
	}
	if usage {
		if !send([]any{}, map[string]any{"usage": rep.usage()}) {
			return
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}
