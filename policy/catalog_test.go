package policy

import (
	"github.com/toolgate/toolgate/selector"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/rewrite"
)

func TestCatalog(t *testing.T) {
	const src = `
deny: ["*delete*"]
search:
  weights: {lexical: 2, recency: 0}
tools:
  create_issue:
    title: Open an issue
    keywords: [ticket, bug report]
    category: code
    risk: moderate
    hint: Search first.
  "playwright_*": {category: browser}
anchors:
  - pattern: '(?i)\bticket\b'
    tools: ["*issue*"]
    boost: 2
  - pattern: 'nothing'
    tools: [absent_tool]
transitions:
  get_file: {update_file: 0.7}
`
	s := mustLoad(t, src, nil)
	in := []rewrite.Tool{
		{Name: "create_issue", Description: "Create a GitHub issue", Params: []rewrite.Param{{Name: "title", Description: "Issue title"}}},
		{Name: "delete_issue", Description: "Delete an issue"},
		{Name: "list_issues", Description: "List issues"},
		{Name: "playwright_click", Description: "Click"},
	}
	tools, cfg := s.Catalog(in)

	t.Run("denied tools are left out of the catalog", func(t *testing.T) {
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, []string{"create_issue", "list_issues", "playwright_click"}) {
			t.Errorf("names %v", names)
		}
	})
	t.Run("exact enrichment is merged into Meta", func(t *testing.T) {
		m := tools[0].Meta
		if m.Title != "Open an issue" || !slices.Equal(m.Keywords, []string{"ticket", "bug report"}) || m.Category != "code" || m.Risk != "moderate" || m.Hint != "Search first." {
			t.Errorf("meta %+v", m)
		}
		if len(tools[0].Params) != 1 || tools[0].Params[0].Name != "title" || tools[0].Description != "Create a GitHub issue" {
			t.Errorf("tool %+v", tools[0])
		}
	})
	t.Run("glob enrichment applies to matching tools", func(t *testing.T) {
		if tools[2].Meta.Category != "browser" {
			t.Errorf("meta %+v", tools[2].Meta)
		}
		if tools[1].Meta.Category != "" {
			t.Errorf("unlisted tool got meta %+v", tools[1].Meta)
		}
	})
	t.Run("weights come from search.weights with defaults", func(t *testing.T) {
		if cfg.Weights.Lexical != 2 || cfg.Weights.Recency != 0 || cfg.Weights.Semantic != selector.DefaultWeights().Semantic ||
			cfg.Weights.DocNeighbours != selector.DefaultWeights().DocNeighbours || cfg.Weights.Habit != selector.DefaultWeights().Habit {
			t.Errorf("weights %+v", cfg.Weights)
		}
	})
	t.Run("anchor globs resolve to the catalog's visible names", func(t *testing.T) {
		if len(cfg.Anchors) != 1 {
			t.Fatalf("anchors %+v", cfg.Anchors)
		}
		a := cfg.Anchors[0]
		if !slices.Equal(a.Tools, []string{"create_issue", "list_issues"}) || a.Boost != 2 || !a.Pattern.MatchString("open a Ticket") {
			t.Errorf("anchor %+v", a)
		}
	})
	t.Run("transitions are passed through", func(t *testing.T) {
		if cfg.Transitions["get_file"]["update_file"] != 0.7 {
			t.Errorf("transitions %v", cfg.Transitions)
		}
	})
}

func TestBundles(t *testing.T) {
	s := mustLoad(t, "bundles:\n  zeta: {description: Z, tools: [z_*]}\n  alpha: {description: A, tools: [a_*, shared]}\n", nil)
	b := s.Bundles()
	if len(b) != 2 || b[0].Name != "alpha" || b[1].Name != "zeta" || b[0].Description != "A" {
		t.Fatalf("bundles %+v", b)
	}
	if !b[0].Match("a_read") || !b[0].Match("shared") || b[0].Match("z_read") {
		t.Error("bundle membership wrong")
	}
}

// TestABundleNameIsOneWord: a search finds a bundle by a word of its
// query, so a name of two words (or with a dot) could never be found.
func TestABundleNameIsOneWord(t *testing.T) {
	tests := []struct {
		name, bundle string
		want         string // the problem, "" when the name is accepted
	}{
		{"a name with a space is refused", "web browser",
			`2:3: bundles.web browser: bundle name "web browser" is not one word (letters, digits, _ and -), and a search finds a bundle by a word of its query`},
		{"a name with a dot is refused", "web.browser",
			`2:3: bundles.web.browser: bundle name "web.browser" is not one word (letters, digits, _ and -), and a search finds a bundle by a word of its query`},
		{"a name of letters, digits, _ and - is accepted", "web-browser_2", ""},
		{"a name in another script is accepted", "браузер", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, "bundles:\n  \""+tt.bundle+"\": {tools: [\"browser_*\"]}\n", nil)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load refused the name: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Load accepted the name")
			}
			if got := problemsOf(t, err); len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems %q, want [%q]", got, tt.want)
			}
		})
	}
}
