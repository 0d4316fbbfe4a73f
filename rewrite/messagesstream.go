package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

var (
	_ ItemEventWriter = Messages{}
	_ Lifecycle       = Messages{}
)

// LifecycleEvent implements Lifecycle: message_start, content_block_start
// and ping, and the keepalive events some servers (Azure) send in a
// silence.
func (Messages) LifecycleEvent(name string) bool {
	switch name {
	case "message_start", "content_block_start", "ping", "keepalive":
		return true
	}
	return false
}

// ItemReader implements ItemEventWriter. A Messages stream sends each
// content block as a start, deltas and a stop, and ends with a
// message_delta (the stop reason and the output's usage) and a
// message_stop; the reader builds the blocks up from the deltas, so the
// message_delta, read as the terminal event, hands them over whole.
func (Messages) ItemReader() ItemReader { return &messagesReader{} }

// messagesReader is the state of one upstream Messages stream.
type messagesReader struct {
	began  bool // message_start came
	id     string
	usage  []byte // message_start's usage, which message_delta's updates
	blocks []blockBuild
}

// blockBuild is one content block as its events build it: the block its
// content_block_start gave, and what the deltas added to its members.
type blockBuild struct {
	start               string
	text, thinking, sig []byte // byte slices, not Builders: blocks is a slice that grows
	json                []byte // input_json_delta's partial_json
	citations           []string
	started             bool
}

// Read implements ItemReader.
func (m *messagesReader) Read(data []byte) (ItemEvent, error) {
	if strayItemEvent(data) {
		return ItemEvent{Stray: true}, nil
	}
	root, ev, err := readItemEvent(data)
	if err != nil {
		return ev, err
	}
	switch ev.Type {
	case "ping":
		ev.KeepAlive = true
	case "error":
	case "message_start":
		if m.began {
			return ItemEvent{}, fmt.Errorf("stream sent a second message_start: %.80q", data)
		}
		msg := root.Get("message")
		m.id, m.began = msg.Get("id").String(), true
		m.usage = LatestUsage(nil, msg.Get("usage"))
	default:
		// The client's accumulator starts from message_start, and the
		// relay passes on the first round's lifecycle as the client's.
		if !m.began {
			return ItemEvent{}, fmt.Errorf("stream event %s came before message_start", ev.Type)
		}
	}
	switch ev.Type {
	case "content_block_start", "content_block_delta", "content_block_stop":
		i := root.Get("index")
		if i.Type != gjson.Number || i.Int() < 0 || i.Int() > maxBlocks {
			return ItemEvent{}, fmt.Errorf("stream event %s has no index in range: %.80q", ev.Type, data)
		}
		ev.OutputIndex = int(i.Int())
		for len(m.blocks) <= ev.OutputIndex {
			m.blocks = append(m.blocks, blockBuild{})
		}
		b := &m.blocks[ev.OutputIndex]
		switch ev.Type {
		case "content_block_start":
			cb := root.Get("content_block")
			if !cb.IsObject() || b.started {
				return ItemEvent{}, fmt.Errorf("stream event content_block_start has no block, or one already started: %.80q", data)
			}
			b.start, b.started, ev.Opens = cb.Raw, true, true
			switch cb.Get("type").String() {
			case "tool_use":
				ev.Call, ev.Name = true, cb.Get("name").String()
			case "thinking", "redacted_thinking":
				ev.Reasoning = true
			}
		case "content_block_delta", "content_block_stop":
			// A client's accumulator refuses an event of a block that
			// never started, and its text would go nowhere.
			if !b.started {
				return ItemEvent{}, fmt.Errorf("stream event %s of block %d, which never started", ev.Type, ev.OutputIndex)
			}
		}
		if ev.Type == "content_block_delta" {
			d := root.Get("delta")
			switch d.Get("type").String() {
			case "text_delta":
				b.text = append(b.text, d.Get("text").String()...)
			case "input_json_delta":
				b.json = append(b.json, d.Get("partial_json").String()...)
			case "thinking_delta":
				b.thinking = append(b.thinking, d.Get("thinking").String()...)
			case "signature_delta":
				b.sig = append(b.sig, d.Get("signature").String()...)
			case "citations_delta":
				b.citations = append(b.citations, d.Get("citation").Raw)
			}
		}
	case "message_delta":
		ev.Terminal, ev.ID = true, m.id
		ev.Cut = CutShort(root.Get("delta.stop_reason").String())
		u := LatestUsage(m.usage, root.Get("usage"))
		ev.Usage = gjson.ParseBytes(u)
		var err error
		if ev.Items, err = m.built(); err != nil {
			return ItemEvent{}, err
		}
		ev.Calls, ev.Text, _ = readBlocks(gjson.Parse("[" + JoinItems(ev.Items) + "]"))
	case "error":
		ev.Terminal, ev.Failed = true, true
	}
	return ev, nil
}

// maxBlocks bounds a stream's block index: an upstream's index sizes a
// slice.
const maxBlocks = 4096

// built returns the stream's blocks, whole, by index: "" stands where
// no block started (an upstream that skipped an index), so the relay
// finds each block where its events said it was, and where a text block
// said nothing: the API refuses an empty text block sent back.
func (m *messagesReader) built() ([]string, error) {
	out := make([]string, len(m.blocks))
	for i := range m.blocks {
		b := &m.blocks[i]
		if !b.started {
			continue
		}
		if len(b.text) == 0 && gjson.Get(b.start, "type").String() == "text" && gjson.Get(b.start, "text").String() == "" {
			continue
		}
		raw := []byte(b.start)
		var err error
		set := func(path, v string) {
			if err == nil {
				raw, err = sjson.SetBytes(raw, path, v)
			}
		}
		if len(b.text) > 0 {
			set("text", gjson.GetBytes(raw, "text").String()+string(b.text))
		}
		if len(b.thinking) > 0 {
			set("thinking", gjson.GetBytes(raw, "thinking").String()+string(b.thinking))
		}
		if len(b.sig) > 0 {
			set("signature", string(b.sig))
		}
		// An input cut short (a round that ran out of max_tokens) keeps
		// the block's own, {}, as Anthropic's SDKs keep it: the client
		// got the same deltas, and reads the call as they do.
		if len(b.json) > 0 && gjson.ValidBytes(b.json) && err == nil {
			raw, err = sjson.SetRawBytes(raw, "input", b.json)
		}
		if len(b.citations) > 0 && err == nil {
			prior := gjson.GetBytes(raw, "citations")
			var all []string
			prior.ForEach(func(_, c gjson.Result) bool {
				all = append(all, c.Raw)
				return true
			})
			raw, err = sjson.SetRawBytes(raw, "citations", joinArray(append(all, b.citations...)))
		}
		if err != nil {
			return nil, fmt.Errorf("building the stream's block %d: %w", i, err)
		}
		out[i] = string(raw)
	}
	return out, nil
}

// EditItemEvent implements ItemEventWriter: a Messages stream numbers
// its blocks, not its events, so seq is not written.
func (Messages) EditItemEvent(data []byte, _, index int, _ string) ([]byte, error) {
	if index < 0 {
		return data, nil
	}
	out, err := sjson.SetBytes(data, "index", index)
	if err != nil {
		return nil, fmt.Errorf("renumbering stream event: %w", err)
	}
	return out, nil
}

// EndItemEvents implements ItemEventWriter: the last round's
// message_delta with the turn's usage (a stop reason of tool_use
// becomes end_turn when no call of the client's is left), and the
// message_stop.
func (Messages) EndItemEvents(last NamedEvent, _ string, items []string, usage []byte, _ int) ([]NamedEvent, error) {
	out := last.Data
	var err error
	if usage != nil {
		out, err = sjson.SetRawBytes(out, "usage", usage)
	}
	if err == nil && gjson.GetBytes(out, "delta.stop_reason").String() == "tool_use" && !anyCall(items) {
		out, err = sjson.SetBytes(out, "delta.stop_reason", "end_turn")
	}
	if err != nil {
		return nil, fmt.Errorf("writing the turn's last event: %w", err)
	}
	return []NamedEvent{
		{Name: last.Name, Data: out},
		{Name: "message_stop", Data: []byte(`{"type":"message_stop"}`)},
	}, nil
}

// CarriesReasoning implements ItemEventWriter.
func (Messages) CarriesReasoning() bool { return true }

// CutAtCap implements ItemEventWriter: the message_delta's stop reason
// max_tokens.
func (Messages) CutAtCap(last NamedEvent) (NamedEvent, error) {
	out, err := sjson.SetBytes(last.Data, "delta."+msgStopReason, "max_tokens")
	if err != nil {
		return NamedEvent{}, fmt.Errorf("setting the stop reason: %w", err)
	}
	return NamedEvent{Name: last.Name, Data: out}, nil
}

// anyCall reports whether one of blocks is a tool_use.
func anyCall(blocks []string) bool {
	for _, b := range blocks {
		if gjson.Get(b, "type").String() == "tool_use" {
			return true
		}
	}
	return false
}

// ErrorEvent implements ItemEventWriter: the Messages API's error event,
// {"type":"error","error":{"type","message"}}.
func (Messages) ErrorEvent(typ, code, message, _ string, _ int) NamedEvent {
	return NamedEvent{Name: "error", Data: AnthropicError(AnthropicType(typ, code), message)}
}

// AnthropicType is the Messages API's error type for an OpenAI-shaped
// error's type and code: one of the API's own types kept (an upstream's,
// or invalid_request_error), a body too large and an overload as the API
// names them, and any other failure of the gateway's or an upstream's
// api_error, the API's type for a server failure.
func AnthropicType(typ, code string) string {
	switch code {
	case "request_too_large":
		return "request_too_large"
	case "gateway_overloaded":
		return "overloaded_error"
	}
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "api_error", "overloaded_error":
		return typ
	}
	return "api_error"
}

// AnthropicError is the Messages API's error body.
func AnthropicError(typ, message string) []byte {
	b := appendString([]byte(`{"type":"error","error":{"type":`), typ)
	b = appendString(append(b, `,"message":`...), message)
	return append(b, "}}"...)
}
