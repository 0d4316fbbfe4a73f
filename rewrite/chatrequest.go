package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// The Chat Completions dialect's request parser: what the gateway reads of
// a request body. The Request it fills is every dialect's (request.go).

// ParseRequest validates a Chat Completions request body and reads what the
// gateway needs. It rejects invalid JSON, invalid UTF-8, nesting deeper than
// maxDepth, a missing messages array, and a malformed tools array, each with
// an error wrapping ErrBadRequest.
func ParseRequest(body []byte) (*Request, error) { return ParseRequestCached(body, nil) }

// ParseRequestCached is ParseRequest with the tools array looked up in
// cache first (nil: always parsed). A cached array was validated when it
// was first parsed; the body is validated in full either way.
func ParseRequestCached(body []byte, cache ToolCache) (*Request, error) {
	if cache != nil {
		if r, ok, err := parseKnownTools(body, cache, knownToolsMin, ParseRequest); ok {
			return r, err
		}
	}
	root, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &Request{Body: body}
	// One pass over the top-level keys: a Get per path would rescan the
	// body, tools array included, for every key that is absent. The first
	// occurrence of a key wins, as with Get.
	var msgs, model, stream, opts, n, choice, tools, cacheKey, functions, functionCall gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		var dst *gjson.Result
		switch k.Str {
		case pathMessages:
			dst = &msgs
		case pathModel:
			dst = &model
		case pathStream:
			dst = &stream
		case pathStreamOptions:
			dst = &opts
		case pathN:
			dst = &n
		case pathToolChoice:
			dst = &choice
		case pathTools:
			dst = &tools
		case pathFunctions:
			r.HasFunctions = true
			dst = &functions
		case pathFunctionCall:
			dst = &functionCall
		case pathMaxCompletionTokens, pathMaxTokens:
			r.OutputCap = lowerCap(r.OutputCap, v)
		case pathResponseFormat:
			switch v.Get("type").String() {
			case "json_object", "json_schema":
				r.JSONOutput = true
			}
		case pathPromptCacheKey:
			dst = &cacheKey
		}
		// A member's value always exists (even null), so an empty dst
		// means this is the key's first occurrence.
		if dst != nil && !dst.Exists() {
			*dst = v
		}
		return true
	})
	r.Model, r.Stream, r.N = model.String(), stream.Bool(), n.Int()
	if cacheKey.Type == gjson.String {
		r.Conversation = cacheKey.Str
	}
	if !msgs.IsArray() {
		return nil, WithParam(pathMessages, fmt.Errorf("%w: 'messages' must be an array", ErrBadRequest))
	}
	r.IncludeUsage = opts.Get(pathIncludeUsageKey).Bool()
	r.hasStreamOptions = opts.Exists()
	if choice.IsObject() {
		r.ToolChoice = choiceName(choice)
		choice.Get("allowed_tools.tools").ForEach(func(_, t gjson.Result) bool {
			if name := choiceName(t); name != "" {
				r.Allowed = append(r.Allowed, name)
			}
			return true
		})
	}
	if functions.IsArray() {
		functions.ForEach(func(_, f gjson.Result) bool {
			r.Functions = append(r.Functions, f.Get("name").String())
			return true
		})
	}
	if functionCall.IsObject() {
		r.FunctionCall = functionCall.Get("name").String()
	}
	if err := r.readTools(tools, cache); err != nil {
		return nil, err
	}
	readMessages(r, msgs)
	return r, nil
}

// choiceName is the tool a tool_choice object, or an allowed_tools entry,
// names: {"type":"function","function":{"name"}} or the same for custom.
func choiceName(c gjson.Result) string {
	if n := c.Get("function.name"); n.Exists() {
		return n.String()
	}
	return c.Get("custom.name").String()
}

// readMessages fills the conversation-derived fields in one pass.
func readMessages(r *Request, msgs gjson.Result) {
	seen := map[string]struct{}{}
	var last string
	lastCalls := false
	msgs.ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role").String()
		last = role
		lastCalls = false
		r.Messages++
		r.readText(role, m.Get("content"))
		if calls := m.Get("tool_calls"); role == "assistant" && calls.IsArray() {
			// The first call starts the step: calls.Array() to count
			// them first would copy a result per call.
			calls.ForEach(func(_, c gjson.Result) bool {
				if !lastCalls {
					r.startStep()
					lastCalls = true
				}
				r.noteCall(c.Get("function.name").String(), seen)
				return true
			})
		}
		return true
	})
	r.UserTurn = last == "user"
	// An assistant message last, without calls, is words for the model to
	// continue: DeepSeek's and Mistral's prefix completion ("prefix":
	// true), vLLM's continue_final_message.
	r.Prefill = last == "assistant" && !lastCalls
}
