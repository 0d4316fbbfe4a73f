package rewrite

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// JSON paths of the Responses API (POST /responses) that the gateway reads
// or writes.
const (
	respInput        = "input"
	respInstructions = "instructions"
	respText         = "text"
	respPrevious     = "previous_response_id"
	respConversation = "conversation"
	respOutput       = "output"
)

// Responses is the OpenAI Responses API dialect: the tools are flat
// ({"type":"function","name",...}; the built-in and custom ones are
// pinned: always sent, never searched), the conversation is an input
// string or a list of items, the gateway's rounds go back as the items
// the model wrote (reasoning included, which reasoning models require
// with their calls) and a function_call_output per answer, and the
// client's response keeps the last round's id, the one a
// previous_response_id chains to. Its streams are item streams
// (responsesstream.go).
type Responses struct{}

var (
	_ Dialect = Responses{}
	_ Named   = Responses{}
)

// ParseRequest implements Dialect.
func (Responses) ParseRequest(body []byte, cache ToolCache) (*Request, error) {
	return parsePinned(body, cache, parseResponses)
}

// parsePinned is the ParseRequest of a dialect whose tools may be other
// than functions: a resent array found in cache first (parse then reads
// the rest of the body), and the tools that are not functions pinned.
func parsePinned(body []byte, cache ToolCache, parse func([]byte, ToolCache) (*Request, error)) (*Request, error) {
	r, ok, err := (*Request)(nil), false, error(nil)
	if cache != nil {
		r, ok, err = parseKnownTools(body, cache, knownToolsMin, func(rest []byte) (*Request, error) { return parse(rest, nil) })
	}
	if !ok {
		r, err = parse(body, cache)
	}
	if err != nil {
		return nil, err
	}
	r.pin()
	return r, nil
}

// pin moves the tools that are not functions from Tools to Pinned.
func (r *Request) pin() {
	for _, t := range r.Tools {
		if t.Kind != "" {
			r.Pinned = append(r.Pinned, t.Raw)
		}
	}
	if len(r.Pinned) > 0 {
		r.Tools = functionsOnly(r.Tools)
	}
}

// parseResponses validates a Responses request body and reads what the
// gateway needs, with the same refusals as the Chat dialect's parse.
func parseResponses(body []byte, cache ToolCache) (*Request, error) {
	root, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &Request{Body: body, ChainsByID: true, form: formFlat}
	var input, model, stream, choice, tools, instructions, cacheKey gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		var dst *gjson.Result
		switch k.Str {
		case respInput:
			dst = &input
		case pathModel:
			dst = &model
		case pathStream:
			dst = &stream
		case pathToolChoice:
			dst = &choice
		case pathTools:
			dst = &tools
		case respInstructions:
			dst = &instructions
		case respText:
			switch v.Get("format.type").String() {
			case "json_object", "json_schema":
				r.JSONOutput = true
			}
		case respPrevious:
			r.Previous = v.String()
		case respMaxOutputTokens:
			r.OutputCap, r.outputFloor = capOf(v), respOutputFloor
		case respConversation:
			r.ServerConversation = v.Type != gjson.Null
		case pathPromptCacheKey:
			dst = &cacheKey
		case "background":
			r.Background = v.Bool()
		case "store":
			// The upstream keeps no response of this request, so no
			// later request can continue from its id, and the rounds
			// go back without the ids of their items.
			r.Unstored = v.Type == gjson.False
			r.ChainsByID = !r.Unstored
		}
		if dst != nil && !dst.Exists() {
			*dst = v
		}
		return true
	})
	r.Model, r.Stream, r.N = model.String(), stream.Bool(), 1
	if cacheKey.Type == gjson.String {
		r.Conversation = cacheKey.Str
	}
	if input.Exists() && input.Type != gjson.String && input.Type != gjson.Null && !input.IsArray() {
		return nil, WithParam(respInput, fmt.Errorf("%w: 'input' must be a string or an array of items", ErrBadRequest))
	}
	if choice.IsObject() {
		r.ToolChoice = responsesChoiceName(choice)
		choice.Get("tools").ForEach(func(_, t gjson.Result) bool {
			if name := responsesChoiceName(t); name != "" {
				r.Allowed = append(r.Allowed, name)
			}
			return true
		})
	}
	if err := r.readTools(tools, cache); err != nil {
		return nil, err
	}

	r.System = instructions.String()
	readItems(r, input)
	return r, nil
}

// responsesChoiceName is the function a Responses tool_choice object, or
// an allowed_tools entry, names: {"type":"function","name":...}, or the
// same for a custom tool. Built-in tools ({"type":"web_search"}) name none.
func responsesChoiceName(c gjson.Result) string {
	switch c.Get("type").String() {
	case "function", "custom":
		return c.Get("name").String()
	}
	return ""
}

// readItems fills the conversation-derived fields from a Responses input:
// a string is one user message; a list holds messages (with or without
// "type":"message"), the model's function calls, their outputs, and items
// the gateway does not read (reasoning, references, built-in tools'
// calls). A step is a run of function calls, reasoning between them
// included.
func readItems(r *Request, input gjson.Result) {
	if input.Type == gjson.String {
		t := input.String()
		r.Messages, r.FirstUser, r.LastUser, r.UserTurn = 1, t, t, true
		r.Recent = appendBounded(r.Recent, t, 4)
		return
	}
	seen := map[string]struct{}{}
	inStep := false
	last := ""
	input.ForEach(func(_, it gjson.Result) bool {
		r.Messages++
		typ := it.Get("type").String()
		role := it.Get("role").String()
		if typ == "" && role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			last = role
			inStep = false
			r.readText(role, it.Get("content"))
		case "function_call":
			last = typ
			if !inStep {
				inStep = true
				r.startStep()
			}
			r.noteCall(it.Get("name").String(), seen)
		case "reasoning":
			// Reasoning leads the calls it decided on: it neither ends a
			// step nor starts one.
		default:
			last = typ
			inStep = false
		}
		return true
	})
	r.UserTurn = last == "user"
}

// Build implements Dialect: the tools array replaced by tools (flat) and
// the request's pinned tools (none removes tools, tool_choice and
// parallel_tool_calls; tool_choice "none" with req.NoCalls), the rounds appended to the input as items, and
// previous_response_id set to PreviousUpstream when that is another id.
func (Responses) Build(req *Request, tools []string, rounds []Round) ([]byte, error) {
	// Tools first: the parse located them in req.Body, and Continue
	// moves them (the pending outputs go before an input that may stand
	// before the tools).
	body, err := setTools(req.Body, req, tools, `"none"`, 0, pathTools, pathToolChoice, "parallel_tool_calls")
	if err != nil {
		return nil, err
	}
	if body, err = Continue(body, req); err != nil {
		return nil, err
	}
	if body, err = setOutputCap(body, req, respMaxOutputTokens); err != nil {
		return nil, err
	}
	if len(rounds) == 0 {
		return body, nil
	}
	var items []byte
	for _, r := range rounds {
		if req.Unstored {
			r.Extra = statelessItems(r.Extra)
		}
		items = appendRoundItems(items, r)
	}
	in := gjson.GetBytes(body, respInput)
	switch {
	case in.IsArray():
		return appendToArray(body, in, items), nil
	case in.Type == gjson.String:
		// A string input is one user message; the rounds need a list.
		list := append(append(append([]byte{'['}, userItem(in.String())...), ','), items...)
		return sjson.SetRawBytes(body, respInput, append(list, ']'))
	default:
		return sjson.SetRawBytes(body, respInput, append(append([]byte{'['}, items...), ']'))
	}
}

// setTools returns body with its tools array replaced by tools and the
// request's pinned tools (in a copy with spare bytes of room to grow, see
// replaceTools), and its tool_choice set to none (the API's "none"
// choice) when req.NoCalls; or, when there are no tools, without the
// members drop names. Every dialect's Build sets its tools through it.
// Only in req.Body itself does it splice where the parse found the tools;
// any other body is searched for them.
func setTools(body []byte, req *Request, tools []string, none string, spare int, drop ...string) ([]byte, error) {
	tools = append(tools[:len(tools):len(tools)], req.Pinned...)
	if len(tools) == 0 {
		var err error
		for _, p := range drop {
			if body, err = sjson.DeleteBytes(body, p); err != nil {
				return nil, fmt.Errorf("removing %s: %w", p, err)
			}
		}
		return body, nil
	}
	at, n := req.span.at, req.span.n
	if !sameBytes(body, req.Body) {
		// The span is where the tools stood in req.Body: in a body edited
		// since, those bytes may be any "[]" of the input, and the splice
		// would cut it instead (replaceTools checks only the brackets).
		at, n = 0, 0
	}
	body = replaceTools(body, at, n, tools, spare)
	if req.NoCalls {
		var err error
		if body, err = sjson.SetRawBytes(body, pathToolChoice, []byte(none)); err != nil {
			return nil, fmt.Errorf("setting tool_choice: %w", err)
		}
	}
	return body, nil
}

// sameBytes reports whether a and b are the same bytes in memory, not
// merely equal ones.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Continue returns a Responses request body that continues where the
// response req names left its turn: previous_response_id set to
// PreviousUpstream when that is another id, and the outputs of the
// gateway's own calls that response ended with (PendingOutputs) put before
// the input, since the upstream refuses to continue from a call without
// its output and the client never saw those calls.
func Continue(body []byte, req *Request) ([]byte, error) {
	var err error
	if req.PreviousUpstream != "" && req.PreviousUpstream != req.Previous {
		if body, err = setPrevious(body, req.PreviousUpstream); err != nil {
			return nil, err
		}
	}
	if len(req.PendingOutputs) == 0 {
		return body, nil
	}
	var outputs []byte
	for i, res := range req.PendingOutputs {
		if i > 0 {
			outputs = append(outputs, ',')
		}
		outputs = appendOutput(outputs, res)
	}
	list := append([]byte{'['}, outputs...)
	switch in := gjson.GetBytes(body, respInput); {
	case in.IsArray():
		if rest := strings.TrimSpace(in.Raw[1 : len(in.Raw)-1]); rest != "" {
			list = append(append(list, ','), rest...)
		}
	case in.Type == gjson.String:
		list = append(append(list, ','), userItem(in.String())...)
	}
	if body, err = sjson.SetRawBytes(body, respInput, append(list, ']')); err != nil {
		return nil, fmt.Errorf("putting the pending outputs before the input: %w", err)
	}
	return body, nil
}

// userItem is a string input as the user message item it stands for, for
// an input that must become a list.
func userItem(text string) []byte {
	return append(appendString([]byte(`{"role":"user","content":`), text), '}')
}

// setPrevious returns a Responses request body continuing from response
// id.
func setPrevious(body []byte, id string) ([]byte, error) {
	out, err := sjson.SetBytes(body, respPrevious, id)
	if err != nil {
		return nil, fmt.Errorf("setting %s: %w", respPrevious, err)
	}
	return out, nil
}

// appendRoundItems appends round r as input items, comma-separated: the
// items the model wrote (its reasoning, text and calls, as it wrote them),
// or its calls alone when they are not at hand, then one
// function_call_output per answer.
func appendRoundItems(b []byte, r Round) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	if r.Extra != "" {
		b = append(b, r.Extra...)
	} else {
		for i, c := range r.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(append(b, `{"type":"function_call","call_id":`...), c.ID)
			b = appendString(append(b, `,"name":`...), c.Name)
			b = appendString(append(b, `,"arguments":`...), c.Arguments)
			b = append(b, '}')
		}
	}
	for _, res := range r.Results {
		b = appendOutput(append(b, ','), res)
	}
	return b
}

// appendOutput appends res as a function_call_output input item.
func appendOutput(b []byte, res ToolResult) []byte {
	b = appendString(append(b, `{"type":"function_call_output","call_id":`...), res.CallID)
	b = appendString(append(b, `,"output":`...), res.Content)
	return append(b, '}')
}

// statelessItems returns a round's output items as a request with store
// false can send them back: the upstream kept none of them, so it refuses
// an item that names one by its id ("Items are not persisted when store
// is set to false"). Each goes without its id; a reasoning item goes
// only with its encrypted_content (include reasoning.encrypted_content),
// which carries it without a lookup, and is left out otherwise.
func statelessItems(extra string) string {
	var b []byte
	gjson.Parse("[" + extra + "]").ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").String() == "reasoning" && it.Get("encrypted_content").String() == "" {
			return true
		}
		raw := []byte(it.Raw)
		if it.Get("id").Exists() {
			if out, err := sjson.DeleteBytes(raw, "id"); err == nil {
				raw = out
			}
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, raw...)
		return true
	})
	return string(b)
}

// OwnTool implements Dialect with FlatTool.
func (Responses) OwnTool(def string) (string, error) { return FlatTool(def) }

// Name implements Named.
func (Responses) Name() string { return "responses" }

// FlatTool returns a tool definition in the Responses API's flat form: a
// Chat Completions definition ({"type":"function","function":{...}}, as
// the gateway writes its own) is flattened with "strict": false, since
// the Responses API makes a function strict unless told otherwise, and a
// strict schema must require every property (tool_search's limit is
// optional). Anything else is returned as it is.
func FlatTool(raw string) (string, error) {
	fn := gjson.Get(raw, "function")
	if !fn.IsObject() {
		return raw, nil
	}
	out := []byte(`{"type":"function"`)
	fn.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "strict" {
			out = append(append(append(append(out, ','), k.Raw...), ':'), v.Raw...)
		}
		return true
	})
	out = append(out, `,"strict":false}`...)
	if !gjson.ValidBytes(out) {
		return "", fmt.Errorf("flattening tool %.60q: not a valid definition", raw)
	}
	return string(out), nil
}
