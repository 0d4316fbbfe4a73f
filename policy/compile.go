package policy

import (
	"cmp"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/selector"
)

// compileEnv is what compile needs besides the Document.
type compileEnv struct {
	source  string
	dir     string            // config directory, for relative paths
	gen     uint64            // generation of the base snapshot
	hints   map[string]string // resolved hints path -> text
	profile string
}

type toolGlob struct {
	g    glob
	meta selector.Meta
}

type anchorRule struct {
	re    *regexp.Regexp
	tools globs
	boost float64
}

// compile turns a validated Document into a Snapshot. It expects doc to
// have passed validation; a pattern that fails to compile here is skipped
// rather than reported, because validation already reported it.
func compile(doc Document, env compileEnv) (*Snapshot, error) {
	g := doc.Gateway
	s := &Snapshot{
		Gateway: Gateway{
			Listen:                   g.Listen,
			Upstream:                 strings.TrimRight(g.Upstream, "/"),
			UpstreamKey:              expandEnv(g.UpstreamKey),
			Mode:                     g.Mode,
			MinTools:                 g.MinTools,
			MaxRounds:                g.MaxRounds,
			MaxActive:                g.MaxActive,
			Preselect:                g.Preselect,
			Explore:                  g.Explore,
			FollowUp:                 g.FollowUp,
			SearchRound:              g.SearchRound,
			Usage:                    g.Usage,
			ScaleWithCatalog:         g.ScaleWithCatalog,
			PassthroughHistoryTokens: g.PassthroughHistoryTokens,
			BodyLimit:                g.BodyLimit,
			ConnectTimeout:           g.Timeouts.Connect,
			HeaderTimeout:            g.Timeouts.FirstByte,
			IdleTimeout:              g.Timeouts.Idle,
			RequestTimeout:           g.Timeouts.Request,
			Retries:                  g.Retries,
		},
		Sessions: Sessions{TTL: doc.Sessions.TTL, MaxEntries: doc.Sessions.MaxEntries, Store: doc.Sessions.Store},
		Search: Search{
			Limit:   doc.Search.Limit,
			Weights: selector.Weights(doc.Search.Weights),
			Embeddings: Embeddings{
				Provider: doc.Search.Embeddings.Provider,
				URL:      strings.TrimRight(doc.Search.Embeddings.URL, "/"),
				Model:    doc.Search.Embeddings.Model,
				Key:      expandEnv(doc.Search.Embeddings.Key),
				// Normalised here so that a reload from 0 to the default
				// is not reported as a change a restart would apply.
				CacheMaxMB: cmp.Or(max(doc.Search.Embeddings.CacheMaxMB, 0), selector.DefaultDiskCacheMB),

				QueryTimeout: doc.Search.Embeddings.QueryTimeout,
			},
		},
		source:      env.source,
		gen:         env.gen,
		catalogKey:  catalogKeyOf(&doc, env.gen),
		profile:     env.profile,
		core:        compileGlobs(doc.Core),
		deny:        compileGlobs(doc.Deny),
		allow:       compileGlobs(doc.Allow),
		gate:        riskLevel(doc.Risk.Gate), // "off" has level 0
		tools:       map[string]selector.Meta{},
		transitions: doc.Transitions,
		hints:       map[string]string{},
	}
	if dir := doc.Search.Embeddings.CacheDir; dir != "" {
		s.Search.Embeddings.CacheDir = resolvePath(env.dir, dir)
	}
	var err error
	if s.writeIntent, err = regexp.Compile(doc.Risk.WriteIntent); err != nil {
		return nil, err
	}
	if doc.Risk.DestructiveNames != "" {
		if s.destructiveNames, err = regexp.Compile(doc.Risk.DestructiveNames); err != nil {
			return nil, err
		}
	}
	for name, b := range doc.Bundles {
		s.bundles = append(s.bundles, Bundle{Name: name, Description: b.Description, Tools: slices.Clone(b.Tools), globs: compileGlobs(b.Tools)})
	}
	slices.SortFunc(s.bundles, func(a, b Bundle) int { return strings.Compare(a.Name, b.Name) })
	for _, name := range doc.Pin {
		if i, ok := slices.BinarySearchFunc(s.bundles, name, func(b Bundle, n string) int { return strings.Compare(b.Name, n) }); ok {
			s.pinned = append(s.pinned, s.bundles[i])
		}
	}
	for name, t := range doc.Tools {
		m := selector.Meta{
			Title: t.Title, Keywords: t.Keywords, Examples: t.Examples, Category: t.Category,
			Entity: t.Entity, Related: t.Related, AvoidWhen: t.AvoidWhen, Risk: t.Risk, Hint: t.Hint,
		}
		if !isGlob(name) {
			// Keyed lower-cased, as Meta looks names up: tools keys match
			// case-insensitively, as globs do (the decode refused two keys
			// that differ only in case).
			s.tools[strings.ToLower(name)] = m
			continue
		}
		if gl, err := compileGlob(name); err == nil {
			s.toolGlobs = append(s.toolGlobs, toolGlob{g: gl, meta: m})
		}
	}
	// The most specific glob (longest) wins; ties break by name so the
	// outcome never depends on map order.
	slices.SortFunc(s.toolGlobs, func(a, b toolGlob) int {
		return cmp.Or(cmp.Compare(len(b.g.src), len(a.g.src)), strings.Compare(a.g.src, b.g.src))
	})
	for _, a := range doc.Anchors {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			continue
		}
		s.anchors = append(s.anchors, anchorRule{re: re, tools: compileGlobs(a.Tools), boost: a.Boost})
	}
	for name, c := range doc.Categories {
		switch {
		case c.Text != "":
			s.hints[name] = strings.TrimSpace(c.Text)
		case c.Hints != "":
			s.hints[name] = strings.TrimSpace(env.hints[resolvePath(env.dir, c.Hints)])
		}
	}
	for f := range env.hints {
		s.hintPaths = append(s.hintPaths, f)
	}
	slices.Sort(s.hintPaths)
	return s, nil
}

// hintFiles returns the hints files this snapshot's load read.
func (s *Snapshot) hintFiles() []string { return s.hintPaths }

func compileGlobs(list []string) globs {
	out := make(globs, 0, len(list))
	for _, s := range list {
		if g, err := compileGlob(s); err == nil {
			out = append(out, g)
		}
	}
	return out
}

// expandEnv reads "$NAME" or "${NAME}" from the environment, so keys need
// not be written into the file. Anything else is taken literally: a key may
// contain '$'.
func expandEnv(s string) string {
	if name, ok := envName(s); ok {
		return os.Getenv(name)
	}
	return s
}

// envName returns NAME when s is "$NAME" or "${NAME}" (letters, digits
// and underscores).
func envName(s string) (string, bool) {
	name, ok := strings.CutPrefix(s, "$")
	if !ok || name == "" {
		return "", false
	}
	if inner, ok := strings.CutPrefix(name, "{"); ok {
		name, ok = strings.CutSuffix(inner, "}")
		if !ok || name == "" {
			return "", false
		}
	}
	for _, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "", false
		}
	}
	return name, true
}
