package rewrite

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

var (
	_ ItemEventWriter = Responses{}
	_ ToolsEchoer     = Responses{}
	_ Lifecycle       = Responses{}
)

// LifecycleEvent implements Lifecycle: response.created, in_progress and
// queued, and the added item or part (a reasoning item is added before
// the model thinks), and the keepalive events some servers (Azure) send
// in a silence.
func (Responses) LifecycleEvent(name string) bool {
	switch name {
	case "response.created", "response.in_progress", "response.queued",
		"response.output_item.added", "response.content_part.added", "keepalive":
		return true
	}
	return false
}

// ItemReader implements ItemEventWriter: the Responses API's events are
// read one by one, its terminal event holding the whole response.
func (Responses) ItemReader() ItemReader { return responsesReader{} }

type responsesReader struct{}

func (responsesReader) Read(data []byte) (ItemEvent, error) {
	if strayItemEvent(data) {
		return ItemEvent{Stray: true}, nil
	}
	return Responses{}.ParseItemEvent(data)
}

// ParseItemEvent classifies one Responses stream event; the terminal one
// carries the whole response.
func (Responses) ParseItemEvent(data []byte) (ItemEvent, error) {
	root, ev, err := readItemEvent(data)
	if err != nil {
		return ev, err
	}
	if i := root.Get("output_index"); i.Type == gjson.Number {
		ev.OutputIndex = int(i.Int())
	}
	switch ev.Type {
	case "response.output_item.added":
		ev.Call, ev.Name, ev.Reasoning = itemKind(root.Get("item"))
		ev.Opens = true
	case "response.completed", "response.incomplete", "response.failed":
		resp := root.Get("response")
		ev.Terminal, ev.ID, ev.Created, ev.Usage = true, resp.Get("id").String(), resp.Get("created_at").Int(), resp.Get("usage")
		ev.Cut = ev.Type == "response.incomplete"
		ev.Failed = ev.Type == "response.failed"
		ev.Calls, ev.Text, ev.Items, ev.Awaits = readOutput(resp.Get(respOutput))
	case "error":
		ev.Terminal, ev.Failed = true, true
	}
	return ev, nil
}

// itemKind reads what ShowOf classifies an output item by: whether it is
// a function call, and its name, or the model's reasoning.
func itemKind(item gjson.Result) (call bool, name string, reasoning bool) {
	switch item.Get("type").String() {
	case "function_call":
		return true, item.Get("name").String(), false
	case "reasoning":
		return false, "", true
	}
	return false, "", false
}

// EditItemEvent implements ItemEventWriter.
func (Responses) EditItemEvent(data []byte, seq, index int, id string) ([]byte, error) {
	out, err := sjson.SetBytes(data, "sequence_number", seq)
	if err == nil && index >= 0 {
		out, err = sjson.SetBytes(out, "output_index", index)
	}
	if err == nil && id != "" {
		if was := gjson.GetBytes(out, "response.id"); was.Exists() && was.String() != id {
			out, err = sjson.SetBytes(out, "response.id", id)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("renumbering stream event: %w", err)
	}
	return out, nil
}

// EchoTools implements ToolsEchoer: the response's tools.
func (Responses) EchoTools(data []byte, tools string) ([]byte, error) {
	return echoTools(data, "response.tools", tools)
}

// EndItemEvents implements ItemEventWriter: the terminal event alone.
func (Responses) EndItemEvents(last NamedEvent, id string, items []string, usage []byte, seq int) ([]NamedEvent, error) {
	out, err := endResponse(last.Data, id, items, usage, seq)
	if err != nil {
		return nil, err
	}
	return []NamedEvent{{Name: last.Name, Data: out}}, nil
}

// CutAtCap implements ItemEventWriter: response.incomplete, for
// max_output_tokens.
func (Responses) CutAtCap(last NamedEvent) (NamedEvent, error) {
	const name = "response.incomplete"
	out, err := sjson.SetBytes(last.Data, "type", name)
	if err != nil {
		return NamedEvent{}, fmt.Errorf("ending the response incomplete: %w", err)
	}
	if out, err = incompleteAtCap(out, "response."); err != nil {
		return NamedEvent{}, err
	}
	return NamedEvent{Name: name, Data: out}, nil
}

// ErrorEvent implements ItemEventWriter: the Responses API's error event,
// with its documented members at the top level and the same again under
// "error", as the API sends them: the openai SDKs end a stream with an
// error only for an event that has an "error" member (openai-go's
// ssestream, openai-python's streaming), and read a flat one as a
// stream that ended without its response.
func (Responses) ErrorEvent(typ, code, message, param string, seq int) NamedEvent {
	fields := func(b []byte) []byte {
		b = appendString(append(b, `"code":`...), code)
		b = appendString(append(b, `,"message":`...), message)
		if param == "" {
			return append(b, `,"param":null`...)
		}
		return appendString(append(b, `,"param":`...), param)
	}
	b := fields([]byte(`{"type":"error",`))
	b = append(append(b, `,"sequence_number":`...), strconv.Itoa(seq)...)
	b = appendString(append(b, `,"error":{"type":`...), typ)
	b = fields(append(b, ','))
	return NamedEvent{Name: "error", Data: append(b, "}}"...)}
}

// CarriesReasoning implements ItemEventWriter.
func (Responses) CarriesReasoning() bool { return false }

// endResponse is a Responses stream's terminal event as the turn ends it.
func endResponse(last []byte, id string, items []string, usage []byte, seq int) ([]byte, error) {
	arr := []byte{'['}
	for i, it := range items {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, it...)
	}
	out, err := sjson.SetRawBytes(last, "response.output", append(arr, ']'))
	if err == nil && usage != nil {
		out, err = sjson.SetRawBytes(out, "response.usage", usage)
	}
	if err == nil && id != "" {
		out, err = sjson.SetBytes(out, "response.id", id)
	}
	if err == nil {
		out, err = sjson.SetBytes(out, "sequence_number", seq)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the turn's last event: %w", err)
	}
	return out, nil
}
