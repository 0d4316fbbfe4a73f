package rewrite

import (
	"bytes"
	"errors"
	"fmt"
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
)

// MaxDepth bounds the nesting of a request body; deeper input is rejected
// before any path lookup walks it.
const MaxDepth = 128

// ErrBadRequest wraps every reason a request body is refused; callers map it
// to a 400 with the wrapped message.
var ErrBadRequest = errors.New("invalid request")

// Request is what the gateway reads from a Chat Completions request body. Its
// string fields alias the body: the body must not change while it is in use.
type Request struct {
	Body         []byte
	Model        string
	Stream       bool
	IncludeUsage bool
	N            int64
	HasFunctions bool // legacy "functions": passed through untouched

	// Tools is nil when the request has no tools array. Their Params are
	// not read (the request path never needs them); ToolsWithParams reads
	// them for a catalog compile.
	Tools    []Tool
	ToolsRaw gjson.Result // the tools array; Index locates it in Body

	// ToolChoice is the name forced by tool_choice, if any.
	ToolChoice string

	// Called lists the function names called in the history, first call first,
	// each once.
	Called []string

	System    string // the first system or developer message's text
	FirstUser string // the first user message's text
	LastUser  string // the latest user message's text
	// UserTurn is true when the latest message is from the user: a new turn,
	// not a tool result coming back.
	UserTurn bool
	// Recent holds the text of the last few user and assistant messages,
	// oldest first, for ranking context.
	Recent []string
	// CalledTail lists the function names of the last assistant message that
	// made tool calls, the most recent signal of what the agent is doing.
	CalledTail []string
}

// view returns a string that shares b's memory, so gjson results alias the
// body instead of copying it. b must not be modified afterwards.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// ParseRequest validates a Chat Completions request body and reads what the
// gateway needs. It rejects invalid JSON, invalid UTF-8, nesting deeper than
// MaxDepth, a missing messages array, and a malformed tools array, each with
// an error wrapping ErrBadRequest.
func ParseRequest(body []byte) (*Request, error) { return ParseRequestCached(body, nil) }

// ToolCache remembers parsed tools arrays by their exact text, so a client
// that resends the same catalog every turn has it parsed once. Get must only
// return tools parsed from exactly raw; implementations must be safe for
// concurrent use and must copy raw before keeping it (it aliases a body).
type ToolCache interface {
	Get(raw string) ([]Tool, bool)
	Add(raw string, tools []Tool)
}

// ParseRequestCached is ParseRequest with the tools array looked up in
// cache first (nil: always parsed). A cached array was validated when it
// was first parsed; the body is validated in full either way.
func ParseRequestCached(body []byte, cache ToolCache) (*Request, error) {
	if cache != nil {
		if r, ok, err := parseKnownTools(body, cache); ok {
			return r, err
		}
	}
	// Depth first: it is iterative, while validation recurses.
	if d := depth(body); d > MaxDepth {
		return nil, fmt.Errorf("%w: JSON nesting deeper than %d", ErrBadRequest, MaxDepth)
	}
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: body is not valid JSON", ErrBadRequest)
	}
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: body is not valid UTF-8", ErrBadRequest)
	}
	s := view(body)
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, fmt.Errorf("%w: body must be a JSON object", ErrBadRequest)
	}
	r := &Request{Body: body}
	// One pass over the top-level keys: a Get per path would rescan the
	// body, tools array included, for every key that is absent. The first
	// occurrence of a key wins, as with Get.
	var msgs, tools, opts, choice gjson.Result
	seen := 0
	root.ForEach(func(k, v gjson.Result) bool {
		bit := 0
		switch k.Str {
		case pathMessages:
			bit = 1
			if seen&bit == 0 {
				msgs = v
			}
		case pathModel:
			bit = 2
			if seen&bit == 0 {
				r.Model = v.String()
			}
		case pathStream:
			bit = 4
			if seen&bit == 0 {
				r.Stream = v.Bool()
			}
		case pathStreamOptions:
			bit = 8
			if seen&bit == 0 {
				opts = v
			}
		case pathN:
			bit = 16
			if seen&bit == 0 {
				r.N = v.Int()
			}
		case pathFunctions:
			r.HasFunctions = true
		case pathToolChoice:
			bit = 32
			if seen&bit == 0 {
				choice = v
			}
		case pathTools:
			bit = 64
			if seen&bit == 0 {
				tools = v
			}
		}
		seen |= bit
		return true
	})
	if !msgs.IsArray() {
		return nil, fmt.Errorf("%w: 'messages' must be an array", ErrBadRequest)
	}
	r.IncludeUsage = opts.Get(pathIncludeUsageKey).Bool()
	if choice.IsObject() {
		r.ToolChoice = choice.Get("function.name").String()
	}
	if tools.Exists() && tools.Type != gjson.Null {
		parsed, ok := []Tool(nil), false
		if cache != nil {
			parsed, ok = cache.Get(tools.Raw)
		}
		if !ok {
			var err error
			if parsed, err = parseTools(tools, false); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
			}
			if cache != nil {
				cache.Add(tools.Raw, parsed)
			}
		}
		r.Tools, r.ToolsRaw = parsed, tools
	}
	readMessages(r, msgs)
	return r, nil
}

// readMessages fills the conversation-derived fields in one pass.
func readMessages(r *Request, msgs gjson.Result) {
	seen := map[string]struct{}{}
	var last string
	msgs.ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role").String()
		last = role
		switch role {
		case "system", "developer":
			if r.System == "" {
				r.System = Text(m.Get("content"))
			}
		case "user":
			t := Text(m.Get("content"))
			if r.FirstUser == "" {
				r.FirstUser = t
			}
			r.LastUser = t
			r.Recent = appendBounded(r.Recent, t, 4)
		case "assistant":
			if t := Text(m.Get("content")); t != "" {
				r.Recent = appendBounded(r.Recent, t, 4)
			}
			calls := m.Get("tool_calls")
			if calls.IsArray() && len(calls.Array()) > 0 {
				r.CalledTail = r.CalledTail[:0]
			}
			calls.ForEach(func(_, c gjson.Result) bool {
				name := c.Get("function.name").String()
				if name == "" {
					return true
				}
				r.CalledTail = append(r.CalledTail, name)
				if _, ok := seen[name]; !ok {
					seen[name] = struct{}{}
					r.Called = append(r.Called, name)
				}
				return true
			})
		}
		return true
	})
	r.UserTurn = last == "user"
}

func appendBounded(s []string, v string, max int) []string {
	s = append(s, v)
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}

// Text returns the text of a message content: a string, or the text parts of
// an array of content parts joined by newlines.
func Text(c gjson.Result) string {
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
	full, err := ParseTools(r.ToolsRaw)
	if err != nil {
		return r.Tools
	}
	return full
}

// knownToolsMin is the size from which a cached tools array is worth
// skipping during validation.
const knownToolsMin = 4 << 10

// parseKnownTools handles the common case of a resent catalog: when the
// candidate tools array (found by an unvalidated lookup) is byte for byte
// one the cache holds, it was validated when first seen, so only the rest of
// the body is validated and parsed, with "[]" standing in for the array.
// The substitution is sound only if the stand-in is the top-level tools
// value of the valid rest, which is checked. ok is false when the fast path
// does not apply; the caller then does the full parse.
func parseKnownTools(body []byte, cache ToolCache) (r *Request, ok bool, err error) {
	tools := gjson.Get(view(body), pathTools)
	end := tools.Index + len(tools.Raw)
	if len(tools.Raw) < knownToolsMin || tools.Index <= 0 || end > len(body) || !tools.IsArray() {
		return nil, false, nil
	}
	known, hit := cache.Get(tools.Raw)
	if !hit {
		return nil, false, nil
	}
	rest := make([]byte, 0, len(body)-len(tools.Raw)+2)
	rest = append(rest, body[:tools.Index]...)
	rest = append(rest, "[]"...)
	rest = append(rest, body[end:]...)
	r, err = ParseRequestCached(rest, nil)
	if err != nil {
		return nil, true, err
	}
	if r.ToolsRaw.Index != tools.Index || r.ToolsRaw.Raw != "[]" {
		return nil, false, nil // the stand-in is not where the tools are
	}
	r.Body, r.Tools, r.ToolsRaw = body, known, tools
	return r, true, nil
}
