package rewrite

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// ItemEventWriter is the streaming capability of a dialect whose stream
// speaks of output items, each event naming the item it belongs to by
// index: the Responses API's output items, the Messages API's content
// blocks. The relay finds it by type assertion, as it finds EventWriter.
// Its methods are what every item stream needs; what only one does is a
// capability of its own (ToolsEchoer), so no dialect stubs it.
type ItemEventWriter interface {
	// ItemReader returns a reader of one upstream stream's events. A
	// dialect whose events carry deltas only (the Messages API's) builds
	// each item up in it, to hand the whole items over at the end.
	ItemReader() ItemReader
	// EditItemEvent returns data with its sequence_number set to seq
	// (for a stream that numbers its events), when index >= 0 its item's
	// index set to index, and, when id is not "" and data holds a
	// response under another id (a later round's failure), that
	// response's id set to id: the client's stream has one response,
	// the first round's.
	EditItemEvent(data []byte, seq, index int, id string) ([]byte, error)
	// EndItemEvents returns the events that end the turn, numbered from
	// seq: last (the final round's terminal event, or a failure that
	// holds its response, ItemEvent.ID) with the response's
	// id set to id (the one the stream began with: clients refuse a
	// stream whose response changes identity), its output replaced by
	// items (raw JSON objects, in the client's order) and its usage by
	// usage (when not nil), then whatever the stream's grammar closes
	// with.
	EndItemEvents(last NamedEvent, id string, items []string, usage []byte, seq int) ([]NamedEvent, error)
	// CutAtCap returns last, the final round's terminal event, as the
	// API ends a response its output cap cut short (Turn.Capped), for
	// EndItemEvents to end the turn with.
	CutAtCap(last NamedEvent) (NamedEvent, error)
	// ErrorEvent is the event that ends a stream in failure, numbered
	// seq: typ and code classify it as an error body's members do.
	ErrorEvent(typ, code, message, param string, seq int) NamedEvent
	// CarriesReasoning reports whether the reasoning of the gateway's own
	// rounds leads the first item the client sees when that item's round
	// has no reasoning of its own: the Messages API requires the thinking
	// that began a turn back with its calls, and its models without
	// interleaved thinking think once a turn. The Responses API refuses a
	// reasoning item sent back without the item that followed it.
	CarriesReasoning() bool
}

// ToolsEchoer is the capability of an item stream whose lifecycle and
// terminal events echo the request's tools (the Responses API's
// response.tools), which the client must see as its own: the round was
// offered tool_search and the active set. The relay finds it by type
// assertion; the Messages API's events echo none.
type ToolsEchoer interface {
	// EchoTools returns a lifecycle or terminal event (data) whose
	// response echoes its request's tools with the client's own tools
	// array (Turn.Tools) in their place.
	EchoTools(data []byte, tools string) ([]byte, error)
}

// Lifecycle is the capability of a dialect whose streams name their
// events and send some that say the answer has begun, or is alive,
// without carrying any of it: a reasoning model may think for minutes
// after them, so the relay's idle timer does not count them as output.
// Chat Completions names no event and has none.
type Lifecycle interface {
	// LifecycleEvent reports whether an event named name is one.
	LifecycleEvent(name string) bool
}

// AnyLifecycleEvent reports whether name is a lifecycle event of any
// dialect's stream (Lifecycle): for a reader below the dialect, as the
// idle timer of a passed-through stream is, whose API it does not know.
// The APIs name no event alike, so a stream of one never sends another's.
func AnyLifecycleEvent(name string) bool {
	// Concrete calls, not a loop over interfaces: name, often converted
	// from the bytes of a stream line, then does not escape.
	return Responses{}.LifecycleEvent(name) || Messages{}.LifecycleEvent(name)
}

// ItemReader reads the events of one upstream item stream, in order.
type ItemReader interface {
	// Read classifies one event's data.
	Read(data []byte) (ItemEvent, error)
}

// NamedEvent is one server-sent event: its event name and its data.
type NamedEvent struct {
	Name string
	Data []byte
}

// ItemEvent is what the relay reads of one item stream event. It holds
// a copy of what it reads: the data may be reused.
type ItemEvent struct {
	Type string
	// OutputIndex is the index of the item the event belongs to, -1 when
	// it has none (the response's lifecycle events).
	OutputIndex int
	// Opens is true for the event that opens an item
	// (response.output_item.added, content_block_start); Call and
	// Reasoning then say whether it is a function call, named Name, or
	// the model's reasoning (which leads the calls it decided on).
	Opens, Call, Reasoning bool
	Name                   string
	// KeepAlive is true for an event that only keeps the stream alive
	// (the Messages API's ping): it has no content and no index, and the
	// relay passes it on from every round, where a later round's other
	// lifecycle events would open a second response.
	KeepAlive bool
	// Stray is true for data neither API sends but some of their servers
	// add (Chat Completions' end marker, [DONE], after the terminal
	// event): it belongs to no response, and the relay passes over it.
	// Nothing else of the event is set.
	Stray bool
	// Terminal is true for the events that end a response stream:
	// response.completed and response.incomplete, message_delta;
	// response.failed and error (Failed is true too).
	Terminal, Failed bool
	// Cut is true for a terminal event of a response that ended short of
	// its answer (response.incomplete; a message that stopped at
	// max_tokens or the context window, or refused): a call in it may be
	// cut off, and no round may follow it.
	Cut bool
	// Of a terminal event that holds its response (every one but a
	// failure, and the Responses API's response.failed, which holds what
	// the response had when it failed): the response's id, creation time
	// and usage, its function calls, the text of its messages and its
	// output items (raw, by index; "" where an upstream's stream skipped
	// an index: JoinItems joins them). ID is "" for a failure without.
	ID      string
	Created int64
	Usage   gjson.Result
	Calls   []Call
	Text    string
	Items   []string
	// Awaits is true when an item other than a function call waits for
	// the client's reply (Response.Awaits): the round is the client's.
	Awaits bool
}

// ItemShow is how a client sees one output item of a round: the rule the
// item relay (proxy/itemstream.go) follows as each item opens, and a whole
// Responses answer follows over its rounds' items (shownItems), so a turn
// shows the same items streamed or not.
type ItemShow int

const (
	// ShowNow: the client sees the item where it stands.
	ShowNow ItemShow = iota
	// ShowNever: a call of the gateway's own (one keep rejects).
	ShowNever
	// ShowWithNext: the model's reasoning, which leads what it decided
	// on. It goes before the next item of its round the client sees, or
	// at the end of the round that ends the turn; in a round of the
	// gateway's with no such item, nowhere (unless the dialect carries
	// it, CarriesReasoning). A reasoning item resent without the item
	// that followed it is refused.
	ShowWithNext
)

// ShowOf classifies an item as it opens: a function call named name (call),
// the model's reasoning (reasoning), or anything else; keep reports
// whether the client gets a call, judged by its name (all an opening
// item is sure to tell).
func ShowOf(call bool, name string, reasoning bool, keep func(Call) bool) ItemShow {
	switch {
	case call && !keep(Call{Name: name}):
		return ShowNever
	case reasoning:
		return ShowWithNext
	}
	return ShowNow
}

// strayItemEvent reports whether data is an event an item stream's API
// never sends (ItemEvent.Stray).
func strayItemEvent(data []byte) bool { return string(data) == chatDone }

// readItemEvent parses one item stream event's data, an object with a
// type, into its root and an event of that type with no index yet.
func readItemEvent(data []byte) (gjson.Result, ItemEvent, error) {
	if !gjson.ValidBytes(data) {
		return gjson.Result{}, ItemEvent{}, fmt.Errorf("stream event is not valid JSON: %.80q", data)
	}
	root := gjson.ParseBytes(data)
	ev := ItemEvent{Type: root.Get("type").String(), OutputIndex: -1}
	if !root.IsObject() || ev.Type == "" {
		return gjson.Result{}, ItemEvent{}, fmt.Errorf("stream event has no type: %.80q", data)
	}
	return root, ev, nil
}

// JoinItems joins a stream's items (ItemEvent.Items) with commas, leaving
// out the indices no item took.
func JoinItems(items []string) string {
	var b strings.Builder
	for _, it := range items {
		if it == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(it)
	}
	return b.String()
}
