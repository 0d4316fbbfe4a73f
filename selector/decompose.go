package selector

import (
	"regexp"
	"strings"
)

// partSplit finds the seams of a multi-part request: sentence ends and the
// conjunctions people chain steps with ("..., then ...", "... and also ...").
var partSplit = regexp.MustCompile(`(?i)(?:[.;!?。；！？]\s+|,?\s+(?:and\s+then|and\s+also|as\s+well\s+as|after\s+that|afterwards|additionally|then)\s+)`)

// decompose splits a multi-part request ("create a page, add a hero and an
// image") into sub-queries. Fragments too short to name a task on their own
// (fewer than minWords words) are glued to their neighbour, so a plain
// "search and replace" stays whole. It returns nil for a one-part query.
func decompose(text string, minWords int) []string {
	raw := partSplit.Split(strings.TrimSpace(text), -1)
	var parts []string
	for _, p := range raw {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(parts) > 0 && len(strings.Fields(p)) < minWords {
			parts[len(parts)-1] += " " + p
			continue
		}
		if len(parts) > 0 && len(strings.Fields(parts[len(parts)-1])) < minWords {
			parts[len(parts)-1] += " " + p
			continue
		}
		parts = append(parts, p)
	}
	if len(parts) < 2 {
		return nil
	}
	return parts
}
