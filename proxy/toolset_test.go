package proxy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/rewrite"
)

// The tool set's key is the same for every order of the same tools' texts
// and another for anything else a catalog is compiled from.
func TestAToolSetsKeyIsTheSameInEveryOrderOnly(t *testing.T) {
	sets, texts := newToolSets(16), newToolCache(1)
	key := func(tools []map[string]any, d rewrite.Dialect) toolSet {
		t.Helper()
		body := chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, tools, false, nil)
		req, err := rewrite.Chat{}.ParseRequest(body, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The text key is the dialect's, as serveTurn's parse makes it.
		req.ToolsKey = texts.space(dialectName(d)).keyOf(req.ToolsRaw.Raw)
		return sets.of(req, d)
	}
	tools := testCatalog(20)
	chat := rewrite.Chat{}
	base := key(tools, chat)
	renamed := slices.Clone(tools)
	renamed[3] = map[string]any{"type": "function", "function": map[string]any{"name": "another_name", "description": "Merge an open pull request."}}
	for _, tc := range []struct {
		name string
		got  toolSet
		same bool
	}{
		{"reversed is the same set", key(reorderedTools(tools, "reversed order"), chat), true},
		{"shuffled is the same set", key(reorderedTools(tools, "shuffled order"), chat), true},
		{"one tool fewer is another set", key(tools[:19], chat), false},
		{"a tool renamed is another set", key(renamed, chat), false},
		{"a tool twice in place of another is another set", key(append(slices.Clone(tools[:19]), tools[0]), chat), false},
		{"the same texts read by another dialect are another set", key(tools, rewrite.Messages{}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.got.key == base.key) != tc.same || tc.got.ordered || base.ordered {
				t.Errorf("key %v against %v; want the same: %v", tc.got, base, tc.same)
			}
		})
	}
}

// An array whose tools' text passes the catalog's budget is clipped in
// its order (capCatalog): its orders compile differently, so each keys
// its own catalog, by its text.
func TestAToolSetOverTheCatalogBudgetIsKeyedByItsOrder(t *testing.T) {
	sets, texts := newToolSets(16), newToolCache(1)
	long := strings.Repeat("word ", maxCatalogText/5/8+1) // eight of these pass the budget
	var tools []rewrite.Tool
	for i := range 9 {
		tools = append(tools, rewrite.Tool{Name: fmt.Sprint("tool_", i), Raw: `{"name":"tool_` + fmt.Sprint(i) + `","description":"` + long + `"}`})
	}
	key := func(tools []rewrite.Tool) toolSet {
		req := &rewrite.Request{Tools: tools}
		raw := ""
		for _, tl := range tools {
			raw += tl.Raw
		}
		req.ToolsKey = texts.space(routeChat).keyOf(raw)
		return sets.of(req, rewrite.Chat{})
	}
	backward := slices.Clone(tools)
	slices.Reverse(backward)
	first, reversed := key(tools), key(backward)
	if !first.ordered || !reversed.ordered || first.key == reversed.key {
		t.Errorf("keys %v and %v; want each order keyed by its own text", first, reversed)
	}
}

// Another order of a counted tool set is laid out from the set's count,
// tokenizing nothing, and counts as counting it in that order does: each
// tool's tokens at its new position, the array's total with the
// separators where they now fall (an indented tool first costs what a
// compact one does not).
func TestAReorderedArrayIsCountedAsItsOwnOrderWithoutTokenizing(t *testing.T) {
	tools := mixedTools(30, func(i int) bool { return i%4 == 1 })
	shifted := append(slices.Clone(tools[1:]), tools[0]) // an indented tool first
	reversed := slices.Clone(tools)
	slices.Reverse(reversed)
	for _, enc := range []tokenizer.Encoding{encO200k, encCl100k} {
		for _, tc := range []struct {
			name  string
			order []rewrite.Tool
		}{
			{"shifted by one", shifted},
			{"reversed", reversed},
		} {
			t.Run("in "+string(enc)+" the set "+tc.name+" counts as its own order does, tokenizing nothing", func(t *testing.T) {
				base, err := tokenizer.Get(enc)
				if err != nil {
					t.Fatal(err)
				}
				tokenized := 0
				c := newTokenCounter()
				counting := func() (tokenizer.Codec, error) { return countingCodec{base, &tokenized}, nil }
				c.o200k, c.cl100k = counting, counting
				if _, err := c.catalog(enc, "first", "set", tools); err != nil {
					t.Fatal(err)
				}
				c.perTool.Purge() // a set's other orders must not lean on the per-tool counts
				tokenized = 0
				got, err := c.catalog(enc, "second", "set", tc.order)
				if err != nil {
					t.Fatal(err)
				}
				want, err := newTokenCounter().countCatalog(enc, tc.order)
				if err != nil {
					t.Fatal(err)
				}
				if got.total != want.total || !slices.Equal(got.per, want.per) || got.rendered != want.rendered || got.estimated != want.estimated {
					t.Errorf("got %+v, want %+v", got, want)
				}
				if tokenized != 0 {
					t.Errorf("%d bytes tokenized for an order of a counted set, want none", tokenized)
				}
			})
		}
	}
	t.Run("an array that is not the set's is counted, not laid out", func(t *testing.T) {
		c := newTokenCounter()
		if _, err := c.catalog(encO200k, "first", "set", tools); err != nil {
			t.Fatal(err)
		}
		other := slices.Clone(tools)
		other[5] = rewrite.Tool{Name: "another_tool", Raw: `{"type":"function","function":{"name":"another_tool","description":"Something else entirely, at some length."}}`}
		got, err := c.catalog(encO200k, "other", "set", other) // a key that collided
		if err != nil {
			t.Fatal(err)
		}
		want, _ := newTokenCounter().countCatalog(encO200k, other)
		if got.total != want.total || !slices.Equal(got.per, want.per) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}
