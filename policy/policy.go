// Package policy owns tools.yaml: its schema, strict decoding, validation with
// file:line:col errors, defaults, glob matching, per-client profiles, risk
// gating, category hints and hot reload. It must not know HTTP: callers ask it
// questions with plain values (a tool name, the user's text, a model, a key
// label) and get answers from a validated, immutable Snapshot. It does not
// rank tools (selector does) and does not hold session state (session does).
package policy

import (
	"regexp"
	"time"

	"github.com/toolgate/toolgate/selector"
)

// Mode says how the gateway exposes tools to the model.
type Mode string

// Modes.
const (
	ModeSearch      Mode = "search"      // only tool_search + discovered tools
	ModePreselect   Mode = "preselect"   // top-k preselected, no tool_search
	ModeHybrid      Mode = "hybrid"      // preselected + tool_search (default)
	ModePassthrough Mode = "passthrough" // forward tools unchanged
)

// SearchRound is what the round answering a tool_search offers.
type SearchRound string

// Search rounds.
const (
	SearchRoundFound SearchRound = "found" // what the search found, and core, tool_choice and called tools (default)
	SearchRoundAll   SearchRound = "all"   // every active tool
)

// Usage is how the usage a client gets adds up a turn's rounds.
type Usage string

// Usage modes.
const (
	// UsageSummed: every count is the sum over the turn's rounds, what
	// the upstream billed for it (default).
	UsageSummed Usage = "summed"
	// UsageContext: the input counts (prompt and input tokens, cache
	// reads and writes, their details) are the last round's, the context
	// the model answered from; the output counts are summed.
	UsageContext Usage = "context"
)

// Gateway holds the gateway settings of tools.yaml, defaults applied. Flags
// and environment variables override Listen and Upstream in cmd/gateway;
// policy does not read them.
type Gateway struct {
	Listen      string
	Upstream    string
	UpstreamKey string // environment references already expanded
	Mode        Mode
	MinTools    int  // the smallest tools array rewritten (schema.go: min_tools)
	MaxRounds   int  // tool_search rounds per client request
	MaxActive   int  // tools sent upstream beside tool_search
	Preselect   int  // tools preselected per user turn in hybrid/preselect mode
	Explore     bool // preselect mode: one preselected slot samples below the cut
	FollowUp    int  // tools joining after a user turn's first tool result in hybrid/preselect mode
	SearchRound SearchRound
	Usage       Usage
	// ScaleWithCatalog widens Preselect, FollowUp and the search limit
	// for catalogs of 150 tools or more (see PreselectFor, FollowUpFor and
	// SearchLimitFor).
	ScaleWithCatalog bool
	// PassthroughHistoryTokens: conversations longer than this go upstream
	// unchanged (0: never).
	PassthroughHistoryTokens int
	BodyLimit                int64
	ConnectTimeout           time.Duration
	HeaderTimeout            time.Duration // first byte
	IdleTimeout              time.Duration // between stream chunks
	RequestTimeout           time.Duration
	Retries                  int
}

// Sessions holds the session store settings.
type Sessions struct {
	TTL        time.Duration
	MaxEntries int
	Store      string // "memory" or a redis:// URL
}

// Search holds the search settings: result size, ensemble weights and
// embeddings.
type Search struct {
	Limit      int
	Weights    selector.Weights
	Embeddings Embeddings
}

// Embeddings holds the embeddings settings. An empty URL means the
// upstream's; an empty Key means the upstream key (or the client's); an
// empty CacheDir means the user cache dir. Policy does not resolve those
// fallbacks because they depend on flags it does not see.
type Embeddings struct {
	Provider string // "offline", "openai" or "off"
	URL      string
	Model    string
	Key      string // environment references already expanded
	CacheDir string // absolute, or "" for the default
	// CacheMaxMB bounds the on-disk cache in MiB, always above 0.
	CacheMaxMB int
	// QueryTimeout bounds a request's waits for its queries' vectors,
	// all of them together.
	QueryTimeout time.Duration
}

// Snapshot is one validated, immutable policy: what Load returns and Live
// publishes. Safe for concurrent use; never modified after Load returns, so
// a request can keep the snapshot it started with across a reload. The
// exported fields are read-only by convention.
type Snapshot struct {
	Gateway  Gateway
	Sessions Sessions
	Search   Search

	source     string
	gen        uint64
	catalogKey uint64 // see CatalogKey
	profile    string // the profile applied, "" for the base policy

	core, deny, allow globs
	pinned            []Bundle
	gate              int            // riskLevel at or above which tools need write intent; 0 = off
	writeIntent       *regexp.Regexp // never nil
	destructiveNames  *regexp.Regexp // nil: no inference from names

	tools       map[string]selector.Meta // exact names
	toolGlobs   []toolGlob               // longest pattern first
	anchors     []anchorRule
	transitions map[string]map[string]float64
	bundles     []Bundle // sorted by name
	hints       map[string]string
	profiles    []profileRule
	hintPaths   []string        // every hints file the load read, for Live to watch
	written     map[string]bool // the gateway.* paths the file set, for Writes
}

// Writes reports whether the policy file set the base gateway setting at
// path, such as "gateway.listen" or "gateway.upstream", rather than leaving
// it to its built-in default. It reports false for the built-in policy and
// for paths outside gateway. serve uses it to say when a flag or variable
// overrides what the file says.
func (s *Snapshot) Writes(path string) bool { return s.written[path] }

// Default returns the built-in policy: what runs with no tools.yaml at all.
// Every call returns an equal snapshot with Generation 0.
func Default() *Snapshot {
	s, _ := compile(defaultDocument(), compileEnv{source: "built-in"})
	return s
}

// Generation identifies this effective snapshot within the process: it
// differs after every successful load and between the profiles of one
// load, so a cache keyed on it (the compiled catalog) never serves a tool
// list built under another policy. It is not ordered; compare with ==.
func (s *Snapshot) Generation() uint64 { return s.gen }

// Source returns the file the snapshot was loaded from, or "built-in".
func (s *Snapshot) Source() string { return s.source }

// Profile returns the name of the profile applied by ForRequest ("" for the
// base policy; "profiles[i]" for an unnamed one), for logs.
func (s *Snapshot) Profile() string { return s.profile }

// Stats counts what a snapshot holds, for summaries and logs.
type Stats struct {
	Core, Deny, Allow, Tools, Bundles, Anchors, Hints, Profiles int
}

// Stats returns the counts of this snapshot's rules (profiles are counted,
// not summed in).
func (s *Snapshot) Stats() Stats {
	return Stats{
		Core: len(s.core), Deny: len(s.deny), Allow: len(s.allow),
		Tools: len(s.tools) + len(s.toolGlobs), Bundles: len(s.bundles),
		Anchors: len(s.anchors), Hints: len(s.hints), Profiles: len(s.profiles),
	}
}
