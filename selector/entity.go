package selector

import (
	"strings"
	"unicode"
)

// Entity returns the entity a tool works on, for the session's focus: the
// policy's entity when set, else the last word of the tool's name
// ("repo_create_issue" → "issue", "listPullRequests" → "request"), singular.
// It returns "" for a tool the catalog does not hold.
func (c *Catalog) Entity(name string) string {
	t, ok := c.Tool(name)
	if !ok {
		return ""
	}
	if t.Meta.Entity != "" {
		return strings.ToLower(t.Meta.Entity)
	}
	return nameEntity(name)
}

// nameEntity takes the last word of an identifier split on separators and
// camelCase, lowercased, with a plural "s" dropped.
func nameEntity(name string) string {
	end := len(name)
	for end > 0 && !isWordRune(rune(name[end-1])) {
		end--
	}
	start := end
	for start > 0 {
		r := rune(name[start-1])
		if !isWordRune(r) {
			break
		}
		start--
		if unicode.IsUpper(r) {
			break
		}
	}
	w := strings.ToLower(name[start:end])
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		w = w[:len(w)-1]
	}
	return w
}

func isWordRune(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
}
