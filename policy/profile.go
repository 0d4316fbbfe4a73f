package policy

import (
	"slices"
	"strings"
)

// Request is what ForRequest needs to know about a client request, with no
// HTTP types.
type Request struct {
	// Key is a label of the client's credential, never the credential
	// itself, for match.key: the proxy takes the credential from
	// Authorization (less its Bearer scheme, in any case), else api-key,
	// else x-api-key, and writes the text before its first '-' with that
	// '-' when there are at most 8 characters before it (else nothing),
	// then "...", then its last 4 characters. So "sk-proj-…wxyz" is "sk-...wxyz", "team-a-…1234" is
	// "team-...1234" (no glob "team-a*" matches it) and a key with no short
	// dash-ended prefix is "...wxyz". A credential under 12 characters, or
	// none, is "". README.md and tools.yaml document the same format.
	Key string
	// Model is the request's model.
	Model string
	// Header returns a request header's values (none if absent), as
	// http.Header.Values does; nil means no headers. A header match reads
	// the first value, and an absent header matches no pattern, "*"
	// included.
	Header func(name string) []string
}

type profileRule struct {
	name   string
	key    *glob // nil: any
	model  *glob // nil: any
	header []headerGlob
	snap   *Snapshot
}

type headerGlob struct {
	name string
	g    glob
}

// ForRequest returns the effective snapshot for r: the snapshot of the first
// profile whose match fits, or s itself when none does. The profile
// snapshots are compiled at load time, so this only matches globs and never
// allocates. It does not fall through to later profiles once one matches.
func (s *Snapshot) ForRequest(r Request) *Snapshot {
	for i := range s.profiles {
		if s.profiles[i].matches(r) {
			return s.profiles[i].snap
		}
	}
	return s
}

func (p *profileRule) matches(r Request) bool {
	if p.key != nil && !p.key.Match(r.Key) {
		return false
	}
	if p.model != nil && !p.model.Match(r.Model) {
		return false
	}
	for _, h := range p.header {
		// An absent header is no value at all: read as "", it matched
		// "*", and a profile for requests that carry a header caught
		// those that do not.
		var vs []string
		if r.Header != nil {
			vs = r.Header(h.name)
		}
		if len(vs) == 0 || !h.g.Match(vs[0]) {
			return false
		}
	}
	return true
}

func optionalGlob(s string) *glob {
	if s == "" {
		return nil
	}
	g, err := compileGlob(s)
	if err != nil {
		return nil
	}
	return &g
}

func headerGlobs(m map[string]string) []headerGlob {
	out := make([]headerGlob, 0, len(m))
	for name, pat := range m {
		if g, err := compileGlob(pat); err == nil {
			out = append(out, headerGlob{name: name, g: g})
		}
	}
	// Deterministic order keeps matching cost and behaviour reproducible.
	slices.SortFunc(out, func(a, b headerGlob) int { return strings.Compare(a.name, b.name) })
	return out
}
