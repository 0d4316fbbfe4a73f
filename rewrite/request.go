package rewrite

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// JSON paths of the Chat Completions request that the gateway reads.
const (
	pathTools        = "tools"
	pathMessages     = "messages"
	pathModel        = "model"
	pathStream       = "stream"
	pathIncludeUsage = "stream_options.include_usage"
	// pathStreamOptions and pathIncludeUsageKey are pathIncludeUsage's two
	// steps, for the one-pass read of the top level.
	pathStreamOptions   = "stream_options"
	pathIncludeUsageKey = "include_usage"
	pathToolChoice      = "tool_choice"
	pathN               = "n"
	pathFunctions       = "functions"
	pathFunctionCall    = "function_call"
	pathResponseFormat  = "response_format"
	pathPromptCacheKey  = "prompt_cache_key"
)

// maxDepth bounds the nesting of a request body; deeper input is rejected
// before any path lookup walks it.
const maxDepth = 128

// ErrBadRequest wraps every reason a request body is refused; callers map it
// to a 400 with the wrapped message.
var ErrBadRequest = errors.New("invalid request")

// ParamError is a refusal that one request parameter is at fault for, as
// OpenAI's errors name it in their param member ("messages", "tools").
// Err wraps ErrBadRequest; the message is Err's.
type ParamError struct {
	Param string
	Err   error
}

func (e *ParamError) Error() string { return e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// WithParam returns err as the fault of the request parameter param.
func WithParam(param string, err error) error { return &ParamError{Param: param, Err: err} }

// Request is what the gateway reads from a request body, in any dialect
// (Dialect.ParseRequest). Its string fields alias the body it was parsed
// from, unless Detached: that body must not change while the request is in
// use.
type Request struct {
	// Body is the request as the client sent it, except when the tools
	// array came from the ToolCache: then Body is a copy of the rest of
	// the request with the placeholder [] where the array stood (Original
	// puts it back), so nothing aliases the body that was parsed.
	Body         []byte
	Model        string
	Stream       bool
	IncludeUsage bool
	// NoUsageRequest makes Build leave a stream's stream_options as the
	// client sent them, for an upstream that refuses the member.
	NoUsageRequest bool
	// NoMessageExtras makes Build send the gateway's rounds without the
	// assistant message's provider members (Round.Extra), for an upstream
	// that refuses them: Groq answers 400 "property 'reasoning' is
	// unsupported" to the reasoning it sent itself, which DeepSeek needs
	// back. The calls keep theirs (Gemini's thought signatures).
	NoMessageExtras bool
	// NoCalls makes Build forbid every call with the API's own "none"
	// tool_choice (Chat and Responses "none", Messages {"type":"none"}),
	// in place of the client's tool_choice. The loop sets it for a round
	// that carries its earlier rounds but offers no tool: it sends
	// tool_search's definition there rather than no tools, which an
	// upstream refuses beside tool calls and results (Anthropic: "must
	// define tools").
	NoCalls bool
	// OutputCap is the cap the client set on its request's output tokens
	// (Chat's max_completion_tokens or max_tokens, the lower if both; the
	// Responses API's max_output_tokens; the Messages API's max_tokens),
	// 0 when none. The API caps one response, and the gateway's rounds
	// are one response to the client: the loop caps their sum
	// (OutputRoom, OutputLeft).
	OutputCap int64
	// OutputLeft, when above 0, makes Build send it as the cap in place
	// of the client's: the loop sets it, for a round after the first, to
	// what the rounds before left of OutputCap.
	OutputLeft int64
	// outputFloor is the least cap the API takes (OutputRoom); 0 is 1.
	outputFloor int64
	N           int64
	// HasFunctions is true when the request has the legacy "functions"
	// member: it passes through, less the functions the policy hides
	// (KeepFunctions).
	HasFunctions bool
	// Functions lists the names of the legacy functions, in order.
	Functions []string
	// FunctionCall is the function the legacy function_call names
	// ({"name": ...}), if any.
	FunctionCall string
	// JSONOutput is true when response_format asks for JSON (json_object
	// or json_schema): the answer's content must parse, so what the model
	// said in a search round cannot lead it.
	JSONOutput bool

	// Tools is nil when the request has no tools array. Their Params are
	// not read (the request path never needs them); ToolsWithParams reads
	// them for a catalog compile.
	Tools []Tool
	// ToolsRaw is the tools array as the client sent it; its Index is
	// where it started in the client's body.
	ToolsRaw gjson.Result
	// ToolsKey identifies the exact text of the tools array (KnownTools.Key)
	// when the ToolCache knows it; 0 without a cache. A cache shared by
	// dialects keys each dialect's arrays apart: the same text is other
	// tools to another dialect.
	ToolsKey uint64
	// ToolsKnown reports that the ToolCache already held the array: a
	// cache that keeps only arrays it has checked spares its callers the
	// check on every resend.
	ToolsKnown bool
	// span is where the tools value stands in Body ([at, at+n)); n is 0
	// when unknown, and Build then looks it up.
	span             struct{ at, n int }
	detached         bool
	hasStreamOptions bool

	// ToolChoice is the name forced by tool_choice, if any.
	ToolChoice string
	// Allowed lists the tools an allowed_tools tool_choice restricts the
	// model to: the upstream must get them, whatever else it gets.
	Allowed []string

	// Called lists the function names called in the history, first call first,
	// each once.
	Called []string
	// TurnCalled lists the function names called since the latest user
	// message, first call first, each once: the steps of the task at hand.
	TurnCalled []string
	// TurnSteps counts the assistant messages with tool calls since the
	// latest user message.
	TurnSteps int

	System    string // the first system or developer message's text
	FirstUser string // the first user message's text
	LastUser  string // the latest user message's text
	// Conversation is the request's prompt_cache_key (Chat, Responses),
	// which a client that sends it keeps the same for one conversation
	// (Codex CLI sends its conversation id): it tells apart
	// conversations that open alike.
	Conversation string
	// UserTurn is true when the latest message is from the user: a new turn,
	// not a tool result coming back.
	UserTurn bool
	// Prefill is true when the conversation ends with the assistant's own
	// words, which the model is to continue (the Messages API's prefill,
	// Chat's prefix completion): a round of the gateway's appended after
	// them would split the answer.
	Prefill bool
	// Messages is how many messages the conversation has.
	Messages int
	// Recent holds the text of the last few user and assistant messages,
	// oldest first, for ranking context.
	Recent []string
	// CalledTail lists the function names of the last assistant message that
	// made tool calls, the most recent signal of what the agent is doing.
	CalledTail []string
	// TailNew lists the names of CalledTail that the turn had not called
	// before it, each once: what the latest step added to the task.
	TailNew []string
	// LastCalled lists the distinct names of the conversation's latest
	// calls, at most LastCalls of them, the most recently called last.
	// Called is in the order of first calls, which keeps the tools array
	// stable for a provider's prompt cache but says nothing of use: a
	// tool called in every step since the first is Called's first name
	// and LastCalled's last.
	LastCalled []string
	// turnIndex holds TurnCalled's names once it is longer than
	// scanTurnCalled, nil before: a history may call tens of thousands
	// of names in one turn, and a scan per call made parsing it quadratic.
	turnIndex map[string]struct{}
	// historyOver is set when the history calls more than
	// MaxHistoryNames names: Called and the lists after it stop there,
	// and HistoryErr refuses the request.
	historyOver bool

	// ChainsByID is true for an API whose client may continue a
	// conversation by naming an earlier response's id (the Responses
	// API's previous_response_id) instead of resending it; false for a
	// request that asks the upstream not to store its response.
	ChainsByID bool
	// Unstored is true for a Responses request with store false: the
	// upstream keeps none of its items, so none can go back by its id.
	Unstored bool
	// Previous is the response id the request continues from, if any.
	Previous string
	// PreviousUpstream, when set, is the upstream's id to continue from
	// instead: the gateway showed a streamed turn under its first
	// round's id, and the turn's context is in its last round's.
	PreviousUpstream string
	// PendingOutputs answer the gateway's own calls that the response
	// Previous names ended with (its last round called tool_search next
	// to a client tool, or had no round left): Continue puts them before
	// the input.
	PendingOutputs []ToolResult
	// Pinned are the tools of the request that are not functions (the
	// Responses API's built-in tools, web_search or mcp, and its custom
	// tools), raw: Tools leaves them out, and every upstream call carries
	// them as they are, since the loop neither searches nor answers them.
	Pinned []string
	// form is the shape of ToolsRaw's tools.
	form toolForm
	// Background is true when the upstream answers later (the Responses
	// API's background mode): the answer the gateway gets has no output
	// yet, and the client fetches it without the gateway's loop.
	Background bool
	// ServerConversation is true when the upstream appends the request
	// and its answer to a conversation it keeps (the Responses API's
	// conversation, the Messages API's thread): each of the gateway's
	// rounds would be written there.
	ServerConversation bool
}

// view returns a string that shares b's memory, so gjson results alias the
// body instead of copying it. b must not be modified afterwards.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// readTools reads the request's tools value, if any, from cache when it
// holds the array, in the form r.form.
func (r *Request) readTools(tools gjson.Result, cache ToolCache) error {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil
	}
	var known KnownTools
	ok := false
	if cache != nil {
		// Two complete arrays of which one begins the other are equal;
		// the length check only makes that plain.
		known, ok = cache.Lookup(tools.Raw)
		ok = ok && len(known.Raw) == len(tools.Raw)
	}
	if !ok {
		parsed, err := parseToolsAs(tools, false, r.form, keepDuplicates)
		if err != nil {
			return WithParam(pathTools, fmt.Errorf("%w: %w", ErrBadRequest, err))
		}
		known = KnownTools{Tools: parsed}
		if cache != nil {
			known = cache.Add(tools.Raw, parsed)
		}
	}
	r.Tools, r.ToolsRaw, r.ToolsKey, r.ToolsKnown = known.Tools, tools, known.Key, ok
	r.span.at, r.span.n = tools.Index, len(tools.Raw)
	return nil
}

// parseObject validates a request body, refusing invalid JSON, invalid
// UTF-8, nesting deeper than maxDepth and anything but an object, and
// returns its root, which aliases body.
func parseObject(body []byte) (gjson.Result, error) {
	// Depth first: it is iterative, while validation recurses.
	if d := depth(body); d > maxDepth {
		return gjson.Result{}, fmt.Errorf("%w: JSON nesting deeper than %d", ErrBadRequest, maxDepth)
	}
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, fmt.Errorf("%w: body is not valid JSON", ErrBadRequest)
	}
	if !utf8.Valid(body) {
		return gjson.Result{}, fmt.Errorf("%w: body is not valid UTF-8", ErrBadRequest)
	}
	root := gjson.Parse(view(body))
	if !root.IsObject() {
		return gjson.Result{}, fmt.Errorf("%w: body must be a JSON object", ErrBadRequest)
	}
	return root, nil
}

// readText notes a message's text by its role: the system prompt, the
// user's messages (each starts the turn again), the recent texts.
func (r *Request) readText(role string, content gjson.Result) {
	switch role {
	case "system", "developer":
		if r.System == "" {
			r.System = contentText(content)
		}
	case "user":
		t := contentText(content)
		if r.FirstUser == "" {
			r.FirstUser = t
		}
		r.LastUser = t
		r.Recent = appendBounded(r.Recent, t, 4)
		r.TurnCalled, r.TailNew, r.TurnSteps = r.TurnCalled[:0], r.TailNew[:0], 0
		clear(r.turnIndex)
	case "assistant":
		if t := contentText(content); t != "" {
			r.Recent = appendBounded(r.Recent, t, 4)
		}
	}
}

// startStep notes that the model made a step of calls.
func (r *Request) startStep() {
	r.CalledTail, r.TailNew = r.CalledTail[:0], r.TailNew[:0]
	r.TurnSteps++
}

// noteCall notes a call of the current step; seen holds the names called
// so far in the conversation.
func (r *Request) noteCall(name string, seen map[string]struct{}) {
	if name == "" || r.historyOver {
		return
	}
	if _, ok := seen[name]; !ok && len(seen) == MaxHistoryNames {
		r.historyOver = true
		return
	}
	r.CalledTail = append(r.CalledTail, name)
	if i := slices.Index(r.LastCalled, name); i >= 0 {
		r.LastCalled = append(slices.Delete(r.LastCalled, i, i+1), name)
	} else {
		r.LastCalled = appendBounded(r.LastCalled, name, LastCalls)
	}
	if !r.CalledInTurn(name) {
		r.TurnCalled = append(r.TurnCalled, name)
		r.TailNew = append(r.TailNew, name)
		switch {
		case r.turnIndex != nil:
			r.turnIndex[name] = struct{}{}
		case len(r.TurnCalled) > scanTurnCalled:
			r.turnIndex = make(map[string]struct{}, 2*len(r.TurnCalled))
			for _, n := range r.TurnCalled {
				r.turnIndex[n] = struct{}{}
			}
		}
	}
	if _, ok := seen[name]; !ok {
		seen[name] = struct{}{}
		r.Called = append(r.Called, name)
	}
}

// LastCalls bounds Request.LastCalled: as many as a session keeps of
// its recently called tools.
const LastCalls = 8

// MaxHistoryNames is how many distinct function names a conversation's
// calls may name, four times as many as a tools array may hold: a client
// that swaps MCP servers mid-conversation stays far below it, and every
// name read from the history costs a few hundred bytes of lists and
// indexes, so a body of calls of distinct names cost ten times its size.
const MaxHistoryNames = 16384

// HistoryErr refuses a request whose history calls more than
// MaxHistoryNames distinct names; nil for any other. The error wraps
// ErrBadRequest and names the conversation's parameter.
func (r *Request) HistoryErr() error {
	if !r.historyOver {
		return nil
	}
	param := pathMessages
	if r.form == formFlat {
		param = "input"
	}
	return WithParam(param, fmt.Errorf("%w: the conversation calls more than %d distinct function names; the gateway accepts at most %d", ErrBadRequest, MaxHistoryNames, MaxHistoryNames))
}

// scanTurnCalled is how long TurnCalled may grow before CalledInTurn
// looks names up in an index rather than scan it: a turn's few calls are
// found by a scan without allocating a map.
const scanTurnCalled = 16

// CalledInTurn reports whether name is in TurnCalled, in constant time
// however many names the turn called.
func (r *Request) CalledInTurn(name string) bool {
	if r.turnIndex != nil {
		_, ok := r.turnIndex[name]
		return ok
	}
	return slices.Contains(r.TurnCalled, name)
}

func appendBounded(s []string, v string, max int) []string {
	s = append(s, v)
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}

// contentText returns the text of a message content: a string, or the
// text parts of an array of content parts joined by newlines.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.String()
	}
	if !c.IsArray() {
		return ""
	}
	var b strings.Builder
	c.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Type == gjson.String {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.String())
		}
		return true
	})
	return b.String()
}

// depth returns the maximum nesting of arrays and objects in valid JSON,
// skipping strings. String bodies are skipped with IndexByte, which is
// several times faster than a byte loop on tool catalogs, where most bytes
// are descriptions.
func depth(b []byte) int {
	d, max := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i+1)
		case '{', '[':
			d++
			if d > max {
				max = d
			}
		case '}', ']':
			d--
		}
	}
	return max
}

// stringEnd returns the index of the quote closing the string whose body
// starts at i, or len(b) when it is unterminated.
func stringEnd(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		q := i + j
		// The quote is escaped when an odd run of backslashes precedes it.
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// ToolsWithParams returns the request's tools with their parameters read
// too, for compiling a catalog. It reparses ToolsRaw; on the (impossible
// after ParseRequest) parse error it returns Tools as they are.
func (r *Request) ToolsWithParams() []Tool {
	if len(r.Tools) == 0 {
		return r.Tools
	}
	full, err := parseToolsAs(r.ToolsRaw, true, r.form, keepDuplicates)
	if err != nil {
		return r.Tools
	}
	if len(r.Pinned) > 0 {
		full = functionsOnly(full)
	}
	return full
}

// functionsOnly returns the function tools of tools, in order.
func functionsOnly(tools []Tool) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		if t.Kind == "" {
			out = append(out, t)
		}
	}
	return out
}

// Detached reports whether the request holds no reference to the body it
// was parsed from (its tools array came from the ToolCache), so that body's
// memory may be reused once parsing returns.
func (r *Request) Detached() bool { return r.detached }

// Original returns the request as the client sent it: Body, or, when the
// tools array came from the cache, a copy of Body with the array put back.
func (r *Request) Original() []byte {
	if !r.detached {
		return r.Body
	}
	at, end := r.span.at, r.span.at+r.span.n
	out := make([]byte, 0, len(r.Body)-r.span.n+len(r.ToolsRaw.Raw))
	out = append(out, r.Body[:at]...)
	out = append(out, r.ToolsRaw.Raw...)
	return append(out, r.Body[end:]...)
}
