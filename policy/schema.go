package policy

import (
	"time"

	"github.com/toolgate/toolgate/selector"
)

// Document is tools.yaml as written: the schema users edit. Every key is
// optional; an absent key keeps its default (see defaultDocument and the
// shipped tools.yaml). The field comments are the user documentation. Load
// turns a Document into a Snapshot; nothing outside this package sees one.
type Document struct {
	// Gateway holds server, upstream and request-loop settings. Command-line
	// flags and environment variables override listen and upstream.
	Gateway GatewaySpec `yaml:"gateway"`
	// Search holds ranking and embeddings settings for tool_search and
	// pre-selection.
	Search SearchSpec `yaml:"search"`
	// Sessions holds the session store settings.
	Sessions SessionsSpec `yaml:"sessions"`
	// Core lists globs of tools that are always sent to the model.
	Core []string `yaml:"core"`
	// Deny lists globs of tools that are never sent upstream, never returned
	// by search, and whose calls by the model are answered with a tool error
	// instead of reaching the client, except in a request that passes
	// through for another reason than its size (mode passthrough, n > 1,
	// legacy functions, a prefill, ...), where the call reaches the client.
	// Deny beats every other rule, and a profile's deny adds to this list:
	// a profile cannot un-deny a tool.
	Deny []string `yaml:"deny"`
	// Allow, when non-empty, lists globs of the only tools that may be
	// visible; everything else is hidden as if denied. A profile's allow
	// replaces the base's (it may widen it); only deny adds up.
	Allow []string `yaml:"allow"`
	// Pin lists bundle names whose tools are treated as core.
	Pin []string `yaml:"pin"`
	// Risk configures risk gating of tools by the user's intent.
	Risk RiskSpec `yaml:"risk"`
	// Bundles are named groups of tools that search can return whole and
	// that pin can make core. A bundle's name is one word (letters, digits,
	// _ and -): a search finds a bundle by a word of its query.
	Bundles map[string]BundleSpec `yaml:"bundles"`
	// Tools enriches tools by name so they are found and used well. A key is
	// an exact tool name or a glob, matched case-insensitively (two keys
	// that differ only in case are refused); an exact entry wins over globs,
	// and among globs the longest pattern wins. Names that no client sends
	// are fine.
	Tools map[string]ToolSpec `yaml:"tools"`
	// Anchors add a fixed boost to tools when the user's text matches a
	// regular expression.
	Anchors []AnchorSpec `yaml:"anchors"`
	// Transitions seed P(next tool | last tool): tool -> next tool -> p in [0,1].
	Transitions map[string]map[string]float64 `yaml:"transitions"`
	// Categories attach workflow guidance to tool categories
	// (tools.<name>.category); the text reaches the model with search
	// results of that category.
	Categories map[string]CategorySpec `yaml:"categories"`
	// Profiles override any section above for some clients; the first whose
	// match fits a request wins. Lists replace the base list (except deny,
	// which adds), maps merge by key, and settings merge field by field.
	// gateway.listen and sessions cannot be set in a profile, nor the
	// settings read at start-up or from the base policy, which would take
	// no effect there: gateway.upstream, upstream_key, body_limit,
	// timeouts.connect and timeouts.first_byte, and search.embeddings
	// url, model, key, cache_dir, cache_max_mb and query_timeout (provider openai works
	// only where the base had it at start-up).
	Profiles []ProfileSpec `yaml:"profiles"`
}

// GatewaySpec is the gateway section.
type GatewaySpec struct {
	// Listen is the address to serve on, read at start-up. Default
	// 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// Upstream is the base URL of the OpenAI-compatible API, ending in /v1,
	// read at start-up. Default https://api.openai.com/v1.
	Upstream string `yaml:"upstream"`
	// UpstreamKey, when set, replaces the client's Authorization with this
	// key. "$NAME" or "${NAME}" reads the environment variable NAME at load
	// time. It reloads live, but only the base policy's applies (not a
	// profile's). Default empty: the client's key passes through.
	UpstreamKey string `yaml:"upstream_key"`
	// Mode is search, preselect, hybrid (default) or passthrough.
	Mode Mode `yaml:"mode"`
	// MinTools is the smallest tools array the gateway rewrites; smaller
	// ones go upstream unchanged, unless the policy hides one of their
	// tools: then the gateway sends every other tool, without tool_search,
	// and answers a call of the hidden one itself. Default 12.
	MinTools int `yaml:"min_tools"`
	// MaxRounds bounds tool_search rounds per client request. Default 4.
	MaxRounds int `yaml:"max_rounds"`
	// MaxActive bounds the tools sent upstream besides tool_search. Default 32.
	MaxActive int `yaml:"max_active"`
	// Preselect is how many tools are preselected per user turn in hybrid and
	// preselect modes. Default 6 (7 from 150 tools with ScaleWithCatalog).
	Preselect int `yaml:"preselect"`
	// Explore, in preselect mode, gives the last preselected slot to a tool
	// drawn from the few ranked just below the cut, a different one each
	// user turn, so a conversation whose first guess was wrong is not stuck
	// with it (the model has no tool_search there). Default false.
	Explore bool `yaml:"explore"`
	// FollowUp is how many tools join after the first tool result of each
	// user turn in hybrid and preselect modes: the next-best for the
	// conversation, given the call just made, so a task's later steps
	// seldom need a search round (a round resends the whole conversation; a
	// tool costs ~100 tokens). Later tool results add none: each change of
	// the tools array costs the conversation its prompt-cache hits.
	// Default 2.
	FollowUp int `yaml:"follow_up"`
	// SearchRound is what the round that answers a tool_search offers
	// besides tool_search. found: the tools the search found, and the
	// core, tool_choice and called ones; the turn's other guesses, which
	// the model has just passed over, step aside for that round and come
	// back with the next request (fewest tokens). all: every active tool,
	// the array the next request resends, so a provider's prompt cache
	// serves that request's tools and messages: better where a cache hit
	// costs a quarter of the input price or less (gpt-4.1, the gpt-5
	// family). Default found.
	SearchRound SearchRound `yaml:"search_round"`
	// Usage is how the usage the client gets counts a turn the gateway
	// answered in several upstream rounds. summed: every count is the sum
	// over the rounds, what the upstream billed. context: the input counts
	// (prompt and input tokens, cache reads and writes) are the last
	// round's, the size of the context the model answered from; output
	// counts are still summed. Agents that size their context window from
	// a response's usage (Claude Code's auto-compaction) read a summed
	// turn that searched as about twice as full as it is, and compact or
	// trim it early. The X-Toolgate-Input-Tokens header,
	// the metrics and the decision log count every round either way.
	// Default summed.
	Usage Usage `yaml:"usage"`
	// ScaleWithCatalog widens preselect, follow_up and search.limit for
	// larger catalogs: from 150 tools one more preselected tool and one
	// more follow-up, and one more search result per 30 tools above 150
	// (at most 8). Direct, an agent pays for every tool it sends, so a
	// larger catalog leaves the gateway a larger share to spend, and more
	// distractors make its first guesses miss more often. Default true.
	ScaleWithCatalog bool `yaml:"scale_with_catalog"`
	// PassthroughHistoryTokens, when above 0, sends a conversation whose
	// messages exceed about this many tokens (4 bytes a token) upstream
	// unchanged. A provider's prompt cache serves a stable prompt at a
	// fraction of the price, and the gateway's tools array changes with
	// each turn's picks, putting the whole history back at full price: past
	// some length that costs more than the tools it saves. Only for
	// catalogs the upstream accepts whole (OpenAI: 128 tools). A
	// conversation the policy hides a tool of goes through the gateway as
	// one under MinTools does. Default 0.
	PassthroughHistoryTokens int `yaml:"passthrough_history_tokens"`
	// Timeouts bound the upstream exchange.
	Timeouts TimeoutsSpec `yaml:"timeouts"`
	// BodyLimit is the largest request body accepted, in bytes. It is read
	// from the base policy before the body is parsed, so a profile cannot
	// set it. Default 33554432 (32 MiB).
	BodyLimit int64 `yaml:"body_limit"`
	// Retries is how many times an upstream answer with a 5xx status, or a
	// 429 that names a wait of at most 20 s, to a round after a search is
	// sent again; that round sent the client nothing. A turn's first round and a request passed through are sent
	// once, as a reverse proxy sends them (the client's SDK retries them).
	// A transport error (connection refused, a timeout) is not retried: it
	// fails the request at once. Default 1.
	Retries int `yaml:"retries"`
}

// TimeoutsSpec holds durations written like 10s, 2m, 1h30m.
type TimeoutsSpec struct {
	// Connect bounds dialing the upstream; read at start-up. Default 10s.
	Connect time.Duration `yaml:"connect"`
	// FirstByte bounds the wait for response headers, and for a stream's
	// first data after them; read at start-up. Default 10m, the OpenAI
	// SDKs' own request timeout: a reasoning model's answer can take
	// minutes to its first byte (streamed, nothing is sent while it
	// thinks), and a gateway must not cut what a direct call would get.
	FirstByte time.Duration `yaml:"first_byte"`
	// Idle bounds the silence between stream chunks once output has begun
	// (lifecycle events such as response.created, message_start and pings
	// are not output: before it, FirstByte bounds the silence). Default
	// 120s.
	Idle time.Duration `yaml:"idle"`
	// Request bounds one whole client request that is not streamed, all
	// rounds. A stream is bounded by FirstByte and Idle instead, as the
	// SDKs bound each read of a stream: one still sending data is never
	// cut. Default 10m.
	Request time.Duration `yaml:"request"`
}

// SearchSpec is the search section.
type SearchSpec struct {
	// Limit is the default number of tools a tool_search returns (the
	// model may ask for up to 10). One search returns at most 10, so a
	// value above 10 acts as 10. Default 4 (more from 180 tools with
	// gateway.scale_with_catalog).
	Limit int `yaml:"limit"`
	// Weights of the ranking ensemble; 0 switches a signal off.
	Weights WeightsSpec `yaml:"weights"`
	// Embeddings configures semantic search.
	Embeddings EmbeddingsSpec `yaml:"embeddings"`
}

// WeightsSpec are the ensemble weights, each >= 0.
type WeightsSpec struct {
	Lexical    float64 `yaml:"lexical"`    // BM25F over names, descriptions, enrichment. Default 1.
	Semantic   float64 `yaml:"semantic"`   // embeddings similarity. Default 0.5.
	Focus      float64 `yaml:"focus"`      // tools of the session's current entity. Default 0.15.
	Transition float64 `yaml:"transition"` // P(next | last tool). Default 0.6.
	Recency    float64 `yaml:"recency"`    // recently used tools (sticky). Default 0.1.
	Anchor     float64 `yaml:"anchor"`     // anchors' boosts are multiplied by this. Default 1.
	Avoid      float64 `yaml:"avoid"`      // penalty when avoid_when matches. Default 1.
	Related    float64 `yaml:"related"`    // score share of related tools riding along. Default 0.5.
	// Decompose is the share a multi-part request's sub-queries contribute
	// (0 = off, the default: it cost recall on the dev sets; 0.7 is sane).
	Decompose float64 `yaml:"decompose"`
	// Done is how much weight a query term loses when a tool the
	// conversation already called covers it, so follow-up tools rank for
	// what the request still asks (0 = off, at most 1). Default 0.5.
	Done float64 `yaml:"done"`
	// DocNeighbours is the weight of each tool's word-vector neighbours
	// (words its text lacks) as lexical matches. Default 0.3; 0 = off.
	DocNeighbours float64 `yaml:"doc_neighbours"`
	// Habit is the weight of what the tenant's earlier requests with the
	// same words went on to call, learned online. Default 1; 0 = off.
	Habit float64 `yaml:"habit"`
}

// EmbeddingsSpec is search.embeddings.
type EmbeddingsSpec struct {
	// Provider is offline (default; bundled word vectors, no network), openai
	// (any OpenAI-compatible /v1/embeddings endpoint) or off. The openai
	// client is built at start-up from url, model, key, cache_dir,
	// cache_max_mb and query_timeout; a reload that switches to openai does not create one
	// (ranking stays on the word vectors until a restart).
	Provider string `yaml:"provider"`
	// URL is the embeddings base URL ending in /v1. Default: the upstream.
	URL string `yaml:"url"`
	// Model is the embeddings model. Default text-embedding-3-small.
	Model string `yaml:"model"`
	// Key is the embeddings API key; "$NAME" reads the environment (with
	// provider openai, an unset or empty NAME is refused). Default:
	// the upstream_key; with neither, requests carry no key (the client's
	// key is never used for embeddings).
	Key string `yaml:"key"`
	// CacheDir holds embeddings on disk, relative to this file if not
	// absolute. Default empty: the user cache dir (toolgate/embeddings).
	CacheDir string `yaml:"cache_dir"`
	// CacheMaxMB bounds the vector files in cache_dir, in MiB: past it the
	// least recently written or read are removed until 90 % of it is
	// used. Default 1024 (some 170,000 vectors of 1536 dimensions); 0 or
	// less means the default; at most 1048576 (1 TiB).
	CacheMaxMB int `yaml:"cache_max_mb"`
	// QueryTimeout is how long a request waits for its queries' vectors,
	// all of them together (its preselection and every search), before
	// it ranks with the word vectors, at most 1m. Default 2s: a
	// CPU-hosted endpoint may need more, a latency budget less.
	QueryTimeout time.Duration `yaml:"query_timeout"`
}

// SessionsSpec is the sessions section, read at start-up (a reload does
// not change it).
type SessionsSpec struct {
	// TTL is how long an idle session is kept. Default 1h.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the in-process store, for all tenants: when it is
	// full, the least recently used session of the tenant holding the most
	// is evicted. Default 10000.
	MaxEntries int `yaml:"max_entries"`
	// Store is "memory" (default) or a redis:// or rediss:// URL shared by
	// several replicas.
	Store string `yaml:"store"`
}

// RiskSpec is the risk section: risk gating.
type RiskSpec struct {
	// Gate is the lowest risk hidden unless the latest user turn shows write
	// intent: off, moderate or destructive (default).
	Gate string `yaml:"gate"`
	// WriteIntent is a regular expression (RE2) over the latest user message;
	// a match means the user asks to change something. Default: a built-in
	// list of English change verbs (delete, remove, update, create, ...).
	WriteIntent string `yaml:"write_intent"`
	// DestructiveNames, when set, is a regular expression over tool names;
	// tools with no risk in tools.<name> that match it count as destructive.
	// Default empty: only tools marked risk: destructive are gated.
	DestructiveNames string `yaml:"destructive_names"`
}

// BundleSpec is one entry of bundles.
type BundleSpec struct {
	// Description says what the bundle is for: a search answer that returns
	// the bundle's tools, for a query that names the bundle, shows it.
	Description string `yaml:"description"`
	// Tools are globs of the bundle's tools.
	Tools []string `yaml:"tools"`
}

// ToolSpec is tools.<name>: enrichment merged into the catalog.
type ToolSpec struct {
	Title     string   `yaml:"title"`      // a human title, indexed
	Keywords  []string `yaml:"keywords"`   // words users say for this tool, indexed
	Examples  []string `yaml:"examples"`   // example requests, indexed
	Category  string   `yaml:"category"`   // links to categories.<name>
	Entity    string   `yaml:"entity"`     // the thing it works on (issue, file, page): session focus
	Related   []string `yaml:"related"`    // tools that may ride along in results
	AvoidWhen []string `yaml:"avoid_when"` // phrases that make it the wrong choice
	Risk      string   `yaml:"risk"`       // safe, moderate or destructive
	Hint      string   `yaml:"hint"`       // a usage hint shown with the tool
}

// AnchorSpec is one entry of anchors.
type AnchorSpec struct {
	// Pattern is a regular expression (RE2) over the user's text; prefix
	// (?i) for case-insensitive.
	Pattern string `yaml:"pattern"`
	// Tools are globs of the tools to boost.
	Tools []string `yaml:"tools"`
	// Boost is added to the tools' scores (times weights.anchor). Default 1.
	Boost float64 `yaml:"boost"`
}

// CategorySpec is categories.<name>.
type CategorySpec struct {
	// Hints is a markdown file, relative to this file (e.g.
	// hints/code-hosting.md), read at load time and on every reload.
	Hints string `yaml:"hints"`
	// Text is inline guidance, used instead of a file.
	Text string `yaml:"text"`
}

// ProfileSpec is one entry of profiles: a match plus overrides of any
// section except gateway.listen, sessions, profiles and the start-up
// settings Document.Profiles lists.
type ProfileSpec struct {
	// Name labels the profile in logs and decisions.
	Name string `yaml:"name"`
	// Match selects requests; every condition given must hold, and an empty
	// match matches every request.
	Match MatchSpec `yaml:"match"`
	// Document holds the overrides, written at the profile's top level.
	Document `yaml:",inline"`
}

// MatchSpec is profiles[].match; values are globs.
type MatchSpec struct {
	// Key matches the client's key label (never the key itself).
	Key string `yaml:"key"`
	// Model matches the request's model.
	Model string `yaml:"model"`
	// Header matches request headers by name; a header the request does
	// not send matches no pattern, "*" included.
	Header map[string]string `yaml:"header"`
}

// defaultWriteIntent is deliberately broad: hiding a destructive tool the
// user asked for costs a failed task, showing it when the user only asked to
// read costs little more than the tokens.
const defaultWriteIntent = `(?i)\b(delete|remove|drop|destroy|purge|erase|wipe|truncate|clear|clean|reset|revoke|kill|terminate|stop|cancel|close|archive|uninstall|unpublish|disable|deactivate|ban|block|kick|overwrite|replace|force|rm|rmdir|merge|move|rename|update|edit|modify|change|set|write|create|add|make|post|send|publish|push|commit|upload|install|deploy|approve|reject|transfer|pay|get rid of|undo|revert|restore)`

// defaultDocument is the built-in policy as a Document; decoding a file
// starts from it, so absent keys keep these values.
func defaultDocument() Document {
	return Document{
		Gateway: GatewaySpec{
			Listen:    "127.0.0.1:8080",
			Upstream:  "https://api.openai.com/v1",
			Mode:      ModeHybrid,
			MinTools:  12,
			MaxRounds: 4,
			MaxActive: 32,
			// 6 preselected + 4 per search keeps the model at 10 tools
			// after one search (7 + 4 from 150 tools, scale_with_catalog).
			// Against 7 + 3 on LiveMCPBench episodes over 120 tools, in
			// three task orders: input tokens -84.8/-84.9/-84.9% ->
			// -85.0/-85.2/-85.1%, calls 1.30/1.28/1.29x -> 1.28/1.26/1.27x;
			// all mcp episodes -89.0% -> -89.9% at 1.07x; recall through
			// the gateway the same but mcp R@10 (.898 -> .894). An earlier
			// session measured 7 + 3 against 5 + 5 on the bundled tasks:
			// fewer calls (1.21x vs 1.28x) and input tokens.
			Preselect: 6,
			// Measured on the bundled tasks (183 tools) against 0:
			// upstream calls 1.28x of direct (1.31x), input tokens -87.7%
			// (-88.1%), billed with cache hits at a tenth of the price
			// -62.7% (-63.3%), 46/46 steps each.
			FollowUp: 2,
			// Measured on LiveMCPBench episodes over a 120-tool agent
			// against all: input tokens -84.3% (-81.4%) at the same
			// 1.30x calls and 73/73 steps; billed with cache hits at half
			// the price -77.9% (-76.5%), at a tenth -31.6% (-40.1%).
			SearchRound: SearchRoundFound,
			Usage:       UsageSummed,
			// Measured on LiveMCPBench episodes (selector/README.md, round
			// 19) over 150 / 180 / 210-tool agents, in three task orders:
			// calls 1.31-1.32x / 1.31x / 1.35-1.36x without, 1.29-1.30x /
			// 1.28-1.29x / 1.29-1.30x with, input tokens -86.5 / -88.6 /
			// -90.1 % without, -85.0 / -86.8 / -87.9 % with.
			ScaleWithCatalog: true,
			Timeouts: TimeoutsSpec{
				Connect:   10 * time.Second,
				FirstByte: 10 * time.Minute,
				Idle:      120 * time.Second,
				Request:   10 * time.Minute,
			},
			BodyLimit: 32 << 20,
			Retries:   1,
		},
		Search: SearchSpec{
			// See gateway.preselect.
			Limit: 4,
			// The selector's defaults are the ones measured on the dev sets.
			Weights:    WeightsSpec(selector.DefaultWeights()),
			Embeddings: EmbeddingsSpec{Provider: "offline", Model: "text-embedding-3-small", CacheMaxMB: selector.DefaultDiskCacheMB, QueryTimeout: selector.DefaultQueryTimeout},
		},
		Sessions: SessionsSpec{TTL: time.Hour, MaxEntries: 10000, Store: "memory"},
		Risk:     RiskSpec{Gate: RiskDestructive, WriteIntent: defaultWriteIntent},
	}
}

// Risk levels of tools.<name>.risk, and risk.gate's "off".
const (
	RiskSafe        = "safe"
	RiskModerate    = "moderate"
	RiskDestructive = "destructive"
	riskOff         = "off"
)
