package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
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
// catalog in dialect d's form, built once per catalog, limit and dialect:
// it is the same bytes on every turn that resends the catalog.
func (g *Gateway) searchDefinition(catKey, name string, total, limit int, cat *selector.Catalog, d rewrite.Dialect) (string, error) {
	key := catKey + "/" + strconv.Itoa(limit) + "/" + name + "/" + reflect.TypeOf(d).Name()
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

// searchArgs are a tool_search call's arguments.
type searchArgs struct {
	Query string
	Limit int
}

// maxQueryLen bounds the query a search answer repeats back to the model
// (the ranking reads a long one's head and tail: selector.clip).
const maxQueryLen = 200

// parseSearchArgs reads tool_search arguments leniently: models send a
// bare string, a number for the query, a limit as a string or a float,
// unknown fields, text after the object or a second object, the object
// encoded once more as a JSON string, a list of queries. The query is
// what matters; a limit that is not a number is ignored. Arguments that
// are not JSON are the query.
func parseSearchArgs(raw string) searchArgs {
	v, ok := firstJSON(raw)
	if !ok {
		return searchArgs{Query: strings.TrimSpace(raw)}
	}
	a := argsOf(v, 0)
	a.Query = strings.TrimSpace(a.Query)
	return a
}

// firstJSON returns the JSON in s: all of s, or the object s starts with
// when text follows it. Read whole, such arguments were the query as JSON
// text, and its words ("query", "limit") matched tools named after them.
// Only an object is read out of a longer text: "null pointer" or
// "404 page" is a query that starts like JSON.
func firstJSON(s string) (gjson.Result, bool) {
	if gjson.Valid(s) {
		return gjson.Parse(s), true
	}
	var first json.RawMessage
	if err := json.NewDecoder(strings.NewReader(s)).Decode(&first); err != nil {
		return gjson.Result{}, false
	}
	v := gjson.ParseBytes(first)
	return v, v.IsObject()
}

// maxArgsDepth bounds how deep argsOf looks into nested lists and wrapped
// objects: a model's arguments nest one or two levels; a megabyte of
// brackets must not cost a megabyte of stack.
const maxArgsDepth = 4

// querySep joins the parts of a query sent as a list: a seam the
// selector's multi-part ranking (decompose, when on) splits on, so each
// part can bring its own best tools.
const querySep = "; "

// argsOf reads the search arguments in v: an object's query and limit; a
// string's text, or the object it encodes; a list's parts, each read the
// same way, joined into one query; a number's text. A model that sends
// a list asked for all of it in one search: answering with an error cost
// it a round.
func argsOf(v gjson.Result, depth int) searchArgs {
	var a searchArgs
	if depth > maxArgsDepth {
		return a
	}
	switch {
	case v.IsObject():
		q := v.Get("query")
		if !q.Exists() && depth == 0 {
			// The arguments themselves only: an object in a list of
			// queries is read by its query, as before.
			q = onlyText(v)
		}
		// An object for the query is none: which of its fields is the
		// query would be a guess.
		if !q.IsObject() {
			a.Query = argsOf(q, depth+1).Query
		}
		if l := v.Get("limit"); l.Type == gjson.Number {
			a.Limit = int(min(max(l.Float(), 0), maxSearchLimit))
		} else if n, err := strconv.Atoi(strings.TrimSpace(l.String())); err == nil && l.Type == gjson.String {
			a.Limit = min(max(n, 0), maxSearchLimit)
		}
	case v.IsArray():
		var parts []string
		for _, e := range v.Array() {
			if q := strings.TrimSpace(argsOf(e, depth+1).Query); q != "" {
				parts = append(parts, q)
			}
		}
		a.Query = strings.Join(parts, querySep)
	case v.Type == gjson.String:
		if inner, ok := firstJSON(strings.TrimSpace(v.Str)); ok && inner.IsObject() {
			// The same arguments, encoded once more: read at the same
			// depth, as the object they are. Each object's query is read
			// a level deeper, so the bound still holds.
			return argsOf(inner, depth)
		}
		a.Query = v.Str
	case v.Type == gjson.Number:
		a.Query = v.String()
	}
	return a
}

// onlyText returns the one member of the object v, limit aside, that is
// text (a string, or a list of strings), or nothing when there is no such
// member or more than one. Small models rename parameters ({"q": ...},
// {"keywords": ...}, {"search_query": ...}, {"queries": [...]}); the
// error that answered them cost a round, and an object with a single text
// leaves no doubt which is the query.
func onlyText(v gjson.Result) gjson.Result {
	var text gjson.Result
	n := 0
	v.ForEach(func(k, m gjson.Result) bool {
		if k.Str == "limit" || !isText(m) {
			return true
		}
		text, n = m, n+1
		return n < 2
	})
	if n != 1 {
		return gjson.Result{}
	}
	return text
}

// isText reports whether v is a string or a non-empty list of strings.
func isText(v gjson.Result) bool {
	if v.Type == gjson.String {
		return true
	}
	if !v.IsArray() {
		return false
	}
	n, all := 0, true
	v.ForEach(func(_, e gjson.Result) bool {
		n++
		all = e.Type == gjson.String
		return all
	})
	return n > 0 && all
}

// formatResults writes the tool message that answers a search: the tools
// it found already in the model's list (listed), in one line; the tools
// now callable with their hints; the workflow guidance of the top
// result's category (hints returns "" for one the model has read); and
// what to do when the matches are weak. It names the tools without their
// descriptions: the round that reads it carries their whole definitions
// in its tools array, and a description here would be paid for twice.
// Guidance is most of an answer's tokens (a category's runs to ~200), so
// only the tool the model is likeliest to call brings its own: the
// runner-ups' categories were most of it, for tools seldom called.
func formatResults(query string, res selector.Results, listed []string, hints func(category string) string) string {
	var b strings.Builder
	query = shortened(query)
	if len(listed) > 0 {
		names := make([]string, len(listed))
		for i, n := range listed {
			names[i] = oneLine(n)
		}
		fmt.Fprintf(&b, "Already in your tool list: %s.\n", strings.Join(names, ", "))
	}
	if len(res.Items) == 0 {
		if len(listed) > 0 {
			fmt.Fprintf(&b, "No other tools matched %q.", query)
			return b.String()
		}
		fmt.Fprintf(&b, "No new tools matched %q. Try other English keywords (the action and the object), or answer without a tool.", query)
		return b.String()
	}
	fmt.Fprintf(&b, "Found %d tool(s) for %q, now in your tool list; call them directly:\n", len(res.Items), query)
	for _, it := range res.Items {
		fmt.Fprintf(&b, "- %s", oneLine(it.Name))
		if it.Hint != "" {
			fmt.Fprintf(&b, " (hint: %s)", it.Hint)
		}
		b.WriteByte('\n')
	}
	if c := res.Items[0].Category; c != "" && hints != nil {
		if h := strings.TrimSpace(hints(c)); h != "" {
			fmt.Fprintf(&b, "\nGuidance for %s:\n%s\n", c, h)
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
	res.Items = t.withBundles(a.Query, res.Items, cmp.Or(a.Limit, maxSearchLimit))
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
	return formatResults(a.Query, res, listed, t.unreadHints)
}

// unreadHints returns a category's guidance the first time a search of
// this turn shows it, and "" after: every later round resends the answer
// that carried it, so repeating it would only pay for it twice.
func (t *turn) unreadHints(category string) string {
	if t.guided[category] {
		return ""
	}
	h := t.snap.Hints(category)
	if h != "" {
		mark(&t.guided, category)
	}
	return h
}

// fullAnswer answers a search that can add no tool to the round's list
// (see room), with what the model can still do: when the tools that are
// never evicted fill max_active, no search of this request can add one;
// when this round's earlier searches took the last places, the next
// round's search can, as their finds then make way.
func (t *turn) fullAnswer() string {
	if len(t.pinned) >= t.snap.Gateway.MaxActive {
		return fmt.Sprintf("Your tool list is full (at most %d tools, all needed for this request): no search can add a tool now. "+
			"Do not search again; use the tools offered, or answer without a tool.", t.snap.Gateway.MaxActive)
	}
	return fmt.Sprintf("Your tool list is full for this step (at most %d tools): this step's other searches took its last places. "+
		"Use the tools they found; if none fits, search again in your next step.", t.snap.Gateway.MaxActive)
}

// hasWord reports whether a query has a letter or a digit: one of only
// zero-width spaces or punctuation finds nothing, and searched it would
// list arbitrary tools as found.
func hasWord(q string) bool {
	return strings.IndexFunc(q, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// newUpTo cuts ranked search results after their limit-th new tool; the
// guesses ranked above it stay, on top of the limit. Listed are the tools
// already in the model's list (kept, or any active one where search
// rounds offer every tool) that lead the ranking: the model searched for
// a tool it has (one it called earlier, say), and the answer says so in a
// line, on top of the limit too. Taking a new tool's place each, they
// cost the scripted model steps when it searches with a task's whole
// text (LiveMCPBench over 120 tools, 39 -> 37 of 73). Such tools ranked
// below a new one are left out: named there, they cost calls
// (LiveMCPBench over 120 tools, 1.28x -> 1.31x) or words for tools the
// model did not ask for.
func (t *turn) newUpTo(items []selector.Result, limit int) (found []selector.Result, listed []string) {
	counted := 0
	for _, it := range items {
		if counted == limit {
			break
		}
		switch {
		case !t.isActive(it.Name):
			counted++
		case !t.searchable(it.Name):
			if len(found) == 0 {
				listed = append(listed, it.Name)
			}
			continue
		}
		found = append(found, it)
	}
	return found, listed
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

// withBundles adds to the ranked search results the tools of every bundle
// the query names (by its name, as a word), so that asking for "browser"
// tools gets the browser bundle whole, up to limit tools in all. The
// ranked results lead, in their order: the bundle's members among them are
// its best matches for the query, where catalog order put the first ten
// members ahead of "take a browser screenshot"'s browser_screenshot, the
// twelfth. The rest of the bundle follows in catalog order.
func (t *turn) withBundles(query string, items []selector.Result, limit int) []selector.Result {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	})
	out := items
	seen := map[string]bool{}
	for _, it := range items {
		seen[it.Name] = true
	}
	for _, b := range t.snap.Bundles() {
		if !slices.Contains(words, strings.ToLower(b.Name)) {
			continue
		}
		for _, tool := range t.req.Tools {
			if len(out) >= limit {
				return out
			}
			if b.Match(tool.Name) && !seen[tool.Name] && t.searchable(tool.Name) && t.isVisible(tool.Name) {
				seen[tool.Name] = true
				res := selector.Result{Name: tool.Name, Description: tool.Description, Score: 1}
				if st, ok := t.cat.Tool(tool.Name); ok {
					res.Category, res.Hint = st.Meta.Category, st.Meta.Hint
				}
				out = append(out[:len(out):len(out)], res)
			}
		}
	}
	return out
}

// shortened returns a query the answer may repeat: up to maxQueryLen
// bytes, cut at a rune, with an ellipsis when cut. The model wrote the
// query; repeating a megabyte of it back would cost its tokens again.
func shortened(q string) string { return clipMarked(q, maxQueryLen) }

// clipMarked cuts s to at most n bytes at a rune, with an ellipsis (three
// bytes more) when cut, so a reader knows there was more.
func clipMarked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return clip(s, n) + "…"
}

// oneLine returns a tool name without line breaks or other control
// characters: the results list one tool a line, and a client's tool
// named "x\n- other (hint: …)" must not add lines of its own.
func oneLine(name string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return -1
		}
		return r
	}, name)
}
