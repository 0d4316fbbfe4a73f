package proxy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/selector"
)

// SearchToolName is the name of the tool the gateway answers itself.
const SearchToolName = "tool_search"

// AltSearchToolName names the gateway's search tool in a request whose
// client shows the model a tool of its own named tool_search: the gateway
// never shadows a client's tool (the upstream would get two tools of one
// name, which providers refuse, and the client would never get its calls),
// and passing such a request through unchanged gave up every saving.
const AltSearchToolName = "toolgate_search"

// maxSearchLimit bounds the limit a model may ask of one search.
const maxSearchLimit = 10

// searchTool returns the search tool's definition for a catalog, under
// name: its description names the catalog's areas so the model knows what
// it can find. The definition rides along in every round of every turn, so
// each word in it is paid for on every upstream call: it says what to do,
// how to write a query and what a repeat does, and no more (203 -> 148
// o200k tokens at 120 tools and eight areas; the scripted episodes' input
// tokens fell 0.4 points of direct).
func searchTool(name string, total, limit int, areas []string) string {
	desc := fmt.Sprintf("Only a few of your %d tools are loaded. To use one not in your list, search for it, "+
		"then call what it finds. Query: short English keywords, action and object (\"create issue\", "+
		"\"send message\"), whatever the user's language. One search per need; the same query again returns the next matches.", total)
	if len(areas) > 0 {
		desc += " Areas: " + strings.Join(areas, ", ") + "."
	}
	def := map[string]any{
		"type": "function",
		"function": map[string]any{
			"name":        name,
			"description": desc,
			"parameters": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"query": map[string]any{"type": "string", "description": "English keywords."},
					"limit": map[string]any{"type": "integer", "description": fmt.Sprintf("How many tools (default %d, at most %d).", limit, maxSearchLimit)},
				},
				"required":             []string{"query"},
				"additionalProperties": false,
			},
		},
	}
	b, _ := json.Marshal(def)
	return string(b)
}

// searchDefinition returns the tool_search definition for a compiled
// catalog, built once per catalog and limit: it is the same bytes on every
// turn that resends the catalog.
func (g *Gateway) searchDefinition(catKey, name string, total, limit int, cat *selector.Catalog) string {
	key := catKey + "/" + strconv.Itoa(limit) + "/" + name
	if def, ok := g.searchDefs.Get(key); ok {
		return def
	}
	def := searchTool(name, total, limit, cat.Areas(8))
	g.searchDefs.Add(key, def)
	return def
}

// searchArgs reads tool_search arguments leniently: models sometimes send a
// bare string or an unknown field; the query is what matters.
type searchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

func parseSearchArgs(raw string) searchArgs {
	var a searchArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			a.Query = s
		} else {
			a.Query = raw
		}
	}
	a.Query = strings.TrimSpace(a.Query)
	return a
}

// formatResults writes the tool message that answers a search: the tools
// now callable with their hints, the workflow guidance of their
// categories, and what to do when the matches are weak. It names the
// tools without their descriptions: the round that reads it carries their
// whole definitions in its tools array, and a description here would be
// paid for twice.
func formatResults(query string, res selector.Results, hints func(category string) string) string {
	var b strings.Builder
	if len(res.Items) == 0 {
		fmt.Fprintf(&b, "No new tools matched %q. Try other English keywords (the action and the object), or answer without a tool.", query)
		return b.String()
	}
	fmt.Fprintf(&b, "Found %d tool(s) for %q, now in your tool list; call them directly:\n", len(res.Items), query)
	var cats []string
	for _, it := range res.Items {
		fmt.Fprintf(&b, "- %s", it.Name)
		if it.Hint != "" {
			fmt.Fprintf(&b, " (hint: %s)", it.Hint)
		}
		b.WriteByte('\n')
		if it.Category != "" && !contains(cats, it.Category) {
			cats = append(cats, it.Category)
		}
	}
	if hints != nil {
		for _, c := range cats {
			if h := strings.TrimSpace(hints(c)); h != "" {
				fmt.Fprintf(&b, "\nGuidance for %s:\n%s\n", c, h)
			}
		}
	}
	// A confident match needs no advice; a weaker one says what to do
	// if it does not fit.
	if res.Confidence < 0.3 {
		b.WriteString("\nWeak matches: if none fits, search again with different or more specific keywords.")
	} else if res.Confidence < 0.6 {
		b.WriteString("\nIf none of these fits, search again with different keywords.")
	}
	return b.String()
}
