package rewrite

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Build implements Dialect: the upstream body for req, its tools array
// replaced by tools (raw JSON objects, in order; none removes tools and
// tool_choice; tool_choice "none" with req.NoCalls), the gateway's own
// rounds appended to messages, and, for streams, usage requested so every
// round can be counted (unless NoUsageRequest); the rounds' message extras
// go too, unless NoMessageExtras. Everything else passes through byte for
// byte.
func (Chat) Build(req *Request, tools []string, rounds []Round) ([]byte, error) {
	body := req.Body
	var err error
	// A stream without stream_options gets the member appended to the
	// body this call copies anyway, instead of a copy of its own.
	addUsage := req.Stream && !req.IncludeUsage && !req.NoUsageRequest
	appendUsage := addUsage && !req.hasStreamOptions
	owned := false // body is this call's copy, free to append to
	// Tools first: the parse located them in req.Body, so the splice needs
	// no second scan; the rounds then go into a body a fraction the size.
	spare := 0
	if appendUsage && len(rounds) == 0 {
		spare = len(includeUsageMember) + 1
	}
	if body, err = setTools(body, req, tools, `"none"`, spare, pathTools, pathToolChoice, "parallel_tool_calls"); err != nil {
		return nil, err
	}
	owned = len(tools)+len(req.Pinned) > 0 // replaceTools made a copy
	if len(rounds) > 0 {
		if body, err = appendRounds(body, rounds, req.NoMessageExtras); err != nil {
			return nil, err
		}
		owned = true
	}
	if body, err = setOutputCap(body, req, pathMaxCompletionTokens, pathMaxTokens); err != nil {
		return nil, err
	}
	if appendUsage {
		if out, ok := appendMember(body, includeUsageMember, owned); ok {
			return out, nil
		}
	}
	if addUsage {
		if body, err = sjson.SetBytes(body, pathIncludeUsage, true); err != nil {
			return nil, fmt.Errorf("requesting stream usage: %w", err)
		}
	}
	return body, nil
}

// includeUsageMember asks a stream for its usage chunk.
const includeUsageMember = `"stream_options":{"include_usage":true}`

// appendMember adds member (a "key":value pair the object does not have)
// at the end of the JSON object body, byte for byte as sjson sets a new
// key: whitespace before the closing brace is kept, whitespace after it is
// dropped. It writes into body's spare capacity only if owned. ok is false
// when body does not end with an object's closing brace.
func appendMember(body []byte, member string, owned bool) (out []byte, ok bool) {
	end := len(body)
	for end > 0 && isSpace(body[end-1]) {
		end--
	}
	if end < 2 || body[end-1] != '}' {
		return nil, false
	}
	closing := end - 1
	last := closing // just past the last non-space byte before the brace
	for last > 0 && isSpace(body[last-1]) {
		last--
	}
	if last == 0 {
		return nil, false
	}
	empty := body[last-1] == '{'
	need := closing + len(member) + 2
	if owned && cap(body) >= need {
		out = body[:closing]
	} else {
		out = make([]byte, closing, need)
		copy(out, body)
	}
	if !empty {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, '}'), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// replaceTools splices a new tools array where the old one stands, so the
// rest of the body is copied once and never re-encoded. [at, at+n) is where
// the parse found the array in body; when it is unknown the body is
// searched.
func replaceTools(body []byte, at, n int, tools []string, spare int) []byte {
	if end := at + n; at <= 0 || n < 2 || end > len(body) || body[at] != '[' || body[end-1] != ']' {
		old := gjson.Get(view(body), pathTools)
		if !old.Exists() || old.Index <= 0 {
			out, err := sjson.SetRawBytes(body, pathTools, joinArray(tools))
			if err != nil {
				return body
			}
			return out
		}
		at, n = old.Index, len(old.Raw)
	}
	size := len(body) - n + 2 + spare
	for _, t := range tools {
		size += len(t) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, body[:at]...)
	out = appendArray(out, tools)
	return append(out, body[at+n:]...)
}

// appendRounds adds each round as an assistant message with its tool calls,
// followed by one tool message per result.
func appendRounds(body []byte, rounds []Round, noExtras bool) ([]byte, error) {
	msgs := gjson.Get(view(body), pathMessages)
	if !msgs.IsArray() || msgs.Index <= 0 {
		return nil, fmt.Errorf("appending rounds: %w: no messages array", ErrBadRequest)
	}
	var extra []byte
	for _, r := range rounds {
		if noExtras {
			r.Extra = ""
		}
		extra = appendAssistant(append(extra, ','), r)
		for _, res := range r.Results {
			b, err := json.Marshal(toolMessage{Role: "tool", ToolCallID: res.CallID, Content: res.Content})
			if err != nil {
				return nil, fmt.Errorf("encoding tool message: %w", err)
			}
			extra = append(append(extra, ','), b...)
		}
	}
	if len(extra) == 0 {
		return body, nil
	}
	return appendToArray(body, msgs, extra[1:]), nil
}

// appendToArray returns body with items (comma-separated JSON values)
// added at the end of arr, an array that stands in body.
func appendToArray(body []byte, arr gjson.Result, items []byte) []byte {
	end := arr.Index + len(arr.Raw) - 1 // the closing ']'
	out := make([]byte, 0, len(body)+len(items)+1)
	out = append(out, body[:end]...)
	if len(arr.Array()) > 0 {
		out = append(out, ',')
	}
	out = append(out, items...)
	return append(out, body[end:]...)
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// appendAssistant appends round r's assistant message: its text, its other
// members, and its calls with theirs.
func appendAssistant(b []byte, r Round) []byte {
	b = append(b, `{"role":"assistant","content":`...)
	switch {
	case r.ContentParts != "":
		b = append(b, r.ContentParts...)
	case r.Content != "":
		b = appendString(b, r.Content)
	default:
		b = append(b, "null"...)
	}
	if r.Extra != "" {
		b = append(append(b, ','), r.Extra...)
	}
	if len(r.Calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range r.Calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(append(b, `{"id":`...), c.ID)
			b = appendString(append(b, `,"type":"function","function":{"name":`...), c.Name)
			b = appendString(append(b, `,"arguments":`...), c.Arguments)
			b = append(b, '}')
			if c.Extra != "" {
				b = append(append(b, ','), c.Extra...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// otherMembers returns obj's members other than those known reports and
// other than nulls, as JSON members without braces.
func otherMembers(obj gjson.Result, known func(key string) bool) string {
	var b []byte
	obj.ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.Null && !known(k.Str) {
			if b != nil {
				b = append(b, ',')
			}
			b = append(append(append(b, k.Raw...), ':'), v.Raw...)
		}
		return true
	})
	return string(b)
}

// messageKey reports the assistant message members the gateway reads
// itself; callKey the same for a tool call.
func messageKey(k string) bool { return k == "role" || k == "content" || k == "tool_calls" }
func callKey(k string) bool    { return k == "id" || k == "type" || k == "function" || k == "index" }

// ParseResponse reads a non-streamed Chat Completions response. Only the
// first choice is read: the gateway passes n > 1 through untouched.
func ParseResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, badResponse("upstream response is not valid JSON")
	}
	root := gjson.Parse(view(body))
	if !root.IsObject() || !root.Get("choices").IsArray() {
		return nil, badResponse("upstream response has no choices array")
	}
	msg := root.Get("choices.0.message")
	r := &Response{
		Body:         body,
		ID:           root.Get("id").String(),
		Created:      root.Get("created").Int(),
		Extra:        otherMembers(msg, messageKey),
		FinishReason: root.Get("choices.0.finish_reason").String(),
		Usage:        root.Get("usage"),
	}
	r.Content, r.ContentParts = contentOf(msg.Get("content"))
	if lp := root.Get("choices.0.logprobs.content"); lp.IsArray() {
		r.Logprobs = lp.Raw
	}
	if an := msg.Get("annotations"); an.IsArray() {
		r.Annotations = an.Raw
	}
	if pf := root.Get("prompt_filter_results"); pf.Exists() {
		r.PromptFilter = pf.Raw
	}
	// As in a stream's delta (ParseEvent): a null tool_calls, which
	// SGLang writes in every message without calls, is no call.
	if calls := msg.Get("tool_calls"); calls.IsArray() {
		calls.ForEach(func(_, c gjson.Result) bool {
			r.Calls = append(r.Calls, Call{
				ID:        c.Get("id").String(),
				Name:      c.Get("function.name").String(),
				Arguments: c.Get("function.arguments").String(),
				Extra:     otherMembers(c, callKey),
			})
			return true
		})
	}
	return r, nil
}

// ClientResponse implements Dialect: the body the client gets for the
// final round r of a turn, calls Keep rejects removed (a message left
// without calls ends with "stop", or "length" when turn.Capped), and the
// turn's usage, id and earlier text set.
func (Chat) ClientResponse(r *Response, turn Turn) ([]byte, error) {
	body := append([]byte(nil), r.Body...)
	var err error
	kept := make([]int, 0, len(r.Calls))
	for i, c := range r.Calls {
		if turn.Keep(c) {
			kept = append(kept, i)
		}
	}
	if len(kept) != len(r.Calls) {
		const calls = "choices.0.message.tool_calls"
		if len(kept) == 0 {
			if body, err = sjson.DeleteBytes(body, calls); err != nil {
				return nil, fmt.Errorf("removing tool calls: %w", err)
			}
			if r.FinishReason == "tool_calls" {
				if body, err = sjson.SetBytes(body, "choices.0.finish_reason", "stop"); err != nil {
					return nil, fmt.Errorf("setting the finish reason: %w", err)
				}
			}
		} else {
			all := gjson.GetBytes(r.Body, calls).Array()
			arr := []byte{'['}
			for j, i := range kept {
				if j > 0 {
					arr = append(arr, ',')
				}
				raw := all[i].Raw
				if j == 0 && i > 0 { // the client's first call was not the message's
					raw = FirstCallMembers(raw, r.Calls[i].Extra, r.Calls[0].Extra)
				}
				arr = append(arr, raw...)
			}
			arr = append(arr, ']')
			if body, err = sjson.SetRawBytes(body, calls, arr); err != nil {
				return nil, fmt.Errorf("rewriting tool calls: %w", err)
			}
		}
	}
	if turn.Capped {
		if body, err = sjson.SetBytes(body, "choices.0.finish_reason", "length"); err != nil {
			return nil, fmt.Errorf("setting the finish reason: %w", err)
		}
	}
	if turn.PromptFilter != "" && turn.PromptFilter != r.PromptFilter {
		if body, err = sjson.SetRawBytes(body, "prompt_filter_results", []byte(turn.PromptFilter)); err != nil {
			return nil, fmt.Errorf("setting the prompt's filter results: %w", err)
		}
	}
	if turn.Text != "" {
		if r.ContentParts != "" {
			// Parts stay parts: the earlier text leads them as a part of
			// its own.
			parts := joinArrays([]string{"[" + TextPart(turn.Text) + "]", r.ContentParts})
			if body, err = sjson.SetRawBytes(body, "choices.0.message.content", parts); err != nil {
				return nil, fmt.Errorf("setting the turn's text: %w", err)
			}
		} else if body, err = sjson.SetBytes(body, "choices.0.message.content", turn.Text+r.Content); err != nil {
			return nil, fmt.Errorf("setting the turn's text: %w", err)
		}
		if lp := joinArrays(append(turn.Logprobs, r.Logprobs)); lp != nil {
			// A round without text may carry "logprobs": null (some
			// servers, where OpenAI sends an object with null content).
			path, v := "choices.0.logprobs.content", lp
			if !gjson.GetBytes(body, "choices.0.logprobs").IsObject() {
				path, v = "choices.0.logprobs", append(append([]byte(`{"content":`), lp...), `,"refusal":null}`...)
			}
			if body, err = sjson.SetRawBytes(body, path, v); err != nil {
				return nil, fmt.Errorf("setting the turn's logprobs: %w", err)
			}
		}
	}
	if shifted := ShiftAnnotations(r.Annotations, utf8.RuneCountInString(turn.Text)); len(turn.Annotations) > 0 || shifted != r.Annotations {
		if all := joinArrays(append(turn.Annotations, shifted)); all != nil {
			if body, err = sjson.SetRawBytes(body, "choices.0.message.annotations", all); err != nil {
				return nil, fmt.Errorf("setting the turn's annotations: %w", err)
			}
		}
	}
	if turn.Usage != nil {
		if body, err = sjson.SetRawBytes(body, "usage", turn.Usage); err != nil {
			return nil, fmt.Errorf("setting usage: %w", err)
		}
	}
	if turn.ID != "" && turn.ID != r.ID {
		if body, err = sjson.SetBytes(body, "id", turn.ID); err == nil {
			body, err = sjson.SetBytes(body, "created", turn.Created)
		}
		if err != nil {
			return nil, fmt.Errorf("setting the turn's id: %w", err)
		}
	}
	return body, nil
}

// ShiftAnnotations returns annotations, a raw JSON array of a Chat
// message's (or a delta's) annotations, with the offsets of every
// url_citation (start_index, end_index: the only offsets OpenAI's Chat
// Completions annotations have) moved on by n: where the message's text
// now stands in the client's answer, after the n characters of text
// earlier rounds said. OpenAI documents the indexes as character
// positions, and its servers and SDKs (Python) index a string by code
// point, so n counts runes (utf8.RuneCountInString), not bytes. Other
// annotations, and an offset that is not a number, stay as they are; so
// does annotations when n is 0 or it is not an array.
func ShiftAnnotations(annotations string, n int) string {
	return shiftItems(annotations, int64(n), isCitation, "url_citation.start_index", "url_citation.end_index")
}

// isCitation reports whether an annotation is a url_citation.
func isCitation(a gjson.Result) bool { return a.Get("type").String() == "url_citation" }

// shiftItems returns arr, a raw JSON array, with n added to the numbers at
// paths of each item that shifts reports; arr as it is when n is 0, it is
// not an array, or nothing moves.
func shiftItems(arr string, n int64, shifts func(item gjson.Result) bool, paths ...string) string {
	if n == 0 || arr == "" {
		return arr
	}
	a := gjson.Parse(arr)
	if !a.IsArray() {
		return arr
	}
	var items []string
	changed := false
	a.ForEach(func(_, it gjson.Result) bool {
		raw := it.Raw
		if shifts(it) {
			for _, k := range paths {
				if v := gjson.Get(raw, k); v.Type == gjson.Number {
					if out, err := sjson.Set(raw, k, v.Int()+n); err == nil {
						raw, changed = out, true
					}
				}
			}
		}
		items = append(items, raw)
		return true
	})
	if !changed {
		return arr
	}
	return string(joinArray(items))
}

// FirstCallMembers returns the raw call that comes first in the client's
// message, given its own provider members (own) and those of the
// message's first call (first), which the client does not get. What a provider puts on a message's first call speaks
// for the whole step: Gemini puts the thought signature there alone ("only
// the first functionCall carries it") and refuses the next request (400
// "Function call is missing a thought_signature") unless the first call
// sent back has it. So when the gateway's own call was first, its members
// move to the client's first call, unless that call has members of its
// own.
func FirstCallMembers(raw, own, first string) string {
	if own != "" {
		return raw
	}
	return withMembers(raw, first)
}

// TextPart is text as a content part, {"type":"text","text":...}: how
// text stands among the parts of a content written as an array.
func TextPart(text string) string {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", text})
	return string(b)
}

// contentOf reads a message's or a delta's content: a string is its text;
// an array of parts (Magistral's [{"type":"thinking",...},{"type":"text",
// "text":...}]) is the text of its text parts, and itself as parts.
func contentOf(v gjson.Result) (text, parts string) {
	if !v.IsArray() {
		return v.String(), ""
	}
	var b strings.Builder
	v.ForEach(func(_, p gjson.Result) bool {
		if p.Get("type").String() == "text" {
			b.WriteString(p.Get("text").String())
		}
		return true
	})
	return b.String(), v.Raw
}

// joinArrays concatenates raw JSON arrays into one; nil when none has an
// item.
func joinArrays(arrays []string) []byte {
	var items []string
	for _, a := range arrays {
		gjson.Parse(a).ForEach(func(_, v gjson.Result) bool {
			items = append(items, v.Raw)
			return true
		})
	}
	if len(items) == 0 {
		return nil
	}
	return joinArray(items)
}
