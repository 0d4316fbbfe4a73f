package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ItemEventWriter is the streaming capability of a dialect whose stream
// speaks of output items, each event naming the item's output_index and
// carrying a sequence_number (the Responses API). The relay finds it by
// type assertion, as it finds EventWriter: the two streams share no
// event, so neither dialect stubs the other's methods.
type ItemEventWriter interface {
	// ParseItemEvent classifies one event's data.
	ParseItemEvent(data []byte) (ItemEvent, error)
	// EditItemEvent returns data with its sequence_number set to seq and,
	// when index >= 0, its output_index set to index.
	EditItemEvent(data []byte, seq, index int) ([]byte, error)
	// EndItemEvent returns the event that ends the turn: last (the final
	// round's terminal event) with the response's id set to id (the one
	// the stream began with: clients refuse a stream whose response
	// changes identity), its output replaced by items (raw JSON objects,
	// in the client's order), its usage by usage (when not nil) and its
	// sequence_number by seq.
	EndItemEvent(last []byte, id string, items []string, usage []byte, seq int) ([]byte, error)
}

// ItemEvent is what the relay reads of one Responses stream event. It
// holds a copy of what it reads: the data may be reused.
type ItemEvent struct {
	Type string
	// OutputIndex is the event's output_index, -1 when it has none (the
	// response's lifecycle events).
	OutputIndex int
	// ItemType and Name are the item's type and, for a function call, its
	// name, on response.output_item.added and .done.
	ItemType, Name string
	// Terminal is true for the events that end a response stream:
	// response.completed and response.incomplete, response.failed and
	// error (Failed is true too).
	Terminal, Failed bool
	// Of a terminal event that is not a failure: the response's id,
	// creation time and usage, its function calls, the text of its
	// messages and its output items (raw, by output index).
	ID      string
	Created int64
	Usage   gjson.Result
	Calls   []Call
	Text    string
	Items   []string
}

var _ ItemEventWriter = Responses{}

// ParseItemEvent implements ItemEventWriter.
func (Responses) ParseItemEvent(data []byte) (ItemEvent, error) {
	if !gjson.ValidBytes(data) {
		return ItemEvent{}, fmt.Errorf("stream event is not valid JSON: %.80q", data)
	}
	root := gjson.ParseBytes(data)
	ev := ItemEvent{Type: root.Get("type").String(), OutputIndex: -1}
	if !root.IsObject() || ev.Type == "" {
		return ItemEvent{}, fmt.Errorf("stream event has no type: %.80q", data)
	}
	if i := root.Get("output_index"); i.Type == gjson.Number {
		ev.OutputIndex = int(i.Int())
	}
	switch ev.Type {
	case "response.output_item.added", "response.output_item.done":
		item := root.Get("item")
		ev.ItemType, ev.Name = item.Get("type").String(), item.Get("name").String()
	case "response.completed", "response.incomplete":
		resp := root.Get("response")
		ev.Terminal, ev.ID, ev.Created, ev.Usage = true, resp.Get("id").String(), resp.Get("created_at").Int(), resp.Get("usage")
		ev.Calls, ev.Text, ev.Items = readOutput(resp.Get(respOutput))
	case "response.failed", "error":
		ev.Terminal, ev.Failed = true, true
	}
	return ev, nil
}

// EditItemEvent implements ItemEventWriter.
func (Responses) EditItemEvent(data []byte, seq, index int) ([]byte, error) {
	out, err := sjson.SetBytes(data, "sequence_number", seq)
	if err == nil && index >= 0 {
		out, err = sjson.SetBytes(out, "output_index", index)
	}
	if err != nil {
		return nil, fmt.Errorf("renumbering stream event: %w", err)
	}
	return out, nil
}

// EndItemEvent implements ItemEventWriter.
func (Responses) EndItemEvent(last []byte, id string, items []string, usage []byte, seq int) ([]byte, error) {
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
