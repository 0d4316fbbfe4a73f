// Package selector compiles a tools catalog into a search index and ranks the
// catalog's tools for a query. It owns the index, the ranking signals, the
// offline word vectors, and the vectors a ranking keeps in memory. It knows no
// HTTP and nothing of the chat API, YAML, or where session state is stored:
// callers hand it plain values (tools, enrichment, the session's signals).
// Remote embeddings reach it through the Embedder and QueryEmbedder
// interfaces, which internal/embeddings implements for an OpenAI-compatible
// endpoint; the selector itself makes no network call.
package selector

import (
	"context"
	"regexp"

	"golang.org/x/sync/semaphore"
)

// Tool is one tool of a catalog as the selector sees it: what the client sent,
// plus the enrichment the policy holds for it.
type Tool struct {
	Name        string
	Description string
	Params      []Param
	Meta        Meta
}

// Param is one parameter of a tool's JSON schema (top-level properties).
type Param struct {
	Name        string
	Description string
}

// Meta is the per-tool enrichment from the policy. Every field is optional.
type Meta struct {
	Title     string
	Keywords  []string
	Examples  []string
	Category  string
	Entity    string
	Related   []string
	AvoidWhen []string // phrases; a query that matches one is penalised
	Risk      string   // "safe", "moderate", "destructive" or ""
	Hint      string   // a usage hint returned with the tool
}

// Weights are the ensemble's weights. They share one scale: the lexical
// ranking's first tool gets Lexical, so the additive weights read as
// shares of a clear lexical match. Zero disables a signal; an all-zero
// Weights means DefaultWeights, whose values are the defaults below.
type Weights struct {
	// Lexical scales the BM25F ranking, fused by reciprocal rank (rank r
	// is worth Lexical × 11 / (10 + r), so rank 1 gets Lexical), and the
	// lexical winner's bonus for its margin over the runner-up. Default 1.
	Lexical float64
	// Semantic scales the ranking by vector similarity (the offline word
	// vectors, or Config.Embedder's), fused by rank as Lexical is, and
	// max-sim with it (0.4 at the default). Default 0.5.
	Semantic float64
	// Focus is added to the tools of the session's entity focus
	// (Query.Focus). Default 0.15.
	Focus float64
	// Transition scales P(tool | the last tool called), 0..1, from the
	// Config's transitions and Query.Learned. Default 0.6.
	Transition float64
	// Recency scales the stickiness of the recently used tools
	// (Query.Recent): 1 for the latest, times 0.7 for each one before
	// it. Default 0.1.
	Recency float64
	// Anchor scales the boost of each anchor whose pattern the query
	// matches (Anchor.Boost, 1 when unset), summed per tool. Default 1.
	Anchor float64
	// Avoid is subtracted from a tool one of whose avoid_when phrases the
	// query matches. Default 1.
	Avoid float64
	// Related is the share of a top tool's score its related tools
	// (Meta.Related) ride along with. Default 0.5.
	Related float64
	// Decompose is the share of a sub-query's score a multi-part request's
	// parts contribute. Default 0, no decomposition: on the dev sets it
	// cost 0.002-0.005 recall@5, so it is opt-in; 0.7 is a sane value.
	Decompose float64
	// Done is how much of its weight, 0..1, a query term loses in
	// Preselect when a tool the conversation already called covers it:
	// that part of the request is done, so follow-up tools rank for the
	// rest. Default 0.5.
	Done float64
	// DocNeighbours is the boost of the document-side neighbour field
	// (docexpand.go): each tool's words' word-vector neighbours that its
	// text lacks, matched against the query next to bleve, on the scale of
	// the lexical score's per-field boosts (name 0.5, description 0.3).
	// Default 0.3.
	DocNeighbours float64
	// Habit scales how strongly, 0..1, what a tenant's earlier requests
	// with the same words went on to call points at a tool (Query.Habits;
	// Preselect only). Default 1.
	Habit float64
}

// Anchor boosts tools when the query matches Pattern.
type Anchor struct {
	Pattern *regexp.Regexp
	Tools   []string // exact names or globs, resolved by the caller or the catalog
	Boost   float64
}

// Config is the compiled-in ranking configuration of a catalog.
type Config struct {
	Weights     Weights
	Anchors     []Anchor
	Transitions map[string]map[string]float64 // last tool -> next tool -> P
	// Embedder computes semantic vectors when Weights.Semantic > 0; nil
	// means the offline word vectors embedded in the binary.
	Embedder Embedder
	// embedSlots bounds the background catalog embeddings of a Cache's
	// catalogs running at once; nil (Compile outside a Cache) means none.
	embedSlots *semaphore.Weighted
	// embedLater holds a Cache's catalog's background embedding until a
	// request that used it is accepted (Cache.Accepted): a request whose
	// credential the upstream refuses must not spend the embeddings
	// endpoint's key.
	embedLater bool
}

// Query is one search.
type Query struct {
	Text  string
	Limit int // <= 0 means the default (5)
	// Skip reports the tools not to return (already active, denied) by
	// their position in the catalog (Names, Position: the order of the
	// tools array it was compiled from). It is asked of every candidate,
	// and a position costs one slice read where a name would cost a hash
	// and a map probe, each a cache miss once the catalog has gone cold
	// between requests.
	Skip   func(pos int) bool
	Focus  string   // the session's entity focus, if any
	Last   string   // the last tool the session called
	Recent []string // recently used tools, most recent last
	// Done lists the tools the conversation has called: Preselect ranks
	// for what the request still asks.
	Done []string
	// Learned holds the transitions observed online; nil means only the
	// Config's seeded transitions count.
	Learned *Transitions
	// Habits holds what the tenant's earlier turns called, by their
	// words; Preselect lifts those tools for a request with the same
	// words. nil means no habits.
	Habits *Habits
	// EmbedBudget, when not nil, bounds how long the query's remote
	// embedding may keep the caller waiting, shared with the other
	// queries given the same budget (one request's); once it is spent
	// they rank with the offline word vectors. nil: each query waits up
	// to the embedder's query timeout.
	EmbedBudget *EmbedBudget
	// Explain fills each Result's Signals, the per-signal view `gateway
	// search` prints. The request path leaves it off: a map per result
	// would be a tenth of a preselection's allocations, read by nothing.
	Explain bool
}

// Result is one ranked tool.
type Result struct {
	Name        string
	Description string // first line of the tool's description
	Hint        string
	Category    string
	// Score is the tool's ensemble score: its signals' contributions
	// (Weights) added up, the avoid penalty subtracted; a tool that rode
	// along gets Weights.Related times its companion's. Results rank by
	// it, highest first. It is comparable within one Results only, not
	// across queries or catalogs, and is not a probability (see
	// Results.Confidence).
	Score   float64
	Signals map[string]float64 // per-signal contribution (Query.Explain), for debugging
}

// Results is the answer to a Query.
type Results struct {
	Items      []Result
	Confidence float64 // 0..1: how sure the ranking is of its top results
}

// Searcher is what the proxy needs of a compiled catalog.
type Searcher interface {
	Search(ctx context.Context, q Query) (Results, error)
}
