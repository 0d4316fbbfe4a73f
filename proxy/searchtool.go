package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// SearchToolName is the name of the tool the gateway answers itself.
const SearchToolName = "tool_search"

// AltSearchToolName names the gateway's search tool in a request whose
// client shows the model a tool of its own named tool_search: the gateway
// never shadows a client's tool (the upstream would get two tools of one
// name, which providers refuse, and the client would never get its calls),
// and passing such a request through unchanged would give up every
// saving.
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
	var def searchToolDef
	def.Type = "function"
	def.Function.Name, def.Function.Description = name, desc
	p := &def.Function.Parameters
	p.Type, p.Required = "object", []string{"query"}
	p.Properties.Query = searchParam{Type: "string", Description: "English keywords."}
	p.Properties.Limit = searchParam{Type: "integer", Description: fmt.Sprintf("How many tools (default %d, at most %d).", limit, maxSearchLimit)}
	b, _ := json.Marshal(def) // strings and a slice: nothing to fail on
	return string(b)
}

// searchToolDef is the search tool's definition in the Chat Completions
// form. Its members stand in the order encoding/json sorts a map's keys
// in, as the definition was first built from maps: upstream prompt caches
// hold its bytes, and a new order would cost every cached prefix once.
type searchToolDef struct {
	Function struct {
		Description string `json:"description"`
		Name        string `json:"name"`
		Parameters  struct {
			AdditionalProperties bool `json:"additionalProperties"`
			Properties           struct {
				Limit searchParam `json:"limit"`
				Query searchParam `json:"query"`
			} `json:"properties"`
			Required []string `json:"required"`
			Type     string   `json:"type"`
		} `json:"parameters"`
	} `json:"function"`
	Type string `json:"type"`
}

// searchParam is one parameter of the search tool.
type searchParam struct {
	Description string `json:"description"`
	Type        string `json:"type"`
}

// searchDefinition returns the tool_search definition for a compiled
// catalog in dialect d's form, built once per catalog, limit and dialect:
// it is the same bytes on every turn that resends the catalog.
func (g *Gateway) searchDefinition(catKey, name string, total, limit int, cat *selector.Catalog, d rewrite.Dialect) (string, error) {
	key := catKey + "/" + strconv.Itoa(limit) + "/" + name + "/" + dialectName(d)
	if def, ok := g.searchDefs.Get(key); ok {
		return def, nil
	}
	def, err := d.OwnTool(searchTool(name, total, limit, cat.Areas(8)))
	if err != nil {
		return "", fmt.Errorf("writing the %s definition: %w", name, err)
	}
	g.searchDefs.Add(key, def)
	return def, nil
}

// searchLimit is how many tools a search returns when the model does not
// say: search.limit, widened for a large catalog.
func (t *turn) searchLimit() int {
	if n := t.snap.SearchLimitFor(len(t.req.Tools)); n > 0 {
		return min(n, maxSearchLimit)
	}
	return 5
}

func (t *turn) search(ctx context.Context, raw string) string {
	t.searches++
	a := parseSearchArgs(raw)
	if !hasWord(a.Query) {
		t.noteSearch(a.Query, nil, -1, searchEmptyQuery)
		return "Error: " + t.searchName + " needs a non-empty \"query\" of English keywords."
	}
	// A search whose finds the round cannot keep would list tools that
	// bound then evicts: the model would call tools it is not offered. It
	// says so instead, before ranking anything.
	if t.room() == 0 {
		t.noteSearch(a.Query, nil, -1, searchListFull)
		return t.fullAnswer()
	}
	asked := t.ask(a.Query)
	if asked == t.lastAsked {
		// Asking at once again what was just asked means the tools found
		// did not do: the rounds after it no longer offer them (offered).
		// Asked again after another search, they may be what the model
		// is back for: they stay.
		for _, name := range asked.finds {
			mark(&t.passed, name)
		}
	}
	t.lastAsked = asked
	limit := a.Limit
	if limit <= 0 {
		// Each repeat of a query this turn widens the default by
		// another batch.
		limit = t.searchLimit() * asked.times
	}
	limit = min(limit, maxSearchLimit)
	// The round that answers this search offers what it finds, not the
	// turn's other guesses (see offered), so guesses are ranked too: one
	// the model overlooked must be findable. They come on top of the limit,
	// which counts new tools only, so a search finds as many new tools as
	// it did when it skipped every active one. The tools already in the
	// model's list are ranked as well (see newUpTo).
	active := 0
	for name, reason := range t.reasons {
		if reason != "" && !t.searched[name] {
			active++
		}
	}
	start := time.Now()
	res, err := t.cat.Search(ctx, t.query(a.Query, limit+active))
	took := time.Since(start)
	if err != nil {
		t.noteSearch(a.Query, nil, took, searchFailed)
		t.g.logger().Log(ctx, failureLevel(ctx), "searching tools", "query", shortened(a.Query), "err", err)
		return "Error: the search failed; try again with other keywords."
	}
	var listed []string
	res.Items, listed = t.newUpTo(res.Items, limit)
	for _, name := range listed {
		mark(&t.listed, name)
	}
	// A bundle the query names fills the answer up to the limit the model
	// asked for, else up to the most one search returns.
	var bundles []policy.Bundle
	res.Items, bundles = t.withBundles(a.Query, res.Items, cmp.Or(a.Limit, maxSearchLimit))
	if room := t.room(); room >= 0 && len(res.Items) > room {
		// More than max_active keeps would be listed as callable and
		// then evicted (bound): the best ranked stay.
		res.Items = res.Items[:room]
	}
	// Noted once the bundles and the cut have had their say: an operator
	// asking why the model did not see a tool needs the list the answer
	// offered, not the ranking before it was changed.
	t.noteSearch(a.Query, res.Items, took, "")
	for _, it := range res.Items {
		t.join(it.Name, reasonDiscovered)
		mark(&t.found, it.Name)
		mark(&t.searched, it.Name)
		asked.finds = append(asked.finds, it.Name)
	}
	return formatResults(a.Query, res, listed, bundleLines(bundles, res.Items), t.unreadHints)
}

// askedQuery is what the searches of a turn with one query (case and
// spacing aside) did: how many there were, and what they returned.
type askedQuery struct {
	times int
	finds []string
}

// ask records a search of query and returns the turn's record of it,
// this search counted.
func (t *turn) ask(query string) *askedQuery {
	if t.asked == nil {
		t.asked = map[string]*askedQuery{}
	}
	k := strings.Join(strings.Fields(strings.ToLower(query)), " ")
	q := t.asked[k]
	if q == nil {
		q = &askedQuery{}
		t.asked[k] = q
	}
	q.times++
	return q
}

// dialectName is d's name (rewrite.Named), or its type's for a dialect
// that says none, so two dialects never share a cached definition.
func dialectName(d rewrite.Dialect) string {
	if n, ok := d.(rewrite.Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", d)
}
