package rewrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// JSON paths of the Anthropic Messages API (POST /messages) that the
// gateway reads or writes.
const (
	msgSystem     = "system"
	msgContent    = "content"
	msgStopReason = "stop_reason"
)

// Messages is the Anthropic Messages API dialect: a client tool is
// {"name","description","input_schema"} (the server tools, typed
// web_search_20250305 or bash_20250124, are pinned: always sent, never
// searched), the conversation is a list of user and assistant messages
// whose content is a string or blocks, tool calls are the assistant's
// tool_use blocks and their results the next user message's tool_result
// blocks. The gateway's rounds go back as the blocks the model wrote
// (thinking included, which the API requires with the tool_use it led to)
// and a user message of tool_result blocks. Its streams are item streams
// of content blocks (messagesstream.go).
type Messages struct{}

var (
	_ Dialect = Messages{}
	_ Named   = Messages{}
)

// ParseRequest implements Dialect.
func (Messages) ParseRequest(body []byte, cache ToolCache) (*Request, error) {
	return parsePinned(body, cache, parseMessages)
}

// parseMessages validates a Messages request body and reads what the
// gateway needs, with the same refusals as the other dialects' parse.
func parseMessages(body []byte, cache ToolCache) (*Request, error) {
	root, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &Request{Body: body, form: formAnthropic, N: 1}
	var msgs, model, stream, choice, tools, system gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		var dst *gjson.Result
		switch k.Str {
		case pathMessages:
			dst = &msgs
		case pathModel:
			dst = &model
		case pathStream:
			dst = &stream
		case pathToolChoice:
			dst = &choice
		case pathTools:
			dst = &tools
		case msgSystem:
			dst = &system
		case "output_format": // structured outputs' beta form
			r.JSONOutput = r.JSONOutput || v.Get("type").String() == "json_schema"
		case "output_config": // and its GA form
			r.JSONOutput = r.JSONOutput || v.Get("format.type").String() == "json_schema"
		case pathMaxTokens:
			r.OutputCap = capOf(v)
		case "thread":
			// The upstream keeps the thread: every round of the gateway's
			// would be written into it, its own tool_search call last.
			r.ServerConversation = v.Type != gjson.Null
		case "thinking":
			// max_tokens must exceed the thinking budget.
			if v.Get("type").String() == "enabled" {
				r.outputFloor = v.Get("budget_tokens").Int() + 1
			}
		}
		if dst != nil && !dst.Exists() {
			*dst = v
		}
		return true
	})
	r.Model, r.Stream = model.String(), stream.Bool()
	if !msgs.IsArray() {
		return nil, WithParam(pathMessages, fmt.Errorf("%w: 'messages' must be an array", ErrBadRequest))
	}
	if choice.Get("type").String() == "tool" {
		r.ToolChoice = choice.Get("name").String()
	}
	if err := r.readTools(tools, cache); err != nil {
		return nil, err
	}
	r.System = contentText(system)
	readBlockMessages(r, msgs)
	return r, nil
}

// readBlockMessages fills the conversation-derived fields from a Messages
// conversation. A user message that answers calls (it holds tool_result
// blocks) is the tools' turn, not the user's: it neither starts a user
// turn nor counts as the user's words. An assistant message's tool_use
// blocks are one step.
func readBlockMessages(r *Request, msgs gjson.Result) {
	seen := map[string]struct{}{}
	last := ""
	msgs.ForEach(func(_, m gjson.Result) bool {
		r.Messages++
		role, content := m.Get("role").String(), m.Get(msgContent)
		last = role
		switch role {
		case "user":
			if hasBlock(content, "tool_result") {
				last = "tool"
				return true
			}
			r.readText(role, content)
		case "assistant":
			r.readText(role, content)
			step := false
			content.ForEach(func(_, b gjson.Result) bool {
				if b.Get("type").String() == "tool_use" {
					if !step {
						step = true
						r.startStep()
					}
					r.noteCall(b.Get("name").String(), seen)
				}
				return true
			})
		}
		return true
	})
	r.UserTurn = last == "user"
	r.Prefill = last == "assistant"
}

// hasBlock reports whether a message content holds a block of type typ.
func hasBlock(content gjson.Result, typ string) bool {
	found := false
	content.ForEach(func(_, b gjson.Result) bool {
		found = b.Get("type").String() == typ
		return !found
	})
	return found
}

// Build implements Dialect: the tools array replaced by tools (in the
// Messages form) and the request's pinned tools (none removes tools and
// tool_choice; tool_choice {"type":"none"} with req.NoCalls), and the
// rounds appended to messages: each an assistant message of the blocks
// the model wrote, then a user message of one tool_result per answer.
func (Messages) Build(req *Request, tools []string, rounds []Round) ([]byte, error) {
	body, err := setTools(req.Body, req, tools, `{"type":"none"}`, 0, pathTools, pathToolChoice)
	if err != nil {
		return nil, err
	}
	if body, err = setOutputCap(body, req, pathMaxTokens); err != nil {
		return nil, err
	}
	if len(rounds) == 0 {
		return body, nil
	}
	msgs := gjson.Get(view(body), pathMessages)
	if !msgs.IsArray() || msgs.Index <= 0 {
		return nil, fmt.Errorf("appending rounds: %w: no messages array", ErrBadRequest)
	}
	var extra []byte
	for _, r := range rounds {
		extra = appendBlockRound(append(extra, ','), r)
	}
	return appendToArray(body, msgs, extra[1:]), nil
}

// appendBlockRound appends round r as two messages: the assistant's
// blocks as the model wrote them (or its text and calls, when they are
// not at hand), and the user's tool_result blocks.
func appendBlockRound(b []byte, r Round) []byte {
	b = append(b, `{"role":"assistant","content":[`...)
	if r.Extra != "" {
		b = append(b, r.Extra...)
	} else {
		n := 0
		if r.Content != "" {
			b = appendString(append(b, `{"type":"text","text":`...), r.Content)
			b = append(b, '}')
			n++
		}
		for _, c := range r.Calls {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = appendString(append(b, `{"type":"tool_use","id":`...), c.ID)
			b = appendString(append(b, `,"name":`...), c.Name)
			input := c.Arguments
			if !gjson.Valid(input) || !gjson.Parse(input).IsObject() {
				input = "{}"
			}
			b = append(append(append(b, `,"input":`...), input...), '}')
		}
	}
	b = append(b, `]},{"role":"user","content":[`...)
	for i, res := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"type":"tool_result","tool_use_id":`...), res.CallID)
		b = appendString(append(b, `,"content":`...), res.Content)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// OwnTool implements Dialect with AnthropicTool.
func (Messages) OwnTool(def string) (string, error) { return AnthropicTool(def) }

// Name implements Named.
func (Messages) Name() string { return "messages" }

// AnthropicTool returns a tool definition in the Messages API's form: a
// Chat Completions definition ({"type":"function","function":{...}}, as
// the gateway writes its own) becomes {"name","description",
// "input_schema"}; anything else is returned as it is.
func AnthropicTool(raw string) (string, error) {
	fn := gjson.Get(raw, "function")
	if !fn.IsObject() {
		return raw, nil
	}
	b := appendString([]byte(`{"name":`), fn.Get("name").String())
	if d := fn.Get("description"); d.Exists() {
		b = appendString(append(b, `,"description":`...), d.String())
	}
	schema := fn.Get("parameters").Raw
	if schema == "" {
		schema = `{"type":"object"}`
	}
	b = append(append(append(b, `,"input_schema":`...), schema...), '}')
	if !gjson.ValidBytes(b) {
		return "", fmt.Errorf("converting tool %.60q: not a valid definition", raw)
	}
	return string(b), nil
}

// ParseResponse implements Dialect: the text of the content's text
// blocks, its tool_use blocks as calls, and the whole content as the
// round's blocks (Response.Extra, without brackets), which Build sends
// back as they are.
func (Messages) ParseResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, badResponse("upstream response is not valid JSON")
	}
	root := gjson.Parse(view(body))
	content := root.Get(msgContent)
	if !root.IsObject() || !content.IsArray() {
		return nil, badResponse("upstream response has no content array")
	}
	r := &Response{
		Body:         body,
		ID:           root.Get("id").String(),
		FinishReason: root.Get(msgStopReason).String(),
		Usage:        root.Get("usage"),
	}
	var blocks []string
	r.Calls, r.Content, blocks = readBlocks(content)
	r.Extra = strings.Join(blocks, ",")
	return r, nil
}

// readBlocks reads an assistant message's content blocks: its tool_use
// calls (a server tool's server_tool_use is the upstream's to run), the
// text of its text blocks, and the blocks themselves, raw.
func readBlocks(content gjson.Result) (calls []Call, text string, blocks []string) {
	var b strings.Builder
	content.ForEach(func(_, bl gjson.Result) bool {
		blocks = append(blocks, bl.Raw)
		switch bl.Get("type").String() {
		case "tool_use":
			calls = append(calls, blockCall(bl))
		case "text":
			b.WriteString(bl.Get("text").String())
		}
		return true
	})
	return calls, b.String(), blocks
}

// blockCall reads a tool_use block.
func blockCall(bl gjson.Result) Call {
	return Call{ID: bl.Get("id").String(), Name: bl.Get("name").String(), Arguments: bl.Get("input").Raw}
}

// ClientResponse implements Dialect: the blocks a stream of the turn
// shows, in its order (shownBlocks): what the gateway's rounds showed
// (their text, unless turn.Text is empty for an answer that must be JSON,
// and their server tools' blocks) and their thinking, then the content
// without the tool_use blocks turn.Keep rejects (thinking first in a
// message with calls, thinkingFirst); a message left without calls ends
// its turn (stop_reason end_turn, where it said tool_use; max_tokens when
// turn.Capped); the turn's usage and first id.
func (Messages) ClientResponse(r *Response, turn Turn) ([]byte, error) {
	root := gjson.ParseBytes(r.Body)
	content := root.Get(msgContent)
	blocks := shownBlocks(turn.Rounds, content, turn.Keep, turn.Text != "")
	calls := 0
	for _, b := range blocks {
		if gjson.Get(b, "type").String() == "tool_use" {
			calls++
		}
	}
	if calls > 0 {
		blocks = thinkingFirst(blocks)
	}
	changed := len(blocks) != len(content.Array())
	if !changed {
		i := 0
		content.ForEach(func(_, bl gjson.Result) bool {
			changed = bl.Raw != blocks[i]
			i++
			return !changed
		})
	}
	body := append([]byte(nil), r.Body...)
	var err error
	if changed {
		if body, err = sjson.SetRawBytes(body, msgContent, joinArray(blocks)); err != nil {
			return nil, fmt.Errorf("rewriting the content: %w", err)
		}
	}
	if stop := capStop(turn.Capped, calls == 0 && r.FinishReason == "tool_use"); stop != "" {
		if body, err = sjson.SetBytes(body, msgStopReason, stop); err != nil {
			return nil, fmt.Errorf("setting the stop reason: %w", err)
		}
	}
	if turn.Usage != nil {
		if body, err = sjson.SetRawBytes(body, "usage", turn.Usage); err != nil {
			return nil, fmt.Errorf("setting usage: %w", err)
		}
	}
	if turn.ID != "" && turn.ID != r.ID {
		if body, err = sjson.SetBytes(body, "id", turn.ID); err != nil {
			return nil, fmt.Errorf("setting the id: %w", err)
		}
	}
	return body, nil
}

// capStop is the stop reason a turn's message ends with in place of its
// last round's: max_tokens for a turn whose rounds spent the client's
// max_tokens (Turn.Capped), end_turn for a tool_use left without the
// client's calls (callsGone), "" to keep the round's.
func capStop(capped, callsGone bool) string {
	switch {
	case capped:
		return "max_tokens"
	case callsGone:
		return "end_turn"
	}
	return ""
}

// isThinking reports whether a block type is the model's reasoning.
func isThinking(typ string) bool { return typ == "thinking" || typ == "redacted_thinking" }

// shownBlocks returns the blocks a client sees of a turn whose gateway's
// rounds were rounds and whose last message's content is last, in the
// order the item relay streams them (proxy/itemstream.go), so a turn
// shows the same blocks streamed or not. ShowOf says how each block
// shows: the gateway's tool_use blocks never; thinking with what follows
// it (ShowWithNext), right before the next block of its round the client
// sees, or at the end of the last message; the thinking of a round of
// the gateway's with no such block is carried (Messages CarriesReasoning)
// to lead the turn's first block, when nothing went before it and its
// round has no thinking of its own, and goes nowhere else. Of the
// rounds, a text block shows only withText (an answer that must be JSON
// leaves their words out) and when it is not empty (the API refuses an
// empty one sent back); a round whose blocks are not at hand shows its
// text.
func shownBlocks(rounds []Round, last gjson.Result, keep func(Call) bool, withText bool) []string {
	var out, held, carried []string
	release := func() {
		if len(out) == 0 && len(held) == 0 {
			out = append(out, carried...)
		}
		carried = nil
		out = append(out, held...)
		held = held[:0]
	}
	walk := func(blocks gjson.Result, fromRound bool) {
		blocks.ForEach(func(_, b gjson.Result) bool {
			typ := b.Get("type").String()
			switch ShowOf(typ == "tool_use", b.Get("name").String(), isThinking(typ), keep) {
			case ShowNever:
			case ShowWithNext:
				held = append(held, b.Raw)
			default:
				if !fromRound || typ != "text" || withText && b.Get("text").String() != "" {
					release()
					out = append(out, b.Raw)
				}
			}
			return true
		})
	}
	for _, r := range rounds {
		extra := r.Extra
		if extra == "" && r.Content != "" {
			extra = textBlock(r.Content)
		}
		walk(gjson.Parse("["+extra+"]"), true)
		carried = append(carried, held...)
		held = held[:0]
	}
	walk(last, false)
	release()
	return out
}

// thinkingFirst moves the turn's first thinking blocks before what a
// search round showed ahead of them: the one place a whole answer departs
// from the stream's order. The API refuses a message with calls sent back
// that has thinking but does not start with it; a stream, which relayed
// a search round's text before a later round thought, cannot.
func thinkingFirst(blocks []string) []string {
	i := slices.IndexFunc(blocks, func(b string) bool { return isThinking(gjson.Get(b, "type").String()) })
	if i <= 0 {
		return blocks
	}
	j := i
	for j < len(blocks) && isThinking(gjson.Get(blocks[j], "type").String()) {
		j++
	}
	return slices.Concat(blocks[i:j], blocks[:i], blocks[j:])
}

// textBlock is text as a Messages content block.
func textBlock(text string) string {
	return string(append(appendString([]byte(`{"type":"text","text":`), text), '}'))
}
