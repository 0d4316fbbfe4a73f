package policy

import (
	"fmt"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/selector"
)

// Decision says whether a tool may be shown to the model, and why.
type Decision struct {
	// Visible means the tool may be sent upstream and returned by search.
	Visible bool
	// Core means the tool is always sent (core globs or a pinned bundle).
	// Core is never true when Visible is false.
	Core bool
	// Rule names the rule that decided, for the decision log, e.g.
	// `deny "*delete*"`, `core "github_*"`, `risk destructive without write
	// intent`, `not in allow`, `default`.
	Rule string
}

// Decide applies, in this order: deny, allow, risk gating (against the write
// intent of userText, the latest user message), core and pinned bundles.
// So deny beats everything, and a core tool that is destructive is still
// hidden until the user asks to change something. It does not look at the
// catalog: unknown names get the default decision.
func (s *Snapshot) Decide(name, userText string) Decision {
	return s.decide(name, func() bool { return s.WriteIntent(userText) })
}

// Decider returns Decide bound to one user message, testing its write
// intent at most once however many tools are decided: use it when deciding
// a whole catalog. The returned func is safe for concurrent use.
func (s *Snapshot) Decider(userText string) func(name string) Decision {
	intent := sync.OnceValue(func() bool { return s.WriteIntent(userText) })
	return func(name string) Decision { return s.decide(name, intent) }
}

// WriteIntent reports whether text asks to change something, by the
// risk.write_intent pattern. It is a keyword test, not understanding:
// "don't delete anything" counts as write intent.
func (s *Snapshot) WriteIntent(text string) bool {
	return s.writeIntent.MatchString(text)
}

func (s *Snapshot) decide(name string, writeIntent func() bool) Decision {
	if g, ok := s.deny.first(name); ok {
		return Decision{Rule: fmt.Sprintf("deny %q", g.src)}
	}
	allowed := ""
	if len(s.allow) > 0 {
		g, ok := s.allow.first(name)
		if !ok {
			return Decision{Rule: "not in allow"}
		}
		allowed = fmt.Sprintf("allow %q", g.src)
	}
	if s.gate > 0 {
		if risk := s.Risk(name); riskLevel(risk) >= s.gate && !writeIntent() {
			return Decision{Rule: "risk " + risk + " without write intent"}
		}
	}
	if g, ok := s.core.first(name); ok {
		return Decision{Visible: true, Core: true, Rule: fmt.Sprintf("core %q", g.src)}
	}
	for _, b := range s.pinned {
		if b.Match(name) {
			return Decision{Visible: true, Core: true, Rule: fmt.Sprintf("pin %q", b.Name)}
		}
	}
	if allowed != "" {
		return Decision{Visible: true, Rule: allowed}
	}
	return Decision{Visible: true, Rule: "default"}
}

// Hidden reports whether name is hidden whatever the user says (deny, or
// not in allow), with the rule. It is Decide without risk gating, for
// places that have no user turn, such as a catalog or a model's tool call.
func (s *Snapshot) Hidden(name string) (bool, string) {
	if g, ok := s.deny.first(name); ok {
		return true, fmt.Sprintf("deny %q", g.src)
	}
	if len(s.allow) > 0 {
		if _, ok := s.allow.first(name); !ok {
			return true, "not in allow"
		}
	}
	return false, ""
}

// Risk returns the tool's risk: tools.<name>.risk (exact name, then the
// most specific glob), else "destructive" if risk.destructive_names matches
// the name, else "" (unknown, never gated).
func (s *Snapshot) Risk(name string) string {
	if m, ok := s.Meta(name); ok && m.Risk != "" {
		return m.Risk
	}
	if s.destructiveNames != nil && s.destructiveNames.MatchString(name) {
		return RiskDestructive
	}
	return ""
}

// Meta returns the enrichment tools.yaml holds for name: the exact entry
// (case aside), or else the most specific matching glob entry. Its slices
// are shared with the snapshot and must not be modified.
func (s *Snapshot) Meta(name string) (selector.Meta, bool) {
	lower := strings.ToLower(name) // name itself when it has no upper case
	if m, ok := s.tools[lower]; ok {
		return m, true
	}
	if len(s.toolGlobs) == 0 {
		return selector.Meta{}, false
	}
	runes := []rune(lower)
	for _, tg := range s.toolGlobs {
		if tg.g.matchLower(runes) {
			return tg.meta, true
		}
	}
	return selector.Meta{}, false
}
