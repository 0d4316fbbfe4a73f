package rewrite

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// Tool is one tool of a request, read without copying its schema.
type Tool struct {
	Name        string
	Description string
	Params      []Param
	// Kind is "" for a function tool and the type of any other ("custom":
	// free-form input, a newer Chat Completions tool), whose name and
	// description are read from the object named by its type. It is its
	// own string: callers may keep it.
	Kind string
	// Deferred is true for a tool the client marks defer_loading: it runs
	// a tool search of its own (the provider's, or an SDK's).
	Deferred bool
	// Raw is the tool's JSON object as the client sent it; it may alias
	// the request body. Tools from a ToolCache may carry it without the
	// whitespace between tokens (the proxy's cache compacts them): the
	// same JSON value, and what is forwarded.
	Raw string
}

// Param is one top-level property of a tool's parameters schema.
type Param struct {
	Name        string
	Description string
}

// Errors that ParseTools returns; callers map them to 400s. A request's
// tools (ParseRequest) are not refused for ErrToolDuplicate: a request the
// gateway does not rewrite goes upstream as it came, and the upstream
// decides on two tools of one name.
var (
	ErrToolsNotArray   = errors.New("tools must be an array")
	ErrToolNoName      = errors.New("tool has no function name")
	ErrToolDuplicate   = errors.New("duplicate tool name")
	ErrToolNotAnObject = errors.New("tool must be an object")
)

// ParseTools reads an OpenAI Chat Completions tools array (each item
// {"type":"function","function":{name, description, parameters}}). It also
// accepts the bare function objects of the legacy/flat form
// ({name, description, parameters}) and tools of other types, such as
// {"type":"custom","custom":{name, description, format}}, marked by Kind.
// It expects valid JSON; it does not validate.
func ParseTools(arr gjson.Result) ([]Tool, error) { return parseTools(arr, true) }

// parseTools is ParseTools; without withParams it leaves Params empty,
// which skips most of the work on a large catalog: the schemas are only
// indexed when a catalog is compiled, not on every request.
func parseTools(arr gjson.Result, withParams bool) ([]Tool, error) {
	return parseToolsAs(arr, withParams, formChat, refuseDuplicates)
}

// toolForm is the shape of a dialect's tools array.
type toolForm uint8

const (
	// formChat is Chat Completions': {"type":"function","function":{...}},
	// or another type's object named by its type.
	formChat toolForm = iota
	// formFlat is the Responses API's: every tool flat
	// ({"type":"custom","name",...}), and a built-in tool
	// ({"type":"web_search"}) may have no name: it is kept, by its Kind.
	formFlat
	// formAnthropic is the Messages API's: a client tool is
	// {"name","description","input_schema"} (its type, if any, is
	// "custom"); any other type is a server tool, kept by its Kind.
	formAnthropic
)

// duplicates says what parseToolsAs does with a name two tools share.
type duplicates bool

const (
	// refuseDuplicates: ErrToolDuplicate, for a catalog, which a
	// selector cannot index with two tools of one name.
	refuseDuplicates duplicates = true
	// keepDuplicates: both tools, for a request, which then passes
	// through (the proxy's "duplicate tool names").
	keepDuplicates duplicates = false
)

// parseToolsAs is parseTools for tools of the given form.
func parseToolsAs(arr gjson.Result, withParams bool, form toolForm, dups duplicates) ([]Tool, error) {
	if !arr.IsArray() {
		return nil, ErrToolsNotArray
	}
	items := arr.Array()
	tools := make([]Tool, 0, len(items))
	var seen map[string]struct{}
	if dups == refuseDuplicates {
		seen = make(map[string]struct{}, len(items))
	}
	for i, it := range items {
		if !it.IsObject() {
			return nil, fmt.Errorf("tools[%d]: %w", i, ErrToolNotAnObject)
		}
		kind := it.Get("type").String()
		var fn gjson.Result
		switch {
		case form == formAnthropic && (kind == "" || kind == "custom"):
			kind, fn = "", it
		case kind == "" || kind == "function":
			kind = ""
			if fn = it.Get("function"); !fn.Exists() {
				fn = it
			}
		case form != formChat:
			fn = it
			kind = strings.Clone(kind)
		default:
			fn = member(it, kind)
			// Name and Raw alias the body, and caches rebase them; the
			// type is kept as its own string so nothing else pins it.
			kind = strings.Clone(kind)
		}
		// One pass over the function object instead of a Get per field,
		// each of which rescans it; first occurrences win, as with Get.
		var name, desc, params gjson.Result
		schema := "parameters"
		if form == formAnthropic {
			schema = "input_schema"
		}
		fn.ForEach(func(k, v gjson.Result) bool {
			switch {
			case k.Str == "name" && !name.Exists():
				name = v
			case k.Str == "description" && !desc.Exists():
				desc = v
			case k.Str == schema && !params.Exists():
				params = v
			}
			return true
		})
		// A name that is not a JSON string is no name.
		named := name.Type == gjson.String && name.Str != ""
		if !named && !(form != formChat && kind != "") {
			return nil, fmt.Errorf("tools[%d]: %w", i, ErrToolNoName)
		}
		if named && seen != nil {
			if _, dup := seen[name.String()]; dup {
				return nil, fmt.Errorf("tools[%d] %q: %w", i, name.String(), ErrToolDuplicate)
			}
			seen[name.String()] = struct{}{}
		}
		t := Tool{
			Name:        name.String(),
			Description: desc.String(),
			Kind:        kind,
			Raw:         it.Raw,
			Deferred:    defersLoading(it, fn, kind),
		}
		if !withParams {
			tools = append(tools, t)
			continue
		}
		params.Get("properties").ForEach(func(k, v gjson.Result) bool {
			t.Params = append(t.Params, Param{Name: k.String(), Description: v.Get("description").String()})
			return true
		})
		tools = append(tools, t)
	}
	return tools, nil
}

// DefersLoading reports whether the tool object raw (JSON) defers the
// loading of any tool it defines, as a client that runs a tool search of
// its own does (see defersLoading).
func DefersLoading(raw string) bool {
	it := gjson.Parse(raw)
	return defersLoading(it, it.Get("function"), it.Get("type").String())
}

// defersLoading reports whether tool it (fn its function object, kind its
// type) marks defer_loading, at its top level (a function of the
// Responses or Messages API, an OpenAI mcp tool), on its function object
// (Chat Completions' form), or on a tool it groups. The grouped forms
// are read from the SDKs, not guessed: openai-go v3.96.0's
// responses.NamespaceToolParam ({"type":"namespace","tools":[...]}, whose
// function and custom members carry defer_loading) and
// anthropic-sdk-go v2.15.0's BetaMCPToolsetParam ({"type":"mcp_toolset"},
// with default_config.defer_loading for every tool of the server and
// configs.<tool>.defer_loading for one).
func defersLoading(it, fn gjson.Result, kind string) bool {
	// The scan for the word spares the lookups on the tools without it,
	// which are all of them but for such a client.
	if !strings.Contains(it.Raw, "defer_loading") {
		return false
	}
	if it.Get("defer_loading").Bool() || fn.Get("defer_loading").Bool() {
		return true
	}
	deferred := false
	anyDefers := func(_, v gjson.Result) bool {
		deferred = v.Get("defer_loading").Bool()
		return !deferred
	}
	switch kind {
	case "namespace":
		member(it, "tools").ForEach(anyDefers)
	case "mcp_toolset":
		deferred = member(it, "default_config").Get("defer_loading").Bool()
		if !deferred {
			member(it, "configs").ForEach(anyDefers)
		}
	}
	return deferred
}

// ProviderSearchType reports whether kind is the type of a provider's
// hosted tool search tool: the Responses API's {"type":"tool_search"}
// (openai-go v3.96.0, responses.ToolSearchToolParam, executed by the
// server or the client) and the Messages API's tool search tools
// (anthropic-sdk-go v2.15.0, ToolSearchToolRegex20251119Param and
// ToolSearchToolBm25_20251119Param: types tool_search_tool_regex,
// tool_search_tool_bm25 and their dated versions, _20251119 so far; a
// later date is taken to name the same tool).
func ProviderSearchType(kind string) bool {
	return kind == "tool_search" ||
		strings.HasPrefix(kind, "tool_search_tool_regex") ||
		strings.HasPrefix(kind, "tool_search_tool_bm25")
}

// member returns the value of obj's first member named key. Unlike Get it
// reads key as a name, never as a path: a tool's type comes from the
// client and may hold any character.
func member(obj gjson.Result, key string) gjson.Result {
	var v gjson.Result
	obj.ForEach(func(k, val gjson.Result) bool {
		if k.Str == key {
			v = val
			return false
		}
		return true
	})
	return v
}

// FirstLine returns the first sentence-ish line of a description, trimmed to
// at most max runes, for compact listings.
func FirstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	r := []rune(s)
	if max > 0 && len(r) > max {
		return strings.TrimSpace(string(r[:max-1])) + "…"
	}
	return s
}

// ParseCatalog reads a catalog file's bytes: either {catalog id: [tools]}
// (the shared eval format) or a plain tools array, returned under the id "".
func ParseCatalog(data []byte) (map[string][]Tool, error) {
	if !gjson.ValidBytes(data) {
		return nil, errors.New("catalog is not valid JSON")
	}
	root := gjson.ParseBytes(data)
	out := map[string][]Tool{}
	if root.IsArray() {
		tools, err := ParseTools(root)
		out[""] = tools
		return out, err
	}
	if !root.IsObject() {
		return nil, errors.New("catalog must be a tools array or an object of tools arrays")
	}
	var ferr error
	root.ForEach(func(k, v gjson.Result) bool {
		tools, err := ParseTools(v)
		if err != nil {
			ferr = fmt.Errorf("catalog %q: %w", k.String(), err)
			return false
		}
		out[k.String()] = tools
		return true
	})
	return out, ferr
}
