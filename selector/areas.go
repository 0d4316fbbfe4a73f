package selector

import "strings"

// areaLabel returns the label a tool counts for among a catalog's areas:
// its server or name prefix, or, when that prefix is an action verb
// ("get_stock_price", "list_notifications"), the word after it. An MCP
// catalog without categories otherwise summed up as "get, list, search,
// create, add": words every catalog has, which tell a model nothing about
// what it can find.
func areaLabel(name string) string {
	p := strings.ToLower(namePrefix(name))
	if p == "" || !isActionVerb(p) {
		return p
	}
	rest := name[len(p):]
	rest = strings.TrimLeft(rest, "_")
	if i := strings.IndexByte(rest, '_'); i >= 0 {
		rest = rest[:i]
	}
	return strings.ToLower(rest)
}

// isActionVerb reports whether word is a verb tool names start with,
// which names no area.
func isActionVerb(word string) bool {
	switch word {
	case "add", "analyze", "append", "apply", "archive", "build", "calculate", "call", "cancel", "check",
		"clear", "click", "close", "compare", "convert", "copy", "count", "create", "delete", "deploy",
		"disable", "download", "draw", "edit", "enable", "execute", "export", "extract", "fetch", "fill",
		"filter", "find", "format", "generate", "get", "import", "insert", "list", "load", "lookup", "make",
		"merge", "move", "navigate", "open", "parse", "post", "publish", "put", "query", "read", "remove",
		"rename", "reset", "restore", "retrieve", "run", "save", "schedule", "search", "send", "set", "show",
		"sort", "start", "stop", "submit", "summarize", "sync", "take", "test", "toggle", "translate",
		"trigger", "update", "upload", "validate", "view", "write":
		return true
	}
	return false
}
