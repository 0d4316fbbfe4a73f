package rewrite

import (
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
	pathToolChoice   = "tool_choice"
	pathN            = "n"
	pathFunctions    = "functions"
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

	// Tools is nil when the request has no tools array.
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
func ParseRequest(body []byte) (*Request, error) {
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
	msgs := root.Get(pathMessages)
	if !msgs.IsArray() {
		return nil, fmt.Errorf("%w: 'messages' must be an array", ErrBadRequest)
	}
	r.Model = root.Get(pathModel).String()
	r.Stream = root.Get(pathStream).Bool()
	r.IncludeUsage = root.Get(pathIncludeUsage).Bool()
	r.N = root.Get(pathN).Int()
	r.HasFunctions = root.Get(pathFunctions).Exists()
	if tc := root.Get(pathToolChoice); tc.IsObject() {
		r.ToolChoice = tc.Get("function.name").String()
	}
	if tools := root.Get(pathTools); tools.Exists() && tools.Type != gjson.Null {
		parsed, err := ParseTools(tools)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
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
// skipping strings.
func depth(b []byte) int {
	d, max := 0, 0
	in, esc := false, false
	for _, c := range b {
		if in {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
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
