package proxy

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
)

// formatResults writes the tool message that answers a search: the tools
// it found already in the model's list (listed), in one line; the tools
// now callable with their hints; a line for each bundle they came with
// (bundleLines); the workflow guidance of the top
// result's category (hints returns "" for one the model has read); and
// what to do when the matches are weak. It names the tools without their
// descriptions: the round that reads it carries their whole definitions
// in its tools array, and a description here would be paid for twice.
// Guidance is most of an answer's tokens (a category's runs to ~200), so
// only the tool the model is likeliest to call brings its own: the
// runner-ups' categories were most of it, for tools seldom called.
func formatResults(query string, res selector.Results, listed, bundles []string, hints func(category string) string) string {
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
	for _, line := range bundles {
		b.WriteString(line)
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

// withBundles adds to the ranked search results the tools of every bundle
// the query names (by its name, as a word), so that asking for "browser"
// tools gets the browser bundle whole, up to limit tools in all, and
// returns the bundles named. The
// ranked results lead, in their order: the bundle's members among them are
// its best matches for the query, where catalog order put the first ten
// members ahead of "take a browser screenshot"'s browser_screenshot, the
// twelfth. The rest of the bundle follows in catalog order.
func (t *turn) withBundles(query string, items []selector.Result, limit int) ([]selector.Result, []policy.Bundle) {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !policy.QueryWordRune(r) })
	out := items
	var named []policy.Bundle
	seen := map[string]bool{}
	for _, it := range items {
		seen[it.Name] = true
	}
	for _, b := range t.snap.Bundles() {
		if !slices.Contains(words, strings.ToLower(b.Name)) {
			continue
		}
		named = append(named, b)
		for _, tool := range t.req.Tools {
			if len(out) >= limit {
				return out, named
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
	return out, named
}

// bundleLines says what each bundle the query named is for (its
// description), when the answer's tools include some of it: the model
// learns what the group it asked for covers, beyond the tools listed.
func bundleLines(named []policy.Bundle, items []selector.Result) []string {
	var lines []string
	for _, b := range named {
		if b.Description == "" || !slices.ContainsFunc(items, func(it selector.Result) bool { return b.Match(it.Name) }) {
			continue
		}
		lines = append(lines, fmt.Sprintf("The %s bundle: %s", oneLine(b.Name), oneLine(b.Description)))
	}
	return lines
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
