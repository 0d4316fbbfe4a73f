package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// messages answers POST /messages, streamed or not, as Anthropic's
// Messages API does, with the scripted model's decisions. It refuses what
// Anthropic refuses that a gateway translating to this API could get
// wrong: no max_tokens, a custom tool without input_schema, a tool name
// twice, a tool_use not answered by a tool_result in the next message or
// a tool_result answering nothing, tool_use or tool_result blocks in a
// request without tools, and, with Reasoning set, calls sent back without
// the signed thinking block that led to them. A tool_choice of type none
// keeps the model from calling.
func (m *Model) messages(w http.ResponseWriter, r *http.Request) {
	body, req, tools, ok := m.readRequest(w, r, writeAnthropicErr)
	if !ok {
		return
	}
	if !req.Get("max_tokens").Exists() {
		writeAnthropicErr(w, http.StatusBadRequest, "max_tokens: Field required", "")
		return
	}
	rec := recordOf(body, req, tools)
	avail := map[string]bool{}
	seen := map[string]bool{}
	for i, t := range tools {
		n := t.Get("name").String()
		if seen[n] {
			writeAnthropicErr(w, http.StatusBadRequest, fmt.Sprintf("tools.%d: tool names must be unique; %q is used twice", i, n), "")
			return
		}
		seen[n] = true
		// A typed tool other than "custom" (web_search_20250305, ...) is
		// run by the API itself and has no schema; the script only calls
		// the client's tools, so it is left out as the Responses route
		// leaves out non-function tools.
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			continue
		}
		if !t.Get("input_schema").Exists() {
			writeAnthropicErr(w, http.StatusBadRequest, fmt.Sprintf("tools.%d.input_schema: Field required", i), "")
			return
		}
		avail[n] = true
		rec.Names = append(rec.Names, n)
	}
	msgs := req.Get("messages").Array()
	problem := unanswered(msgs)
	if problem == "" && len(tools) == 0 && holdsToolBlocks(msgs) {
		problem = "Requests which include `tool_use` or `tool_result` blocks must define tools."
	}
	if problem == "" && m.Reasoning {
		problem = m.unthought(msgs)
	}
	if problem != "" {
		writeAnthropicErr(w, http.StatusBadRequest, problem, "")
		return
	}
	if m.Keep {
		rec.Body = body
	}
	m.mu.Lock()
	m.records = append(m.records, rec)
	m.mu.Unlock()

	search := SearchTool(rec.Names)
	if callsForbidden(req) {
		avail, search = nil, ""
	}
	rep := m.decide(gjson.Parse(chatMessages(msgs)), avail, search)
	rep.promptTokens = rec.PromptTokens
	stop := "end_turn"
	if rep.call != nil {
		stop = "tool_use"
	}
	msg := map[string]any{"id": m.id("msg_"), "type": "message", "role": "assistant", "model": req.Get("model").String(),
		"content": m.contentBlocks(rep, !m.ThinkOnce || turnStart(msgs)), "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(rep.promptTokens, rep.completionTokens())}
	if rec.Stream {
		m.streamMessage(w, r, msg, rep)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, mustJSON(msg))
}

// writeAnthropicErr refuses in the Messages API's shape, which has no
// code.
func writeAnthropicErr(w http.ResponseWriter, status int, msg, _ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}))
}

func anthropicUsage(in, out int64) map[string]any {
	return map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// contentBlocks renders a reply as Messages API content blocks: thinking
// first when the model reasons, then a narration before a search, then the
// call or the answer.
func (m *Model) contentBlocks(rep reply, think bool) []map[string]any {
	var out []map[string]any
	if m.Reasoning && think {
		thought := "The steps are done; time to answer."
		if rep.call != nil {
			thought = "The next step needs " + rep.call.name + "."
		}
		sig := m.id("sig_")
		m.mu.Lock()
		if m.signed == nil {
			m.signed = map[string]string{}
		}
		m.signed[sig] = thought
		m.mu.Unlock()
		out = append(out, map[string]any{"type": "thinking", "thinking": thought, "signature": sig})
	}
	if rep.call == nil {
		return append(out, map[string]any{"type": "text", "text": rep.content})
	}
	if m.Narrate != "" && rep.call.name == SearchTool([]string{rep.call.name}) {
		out = append(out, map[string]any{"type": "text", "text": m.Narrate})
	}
	// A tool_use input is always an object; a script whose args are not
	// one would otherwise make the whole reply fail to encode.
	input := json.RawMessage(rep.call.args)
	if !gjson.Valid(rep.call.args) || !gjson.Parse(rep.call.args).IsObject() {
		input = json.RawMessage("{}")
	}
	return append(out, map[string]any{"type": "tool_use", "id": m.id("toolu_"), "name": rep.call.name, "input": input})
}

// streamMessage writes a message as the Messages API streams it:
// message_start with no content, a ping, each block started, filled by
// deltas and stopped, then message_delta with the stop reason and
// message_stop.
func (m *Model) streamMessage(w http.ResponseWriter, r *http.Request, msg map[string]any, rep reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(typ string, ev map[string]any) bool {
		ev["type"] = typ
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, mustJSON(ev)); err != nil {
			return false
		}
		return m.paced(r, rc)
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"], start["usage"] = []any{}, nil, anthropicUsage(rep.promptTokens, 1)
	if !send("message_start", map[string]any{"message": start}) || !send("ping", map[string]any{}) {
		return
	}
	for i, b := range msg["content"].([]map[string]any) {
		var first map[string]any
		var deltas []map[string]any
		switch b["type"] {
		case "text":
			first = map[string]any{"type": "text", "text": ""}
			for _, word := range strings.SplitAfter(b["text"].(string), " ") {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": word})
			}
		case "thinking":
			first = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			for _, word := range strings.SplitAfter(b["thinking"].(string), " ") {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": word})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": b["signature"]})
		case "tool_use":
			first = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			// Two pieces at least, so a reader that takes one delta for
			// the whole input is caught.
			args := string(b["input"].(json.RawMessage))
			half := len(args) / 2
			for _, part := range []string{args[:half], args[half:]} {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		}
		if !send("content_block_start", map[string]any{"index": i, "content_block": first}) {
			return
		}
		for _, d := range deltas {
			if !send("content_block_delta", map[string]any{"index": i, "delta": d}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"index": i}) {
			return
		}
	}
	if !send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.completionTokens()}}) {
		return
	}
	send("message_stop", map[string]any{})
	_ = rc.Flush()
}

// contentOf is a message's content blocks; string content has none.
func contentOf(msg gjson.Result) []gjson.Result {
	if c := msg.Get("content"); c.IsArray() {
		return c.Array()
	}
	return nil
}

// blockIDs is the ids a message's blocks of type typ carry under key.
func blockIDs(msg gjson.Result, typ, key string) []string {
	var ids []string
	for _, b := range contentOf(msg) {
		if b.Get("type").String() == typ {
			ids = append(ids, b.Get(key).String())
		}
	}
	return ids
}

// unanswered returns why messages are refused: an assistant message's
// tool_use with no tool_result for it in the user message right after, or
// a tool_result whose tool_use is not in the assistant message right
// before. Names are not checked: a call to a tool the request no longer
// offers is still a valid turn.
func unanswered(msgs []gjson.Result) string {
	for i, msg := range msgs {
		switch msg.Get("role").String() {
		case "assistant":
			var answers []string
			if i+1 < len(msgs) && msgs[i+1].Get("role").String() == "user" {
				answers = blockIDs(msgs[i+1], "tool_result", "tool_use_id")
			}
			var missing []string
			for _, id := range blockIDs(msg, "tool_use", "id") {
				if !slices.Contains(answers, id) {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, strings.Join(missing, ", "))
			}
		case "user":
			var calls []string
			if i > 0 && msgs[i-1].Get("role").String() == "assistant" {
				calls = blockIDs(msgs[i-1], "tool_use", "id")
			}
			for j, b := range contentOf(msg) {
				if id := b.Get("tool_use_id").String(); b.Get("type").String() == "tool_result" && !slices.Contains(calls, id) {
					return fmt.Sprintf("messages.%d.content.%d: tool_result for %s has no tool_use with that id in the previous message", i, j, id)
				}
			}
		}
	}
	return ""
}

// unthought returns why a request that goes on with a tool-use loop is
// refused while the model reasons: the last assistant message, whose
// calls the request answers (with ThinkOnce, the first of the turn since
// the user's own message), must start with a thinking block this model
// signed, its thinking unchanged, as Anthropic requires with thinking on.
func (m *Model) unthought(msgs []gjson.Result) string {
	last := -1
	for i, msg := range msgs {
		switch role := msg.Get("role").String(); {
		case role == "assistant" && (!m.ThinkOnce || last < 0):
			last = i
		case role == "user" && m.ThinkOnce && len(blockIDs(msg, "tool_result", "tool_use_id")) == 0:
			last = -1 // a user's own message starts a new turn
		}
	}
	if last < 0 || len(blockIDs(msgs[last], "tool_use", "id")) == 0 {
		return ""
	}
	head := contentOf(msgs[last])[0]
	if typ := head.Get("type").String(); typ != "thinking" {
		return fmt.Sprintf("messages.%d.content.0.type: expected a thinking block, found %s: with thinking on, an assistant message whose tool_use blocks are answered must start with a thinking block", last, typ)
	}
	m.mu.Lock()
	thought, ok := m.signed[head.Get("signature").String()]
	m.mu.Unlock()
	if !ok || thought != head.Get("thinking").String() {
		return fmt.Sprintf("messages.%d.content.0: invalid signature in thinking block: with thinking on, an assistant message whose tool_use blocks are answered must start with a thinking block the model gave, unchanged", last)
	}
	return ""
}

// turnStart reports whether a request's last message is the user's own,
// not tool results: a reply to it starts the assistant's turn.
func turnStart(msgs []gjson.Result) bool {
	if len(msgs) == 0 {
		return true
	}
	last := msgs[len(msgs)-1]
	return last.Get("role").String() == "user" && len(blockIDs(last, "tool_result", "tool_use_id")) == 0
}

// chatMessages turns Messages API messages into the Chat Completions
// messages decide reads. decide starts a task afresh at each user message,
// so tool_result blocks become tool messages and a user message carrying
// them is the answer to the model's calls, not a new prompt, even with
// text beside them (clients add reminders there).
func chatMessages(msgs []gjson.Result) string {
	var out []any
	for _, msg := range msgs {
		content := msg.Get("content")
		switch msg.Get("role").String() {
		case "user":
			if !content.IsArray() {
				out = append(out, map[string]any{"role": "user", "content": content.String()})
				continue
			}
			var texts []string
			answers := false
			for _, b := range content.Array() {
				switch b.Get("type").String() {
				case "tool_result":
					answers = true
					out = append(out, map[string]any{"role": "tool", "tool_call_id": b.Get("tool_use_id").String(), "content": text(b.Get("content"))})
				case "text":
					texts = append(texts, b.Get("text").String())
				}
			}
			if !answers {
				out = append(out, map[string]any{"role": "user", "content": strings.Join(texts, "\n")})
			}
		case "assistant":
			said := map[string]any{"role": "assistant", "content": nil}
			if !content.IsArray() {
				said["content"] = content.String()
			}
			var texts []string
			var calls []any
			for _, b := range contentOf(msg) {
				switch b.Get("type").String() {
				case "text":
					texts = append(texts, b.Get("text").String())
				case "tool_use":
					args := b.Get("input").Raw
					if args == "" {
						args = "{}"
					}
					calls = append(calls, map[string]any{"id": b.Get("id").String(), "type": "function",
						"function": map[string]any{"name": b.Get("name").String(), "arguments": args}})
				}
			}
			if texts != nil {
				said["content"] = strings.Join(texts, "")
			}
			if calls != nil {
				said["tool_calls"] = calls
			}
			out = append(out, said)
		}
	}
	return mustJSON(map[string]any{"messages": out})
}

// holdsToolBlocks reports whether a message of msgs has a tool_use or
// tool_result block.
func holdsToolBlocks(msgs []gjson.Result) bool {
	for _, msg := range msgs {
		for _, b := range contentOf(msg) {
			if t := b.Get("type").String(); t == "tool_use" || t == "tool_result" {
				return true
			}
		}
	}
	return false
}
