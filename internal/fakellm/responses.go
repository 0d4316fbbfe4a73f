package fakellm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// responses answers POST /responses (non-streamed) as OpenAI's Responses
// API does, with the scripted model's decisions: tools are flat, the
// conversation is the input (a string or items) after the items of the
// response previous_response_id names (the model keeps every response it
// gives), and a function tool is strict unless it says "strict": false,
// in which case its schema must require every property, as OpenAI checks.
// With Reasoning set, each reply leads with a reasoning item, and a
// function call sent back without the reasoning item that came with it
// is refused, as OpenAI refuses it for reasoning models.
func (m *Model) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !gjson.ValidBytes(body) {
		writeErr(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_json")
		return
	}
	req := gjson.ParseBytes(body)
	if req.Get("stream").Bool() {
		writeErr(w, http.StatusBadRequest, "the fake model does not stream responses", "unsupported")
		return
	}
	tools := req.Get("tools").Array()
	if max := cmp.Or(m.MaxTools, 128); len(tools) > max {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", max, len(tools)), "array_above_max_length")
		return
	}
	rec := Record{Tools: len(tools), ToolsBytes: len(req.Get("tools").Raw), BodyBytes: len(body)}
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
	if prev := req.Get("previous_response_id").String(); prev != "" {
		m.mu.Lock()
		earlier, ok := m.stored[prev]
		m.mu.Unlock()
		if !ok {
			writeErr(w, http.StatusNotFound, fmt.Sprintf("Previous response with id '%s' not found.", prev), "previous_response_not_found")
			return
		}
		items = append(items, earlier...)
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
	if m.Keep {
		rec.Body = body
	}
	m.mu.Lock()
	m.records = append(m.records, rec)
	m.mu.Unlock()

	rep := m.decide(gjson.Parse(asMessages(items)), avail, SearchTool(rec.Names))
	rep.promptTokens = int64(len(body) / 4)
	out := m.outputItems(rep)
	id := m.id("resp_fake")
	m.mu.Lock()
	if m.stored == nil {
		m.stored = map[string][]gjson.Result{}
	}
	for _, o := range out {
		items = append(items, gjson.Parse(o))
	}
	m.stored[id] = items
	m.mu.Unlock()
	c := rep.completionTokens()
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"id":%q,"object":"response","created_at":%d,"status":"completed","model":"fake-model","output":[%s],"parallel_tool_calls":true,"tool_choice":"auto","tools":%s,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
		id, time.Now().Unix(), strings.Join(out, ","), orEmpty(req.Get("tools").Raw), rep.promptTokens, c, rep.promptTokens+c)
}

// outputItems renders a reply as Responses output items.
func (m *Model) outputItems(rep reply) []string {
	var out []string
	if m.Reasoning {
		out = append(out, mustJSON(map[string]any{"type": "reasoning", "id": m.id("rs_fake"), "summary": []any{}}))
	}
	if rep.call == nil {
		return append(out, mustJSON(map[string]any{"type": "message", "id": m.id("msg_fake"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rep.content, "annotations": []any{}}}}))
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
// came with a reasoning item and is sent back without it.
func (m *Model) missingReasoning(items []gjson.Result) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, it := range items {
		if it.Get("type").String() != "function_call" || !m.reasoned[it.Get("call_id").String()] {
			continue
		}
		if i == 0 || items[i-1].Get("type").String() != "reasoning" {
			return fmt.Sprintf("Item '%s' of type 'function_call' was provided without its required 'reasoning' item.", it.Get("id").String())
		}
	}
	return ""
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
