package policy

import (
	"unicode"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// Catalog converts a request's tools into selector tools with their
// tools.yaml enrichment merged in, and returns the ranking configuration:
// weights from search.weights, anchors with their tool globs resolved to the
// names in this catalog, and the seeded transitions. Tools hidden whatever
// the user says (deny, allow) are left out, so search can never return
// them; risk gating depends on the turn and is left to Decide. The result
// depends only on the snapshot and tools, so callers may cache it by
// CatalogKey and the tools' hash. Transitions are shared and must not be
// modified.
func (s *Snapshot) Catalog(tools []rewrite.Tool) ([]selector.Tool, selector.Config) {
	out := make([]selector.Tool, 0, len(tools))
	for _, t := range tools {
		if hidden, _ := s.Hidden(t.Name); hidden {
			continue
		}
		st := selector.Tool{Name: t.Name, Description: t.Description}
		if len(t.Params) > 0 {
			st.Params = make([]selector.Param, len(t.Params))
			for i, p := range t.Params {
				st.Params[i] = selector.Param{Name: p.Name, Description: p.Description}
			}
		}
		st.Meta, _ = s.Meta(t.Name)
		out = append(out, st)
	}
	cfg := selector.Config{Weights: s.Search.Weights, Transitions: s.transitions}
	for _, a := range s.anchors {
		var names []string
		for _, t := range out {
			if _, ok := a.tools.first(t.Name); ok {
				names = append(names, t.Name)
			}
		}
		if len(names) == 0 {
			continue // nothing in this catalog to boost
		}
		cfg.Anchors = append(cfg.Anchors, selector.Anchor{Pattern: a.re, Tools: names, Boost: a.boost})
	}
	return out, cfg
}

// Hints returns the workflow guidance for a category (categories.<name>),
// trimmed, or "" if there is none. The text was read at load time; Hints
// does no I/O.
func (s *Snapshot) Hints(category string) string {
	return s.hints[category]
}

// Bundle is a named group of tools from the bundles section.
type Bundle struct {
	Name        string
	Description string
	Tools       []string // the globs as written
	globs       globs
}

// Match reports whether the tool belongs to the bundle.
func (b Bundle) Match(name string) bool {
	_, ok := b.globs.first(name)
	return ok
}

// QueryWordRune reports whether r is part of a word of a search query, as
// a query names a bundle: a letter, a digit, '_' or '-'. A bundle's name
// is one such word, or no query could name it.
func QueryWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-'
}

// Bundles returns the bundles sorted by name. The slice is shared with the
// snapshot and must not be modified.
func (s *Snapshot) Bundles() []Bundle {
	return s.bundles
}
