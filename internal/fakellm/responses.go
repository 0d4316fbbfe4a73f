package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// responses answers POST /responses, streamed or not, as OpenAI's
// Responses API does, with the scripted model's decisions: tools are flat, the
// conversation is the input (a string or items) after the items of the
// response previous_response_id names (the model keeps every response
// but those of store-false requests, whose item ids it then refuses), and a function tool is strict unless it says "strict": false,
// in which case its schema must require every property, as OpenAI checks.
// With Reasoning set, each reply leads with a reasoning item, and a
// function call sent back without the reasoning item that came with it
// is refused, as OpenAI refuses it for reasoning models.
func (m *Model) responses(w http.ResponseWriter, r *http.Request) {
	body, req, tools, ok := m.readRequest(w, r, writeErr)
	if !ok {
		return
	}
	rec := recordOf(body, req, tools)
	avail := map[string]bool{}
	for _, t := range tools {
		if t.Get("type").String() != "function" {
			continue
		}
		n := t.Get("name").String()
		if msg := strictProblem(t); msg != "" {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("Invalid schema for function '%s': %s", n, msg), "invalid_function_parameters")
			return
		}
		avail[n] = true
		rec.Names = append(rec.Names, n)
	}
	var items []gjson.Result
	earlierBytes := 0 // the context a chained request continues, which its input tokens count too
	if prev := req.Get("previous_response_id").String(); prev != "" {
		m.mu.Lock()
		earlier, ok := m.mine(r, prev)
		m.mu.Unlock()
		if !ok {
			writeErr(w, http.StatusNotFound, fmt.Sprintf("Previous response with id '%s' not found.", prev), "previous_response_not_found")
			return
		}
		items = append(items, earlier...)
		for _, e := range earlier {
			earlierBytes += len(e.Raw)
		}
	}
	switch in := req.Get("input"); {
	case in.Type == gjson.String:
		items = append(items, gjson.Parse(mustJSON(map[string]any{"role": "user", "content": in.String()})))
	default:
		items = append(items, in.Array()...)
	}
	if msg := m.missingReasoning(items); msg != "" {
		writeErr(w, http.StatusBadRequest, msg, "invalid_request_error")
		return
	}
	if msg := m.unpersisted(items); msg != "" {
		writeErr(w, http.StatusNotFound, msg, "invalid_request_error")
		return
	}
	if msg := unpairedCall(items); msg != "" {
		writeErr(w, http.StatusBadRequest, msg, "invalid_request_error")
		return
	}
	rec.PromptTokens = int64((len(body) + earlierBytes) / 4)
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
	rep := m.decide(gjson.Parse(asMessages(items)), avail, search)
	rep.promptTokens = rec.PromptTokens
	out := m.outputItems(rep, encryptedReasoning(req))
	id := m.id("resp_fake")
	m.mu.Lock()
	if m.stored == nil {
		m.stored, m.ephemeral = map[string][]gjson.Result{}, map[string]bool{}
	}
	for _, o := range out {
		items = append(items, gjson.Parse(o))
	}
	if req.Get("store").Type == gjson.False {
		// Nothing is kept: the output's item ids lead nowhere later.
		for _, o := range out {
			m.ephemeral[gjson.Get(o, "id").String()] = true
		}
	} else {
		if m.owners == nil {
			m.owners = map[string]string{}
		}
		m.stored[id], m.owners[id] = items, m.owner(r)
	}
	m.mu.Unlock()
	c := rep.completionTokens()
	// As the API does, the answer repeats the request's instructions and
	// tools.
	instructions := req.Get("instructions").Raw
	if instructions == "" {
		instructions = "null"
	}
	whole := fmt.Sprintf(`{"id":%q,"object":"response","created_at":%d,"status":"completed","model":"fake-model","instructions":%s,"output":[%s],"parallel_tool_calls":true,"tool_choice":"auto","tools":%s,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
		id, time.Now().Unix(), instructions, strings.Join(out, ","), orEmpty(req.Get("tools").Raw), rep.promptTokens, c, rep.promptTokens+c)
	if req.Get("store").Type != gjson.False {
		m.mu.Lock()
		if m.wholes == nil {
			m.wholes = map[string]string{}
		}
		m.wholes[id] = whole
		m.mu.Unlock()
	}
	if req.Get("stream").Bool() {
		m.streamResponse(w, whole)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, whole)
}

// deleteResponse answers DELETE /responses/{id} as the Responses API
// does: the response is forgotten, or a 404 when there is none of the
// caller's.
func (m *Model) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	m.mu.Lock()
	_, ok := m.mine(r, id)
	if ok {
		delete(m.stored, id)
		delete(m.wholes, id)
		delete(m.owners, id)
	}
	m.mu.Unlock()
	if !ok {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("Response with id '%s' not found.", id), "not_found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, mustJSON(map[string]any{"id": id, "object": "response", "deleted": true}))
}

// getResponse answers GET /responses/{id} as the Responses API does:
// the stored response, or a 404 when there is none of the caller's.
func (m *Model) getResponse(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	m.mu.Lock()
	whole := m.wholes[id]
	_, ok := m.mine(r, id)
	m.mu.Unlock()
	if !ok {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("Response with id '%s' not found.", id), "not_found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, whole)
}

// streamResponse writes a response as the Responses API streams it:
// created and in_progress with no output, each item added, its content or
// arguments in deltas, each item done, and response.completed with the
// whole response, every event named and numbered.
func (m *Model) streamResponse(w http.ResponseWriter, whole string) {
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, mustJSON(fields))
		if !m.Whole {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			time.Sleep(m.ChunkDelay)
		}
	}
	var start map[string]any
	_ = json.Unmarshal([]byte(whole), &start)
	start["status"], start["output"], start["usage"] = "in_progress", []any{}, nil
	emit("response.created", map[string]any{"response": start})
	emit("response.in_progress", map[string]any{"response": start})
	gjson.Get(whole, "output").ForEach(func(k, it gjson.Result) bool {
		i, id := k.Int(), it.Get("id").String()
		var item map[string]any
		_ = json.Unmarshal([]byte(it.Raw), &item)
		added := map[string]any{}
		for key, v := range item {
			added[key] = v
		}
		switch it.Get("type").String() {
		case "message":
			added["content"], added["status"] = []any{}, "in_progress"
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			text := it.Get("content.0.text").String()
			emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, word := range strings.SplitAfter(text, " ") {
				emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": word, "logprobs": []any{}})
			}
			emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
			emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			added["arguments"], added["status"] = "", "in_progress"
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			args := it.Get("arguments").String()
			emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": args})
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args})
		default:
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
		return true
	})
	var done map[string]any
	_ = json.Unmarshal([]byte(whole), &done)
	emit("response.completed", map[string]any{"response": done})
}

// outputItems renders a reply as Responses output items.
func (m *Model) outputItems(rep reply, encrypted bool) []string {
	out := m.items(rep, encrypted)
	if m.Reasoning {
		m.mu.Lock()
		if m.follows == nil {
			m.follows = map[string]string{}
		}
		m.follows[gjson.Get(out[0], "id").String()] = gjson.Get(out[1], "type").String()
		m.mu.Unlock()
	}
	return out
}

func (m *Model) items(rep reply, encrypted bool) []string {
	var out []string
	if m.Reasoning {
		rs := map[string]any{"type": "reasoning", "id": m.id("rs_fake"), "summary": []any{}}
		if encrypted {
			rs["encrypted_content"] = "enc_" + rs["id"].(string)
		}
		out = append(out, mustJSON(rs))
	}
	if rep.call == nil {
		return append(out, mustJSON(map[string]any{"type": "message", "id": m.id("msg_fake"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rep.content, "annotations": []any{}}}}))
	}
	if m.Narrate != "" && rep.call.name == SearchTool([]string{rep.call.name}) {
		out = append(out, mustJSON(map[string]any{"type": "message", "id": m.id("msg_fake"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": m.Narrate, "annotations": []any{}}}}))
	}
	callID := m.id("call_fake")
	if m.Reasoning {
		m.mu.Lock()
		if m.reasoned == nil {
			m.reasoned = map[string]bool{}
		}
		m.reasoned[callID] = true
		m.mu.Unlock()
	}
	return append(out, mustJSON(map[string]any{"type": "function_call", "id": m.id("fc_fake"), "call_id": callID,
		"name": rep.call.name, "arguments": rep.call.args, "status": "completed"}))
}

// missingReasoning returns why items are refused: a function call that
// came with a reasoning item and is sent back by its item id without one
// before it in its turn, or a reasoning item sent back without the item that followed
// it, as OpenAI refuses both for reasoning models.
func (m *Model) missingReasoning(items []gjson.Result) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, it := range items {
		if next, ok := m.follows[it.Get("id").String()]; ok && it.Get("type").String() == "reasoning" &&
			(i+1 == len(items) || itemType(items[i+1]) != next) {
			return fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.Get("id").String())
		}
		// A call sent back without its item id is not tied to the
		// reasoning that came with it (a stateless replay, store false).
		if it.Get("type").String() != "function_call" || !m.reasoned[it.Get("call_id").String()] || it.Get("id").String() == "" {
			continue
		}
		if !reasonedBefore(items[:i]) {
			return fmt.Sprintf("Item '%s' of type 'function_call' was provided without its required 'reasoning' item.", it.Get("id").String())
		}
	}
	return ""
}

// unpairedCall returns why the Responses API refuses a conversation with
// a function call and no output for it, or an output of no call: as
// OpenAI does, whether the call came in the input or in the response
// previous_response_id names. A client that continues from a response
// ending in calls must send each call's output.
func unpairedCall(items []gjson.Result) string {
	calls, outputs := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		switch it.Get("type").String() {
		case "function_call":
			calls[it.Get("call_id").String()] = true
		case "function_call_output":
			outputs[it.Get("call_id").String()] = true
		}
	}
	for _, it := range items {
		switch id := it.Get("call_id").String(); it.Get("type").String() {
		case "function_call":
			if !outputs[id] {
				return fmt.Sprintf("No tool output found for function call %s.", id)
			}
		case "function_call_output":
			if !calls[id] {
				return fmt.Sprintf("No tool call found for function call output with call_id %s.", id)
			}
		}
	}
	return ""
}

// encryptedReasoning reports whether a request asks for its reasoning
// items' encrypted_content (include reasoning.encrypted_content).
func encryptedReasoning(req gjson.Result) bool {
	found := false
	req.Get("include").ForEach(func(_, v gjson.Result) bool {
		found = v.String() == "reasoning.encrypted_content"
		return !found
	})
	return found
}

// unpersisted returns why OpenAI refuses items that name by id an item of
// a response it did not keep (store false): it cannot look them up. A
// reasoning item that carries its encrypted_content needs no lookup.
func (m *Model) unpersisted(items []gjson.Result) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		id := it.Get("id").String()
		if !m.ephemeral[id] || it.Get("type").String() == "reasoning" && it.Get("encrypted_content").String() != "" {
			continue
		}
		return fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", id)
	}
	return ""
}

// itemType is an input item's type; a message may leave it out.
func itemType(it gjson.Result) string {
	if t := it.Get("type").String(); t != "" || !it.Get("role").Exists() {
		return t
	}
	return "message"
}

// reasonedBefore reports whether the model's turn that ends items (the
// items since the last user message or call output) has a reasoning item.
func reasonedBefore(items []gjson.Result) bool {
	for i := len(items) - 1; i >= 0; i-- {
		switch typ := items[i].Get("type").String(); {
		case typ == "reasoning":
			return true
		case typ == "function_call_output", items[i].Get("role").String() == "user":
			return false
		}
	}
	return false
}

// strictProblem returns why a strict function tool's schema is refused:
// strict unless "strict": false, and then every property required and no
// others allowed.
func strictProblem(t gjson.Result) string {
	if s := t.Get("strict"); s.Exists() && !s.Bool() {
		return ""
	}
	params := t.Get("parameters")
	if params.Get("additionalProperties").Type != gjson.False {
		return "In context=(), 'additionalProperties' is required to be supplied and to be false."
	}
	required := map[string]bool{}
	params.Get("required").ForEach(func(_, v gjson.Result) bool {
		required[v.String()] = true
		return true
	})
	missing := ""
	params.Get("properties").ForEach(func(k, _ gjson.Result) bool {
		if !required[k.String()] {
			missing = k.String()
			return false
		}
		return true
	})
	if missing != "" {
		return fmt.Sprintf("In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", missing)
	}
	return ""
}

// asMessages turns Responses items into the Chat Completions messages
// decide reads: user messages and the model's calls.
func asMessages(items []gjson.Result) string {
	var msgs []any
	for _, it := range items {
		typ, role := it.Get("type").String(), it.Get("role").String()
		switch {
		case (typ == "" || typ == "message") && role == "user":
			msgs = append(msgs, map[string]any{"role": "user", "content": text(it.Get("content"))})
		case typ == "function_call":
			msgs = append(msgs, map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"function": map[string]any{"name": it.Get("name").String()}}}})
		}
	}
	return mustJSON(map[string]any{"messages": msgs})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v) // maps of strings and slices always encode
	return string(b)
}

func orEmpty(raw string) string {
	if raw == "" {
		return "[]"
	}
	return raw
}
