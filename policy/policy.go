// Package policy owns tools.yaml: its schema, strict decoding, validation with
// file:line:col errors, defaults, glob matching, hints and hot reload. It must
// not know HTTP: callers ask it questions with plain values and get a
// validated, immutable Snapshot.
package policy

import "time"

// Mode says how the gateway exposes tools to the model.
type Mode string

// Modes.
const (
	ModeSearch      Mode = "search"      // only tool_search + discovered tools
	ModePreselect   Mode = "preselect"   // top-k preselected, no tool_search
	ModeHybrid      Mode = "hybrid"      // preselected + tool_search (default)
	ModePassthrough Mode = "passthrough" // forward tools unchanged
)

// Gateway holds the gateway settings of tools.yaml.
type Gateway struct {
	Listen         string
	Upstream       string
	UpstreamKey    string
	Mode           Mode
	MinTools       int
	MaxRounds      int
	MaxActive      int
	Preselect      int // tools preselected per user turn in hybrid/preselect mode
	BodyLimit      int64
	ConnectTimeout time.Duration
	HeaderTimeout  time.Duration // first byte
	IdleTimeout    time.Duration // between stream chunks
	RequestTimeout time.Duration
}

// Sessions holds the session store settings.
type Sessions struct {
	TTL        time.Duration
	MaxEntries int
}

// Snapshot is one validated, immutable policy. Safe for concurrent use.
type Snapshot struct {
	Gateway  Gateway
	Sessions Sessions
}

// Default returns the built-in policy: what runs with no tools.yaml at all.
func Default() *Snapshot {
	return &Snapshot{
		Gateway: Gateway{
			Listen:         "127.0.0.1:8080",
			Upstream:       "https://api.openai.com/v1",
			Mode:           ModeHybrid,
			MinTools:       12,
			MaxRounds:      4,
			MaxActive:      32,
			Preselect:      5,
			BodyLimit:      32 << 20,
			ConnectTimeout: 10 * time.Second,
			HeaderTimeout:  120 * time.Second,
			IdleTimeout:    120 * time.Second,
			RequestTimeout: 10 * time.Minute,
		},
		Sessions: Sessions{TTL: time.Hour, MaxEntries: 10000},
	}
}
