package rewrite

import "github.com/tidwall/gjson"

// Dialect is one API's wire format as the search loop needs it: read the
// tools and the conversation, write the upstream request, read the calls in
// a response, and strip the gateway's traces from what the client gets. The
// loop in proxy talks only to this interface; Chat is the OpenAI Chat
// Completions dialect, Responses the Responses API's and Messages
// Anthropic's Messages API's, all three behind the same loop.
// Streaming is a capability of its own (EventWriter).
type Dialect interface {
	// ParseRequest validates a request body and reads its tools and
	// conversation, looking the tools array up in cache first (nil: always
	// parsed). Errors wrap ErrBadRequest.
	ParseRequest(body []byte, cache ToolCache) (*Request, error)
	// Build returns the upstream body: tools replaced by tools (raw JSON
	// objects in the dialect's form; none removes them) and the gateway's
	// rounds appended.
	Build(req *Request, tools []string, rounds []Round) ([]byte, error)
	// OwnTool returns one of the gateway's own tool definitions, which it
	// writes in the Chat Completions form, in the dialect's form: the
	// client's tools already are, and converting them per request would
	// cost a scan of each.
	OwnTool(def string) (string, error)
	// ParseResponse reads the text, calls and usage of a non-streamed
	// response.
	ParseResponse(body []byte) (*Response, error)
	// ClientResponse returns the final response without the calls
	// turn.Keep rejects, with the turn's usage, first id and earlier text.
	ClientResponse(r *Response, turn Turn) ([]byte, error)
}

// Named is a dialect that says its name: one lower-case word, distinct
// among the dialects, a key for what the gateway keeps per dialect (its
// form of the gateway's own tool). A capability, not a Dialect method:
// the loop needs none of it.
type Named interface {
	Name() string
}

// EventWriter is the streaming capability of a dialect: how the relay edits
// the upstream's events and writes its own. The relay finds it by type
// assertion, so a dialect without streaming need not stub it.
type EventWriter interface {
	// ParseEvent classifies the data of one stream event into ev (reset
	// first; its strings alias data).
	ParseEvent(data []byte, ev *Event) error
	// EditEvent applies e to an event's data.
	EditEvent(data []byte, e EventEdit) ([]byte, error)
	// CallDelta renders one tool-call fragment the client sees: raw with
	// its index set, or, when raw is empty, a whole call built from the
	// held fragments.
	CallDelta(raw string, index int, id, name, args string) string
	// EndEvents returns the events that close a turn: a finish event when
	// finish is not empty, a usage event when usage is not nil (both with
	// head's identity), and the end-of-stream marker.
	EndEvents(head ChunkHead, finish string, usage []byte) [][]byte
}

// Chat is the OpenAI Chat Completions dialect.
type Chat struct{}

var (
	_ Dialect      = Chat{}
	_ EventWriter  = Chat{}
	_ ExtrasEchoer = Chat{}
)

// ParseRequest implements Dialect with ParseRequestCached.
func (Chat) ParseRequest(body []byte, cache ToolCache) (*Request, error) {
	return ParseRequestCached(body, cache)
}

// OwnTool implements Dialect: the gateway writes its own in this form.
func (Chat) OwnTool(def string) (string, error) { return def, nil }

// Name implements Named.
func (Chat) Name() string { return "chat" }

// ParseResponse implements Dialect.
func (Chat) ParseResponse(body []byte) (*Response, error) { return ParseResponse(body) }

// CallDelta implements EventWriter.
func (Chat) CallDelta(raw string, index int, id, name, args string) string {
	if raw == "" {
		return callDeltaJSON(index, id, name, args)
	}
	return reindex(raw, index)
}

// EndEvents implements EventWriter: a finish chunk, a usage chunk with no
// choices, and [DONE].
func (Chat) EndEvents(head ChunkHead, finish string, usage []byte) [][]byte {
	var out [][]byte
	if finish != "" {
		out = append(out, finishEvent(head, finish))
	}
	if usage != nil {
		out = append(out, usageEvent(head, usage))
	}
	return append(out, []byte(chatDone))
}

// RefusedExtras implements ExtrasEchoer.
func (Chat) RefusedExtras(body []byte, rounds []Round) bool {
	for _, r := range rounds {
		if r.Extra == "" {
			continue
		}
		hit := false
		// Extra is members without braces.
		gjson.Parse("{" + r.Extra + "}").ForEach(func(k, _ gjson.Result) bool {
			hit = RefusedMember(body, k.Str)
			return !hit
		})
		if hit {
			return true
		}
	}
	return false
}
