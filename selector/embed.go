package selector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Embedder turns texts into vectors, e.g. an OpenAI-compatible
// /v1/embeddings endpoint (internal/embeddings). Implementations must be safe for concurrent use
// and honour ctx; an error makes the selector rank with the offline word
// vectors instead.
type Embedder interface {
	// Embed embeds a catalog's tool texts, one vector per text. It runs in
	// the background and may take its time (retries included).
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the embedding model; it keys caches.
	Model() string
}

// QueryEmbedder is an Embedder with a path of its own for a request's query,
// which the request waits on: it should answer or fail fast (its own short
// deadline, no retries, no calls to an endpoint known to be failing).
// Without it a query goes through Embed under DefaultQueryTimeout.
type QueryEmbedder interface {
	EmbedQuery(ctx context.Context, text string) ([]float32, error)
}

// EmbedObserver is told of every embeddings call, e.g. to count them in
// metrics: kind is "query" or "catalog", outcome "ok" or why not. It must
// be safe for concurrent use and return quickly.
type EmbedObserver interface {
	EmbeddingCall(kind, outcome string, d time.Duration)
}

// DefaultQueryTimeout bounds the embedding of a request's query. The
// semantic signal is optional, so a slow endpoint must cost a request this
// much at most, not the catalog batches' 30 s.
const DefaultQueryTimeout = 2 * time.Second

// DefaultDiskCacheMB is the default bound, in MiB, of a remote Embedder's
// vector files on disk (internal/embeddings; the policy's
// search.embeddings.cache_max_mb): some 170,000 vectors of 1536
// dimensions. The selector keeps no files; the number lives here, beside
// DefaultQueryTimeout, so that the policy's defaults do not import the
// HTTP client.
const DefaultDiskCacheMB = 1024

// EmbedBudget is how long the query embeddings of one request may keep it
// waiting, all of them together (Query.EmbedBudget): its preselection and
// every search of every round. A query timeout alone bounds each query,
// and an endpoint slower than usual but inside it (never failing, so never
// cooled down) cost a request that timeout once per search, one search
// after another. Once the budget is spent, the request's rankings use the
// offline word vectors. It is safe for concurrent use; queries waiting at
// once each get what is left.
type EmbedBudget struct {
	mu   sync.Mutex
	left time.Duration
}

// NewEmbedBudget returns a budget of d.
func NewEmbedBudget(d time.Duration) *EmbedBudget { return &EmbedBudget{left: d} }

// QueryTimeoutOf is how long e lets one query wait for its vector: its
// QueryTimeout method's answer, or DefaultQueryTimeout.
func QueryTimeoutOf(e Embedder) time.Duration {
	if q, ok := e.(interface{ QueryTimeout() time.Duration }); ok && q.QueryTimeout() > 0 {
		return q.QueryTimeout()
	}
	return DefaultQueryTimeout
}

// begin returns ctx bounded by what is left of b, and end, which spends
// the time since; ok is false, and nothing else set, when nothing is left.
// A nil budget bounds nothing.
func (b *EmbedBudget) begin(ctx context.Context) (bctx context.Context, end func(), ok bool) {
	if b == nil {
		return ctx, func() {}, true
	}
	b.mu.Lock()
	left := b.left
	b.mu.Unlock()
	if left <= 0 {
		return nil, nil, false
	}
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, left)
	return bctx, func() {
		cancel()
		b.mu.Lock()
		b.left -= time.Since(start)
		b.mu.Unlock()
	}, true
}

// Catalog retries: a catalog whose vectors could not be computed tries
// again when a search finds them missing, this long after the failure,
// doubling with each failure. Its searches rank with the offline word
// vectors meanwhile.
const (
	catalogRetryMin = 30 * time.Second
	catalogRetryMax = 10 * time.Minute
)

// errBadVector is a vector the selector cannot rank with.
var errBadVector = errors.New("invalid vector")

// CheckVector reports why v cannot be used as an embedding, if it cannot:
// empty, not dims long (when dims > 0), a NaN or infinite component, or no
// length (normalising would divide by zero). An Embedder may call it to
// refuse, and not cache, what the ranking would drop; the ranking checks
// every vector again whatever the Embedder did. It does not modify v.
func CheckVector(v []float32, dims int) error {
	if len(v) == 0 {
		return fmt.Errorf("%w: empty", errBadVector)
	}
	if dims > 0 && len(v) != dims {
		return fmt.Errorf("%w: %d dimensions, want %d", errBadVector, len(v), dims)
	}
	var n float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: not finite", errBadVector)
		}
		n += f * f
	}
	if n == 0 || math.IsInf(n, 0) {
		return fmt.Errorf("%w: zero or overflowing norm", errBadVector)
	}
	return nil
}

// remoteSemantic is a catalog's ranking with a remote embedder: its tool
// vectors, computed in the background, and the query's.
type remoteSemantic struct {
	e     Embedder
	texts []string
	// bg is the compile's context without its cancellation, ended by
	// halt: a catalog its cache let go stops embedding.
	bg   context.Context
	halt context.CancelFunc
	// slots, when not nil, bounds the catalog embeddings running at once,
	// the cache's catalogs together.
	slots *semaphore.Weighted
	vecs  atomic.Pointer[toolVecs]
	now   func() time.Time

	mu       sync.Mutex
	held     bool      // not started yet (Config.embedLater): no Embed before start
	inflight bool      // a background Embed is running
	failures int       // consecutive failed attempts
	next     time.Time // no new attempt before this
}

// toolVecs are a catalog's unit tool vectors, all dims long.
type toolVecs struct {
	vecs [][]float32
	dims int
}

// startRemote computes the tool vectors with e in the background, so a
// search never waits on a cold catalog; until they arrive, and whenever the
// query cannot be embedded, the catalog ranks with its offline vectors.
func (c *Catalog) startRemote(ctx context.Context, e Embedder) *remoteSemantic {
	r := &remoteSemantic{e: e, texts: make([]string, len(c.tools)), slots: c.cfg.embedSlots, now: time.Now}
	r.bg, r.halt = context.WithCancel(context.WithoutCancel(ctx))
	for i := range c.tools {
		r.texts[i], _ = toolText(&c.tools[i])
	}
	r.held = c.cfg.embedLater
	r.retry() // the first attempt: no failure to wait out yet
	return r
}

// start lets a held embedding begin (Config.embedLater); it does nothing
// more once it has.
func (r *remoteSemantic) start() {
	r.mu.Lock()
	held := r.held
	r.held = false
	r.mu.Unlock()
	if held {
		r.retry()
	}
}

// fetch embeds the tool texts and publishes their vectors, or schedules
// the next attempt. The embedder keeps what it computed, so a later attempt
// asks only for what is still missing.
func (r *remoteSemantic) fetch() {
	vecs, err := r.embed()
	var tv *toolVecs
	if err == nil {
		tv, err = newToolVecs(vecs, len(r.texts))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight = false
	if r.bg.Err() != nil { // halted: no catalog to embed for
		return
	}
	if err != nil {
		r.failures++
		wait := catalogRetryMin << min(r.failures-1, 10)
		r.next = r.now().Add(min(wait, catalogRetryMax))
		return
	}
	r.failures = 0
	r.vecs.Store(tv)
}

// embed embeds the tool texts once one of the shared slots is free, or
// fails when the catalog is halted first.
func (r *remoteSemantic) embed() ([][]float32, error) {
	if r.slots != nil {
		if err := r.slots.Acquire(r.bg, 1); err != nil {
			return nil, fmt.Errorf("waiting to embed the catalog: %w", err)
		}
		defer r.slots.Release(1)
	}
	return r.e.Embed(r.bg, r.texts)
}

// stop ends the catalog's background embedding, running or waiting, for
// good: its cache let it go. Searches of it still running rank with the
// offline vectors.
func (r *remoteSemantic) stop() {
	if r.halt != nil {
		r.halt()
	}
}

// retry starts a fetch if none runs, none has succeeded and the last
// failure's wait, if any, is over. A search that found no vectors may get
// here after a fetch published them: without the check it started a
// second one, an embeddings call for the whole catalog again
// (TestConcurrentFirstRequestsCompileTheCatalogOnce saw two under load).
func (r *remoteSemantic) retry() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held || r.inflight || r.vecs.Load() != nil || r.now().Before(r.next) || r.bg.Err() != nil {
		return
	}
	r.inflight = true
	go r.fetch()
}

// newToolVecs checks a catalog's vectors (one per tool, one dimension for
// all: vectors of two spaces cannot be compared) and returns unit copies.
// A vector that is zero or not finite is left out (that tool gets no
// semantic score).
func newToolVecs(vecs [][]float32, n int) (*toolVecs, error) {
	if len(vecs) != n {
		return nil, fmt.Errorf("embedding catalog: %d vectors for %d tools", len(vecs), n)
	}
	tv := &toolVecs{vecs: make([][]float32, n)}
	for i, v := range vecs {
		if CheckVector(v, 0) != nil {
			continue
		}
		if tv.dims == 0 {
			tv.dims = len(v)
		}
		if len(v) != tv.dims {
			return nil, fmt.Errorf("embedding catalog: tool %d has %d dimensions, tool vectors before it %d", i, len(v), tv.dims)
		}
		tv.vecs[i] = normalize(append([]float32(nil), v...))
	}
	if tv.dims == 0 {
		return nil, fmt.Errorf("embedding catalog: %w", errBadVector)
	}
	return tv, nil
}

// query embeds text as a unit vector of dims dimensions, or returns nil;
// budget, when not nil, bounds the wait and is charged with it.
func (r *remoteSemantic) query(ctx context.Context, text string, dims int, budget *EmbedBudget) []float32 {
	ctx, end, ok := budget.begin(ctx)
	if !ok {
		return nil
	}
	defer end()
	var v []float32
	if qe, ok := r.e.(QueryEmbedder); ok {
		v, _ = qe.EmbedQuery(ctx, text)
	} else {
		qctx, cancel := context.WithTimeout(ctx, DefaultQueryTimeout)
		vs, err := r.e.Embed(qctx, []string{text})
		cancel()
		if err == nil && len(vs) == 1 {
			v = vs[0]
		}
	}
	if CheckVector(v, dims) != nil {
		return nil
	}
	return normalize(append([]float32(nil), v...))
}

// sims returns each tool's similarity to text in buf (one slot per tool),
// or nil when the tool vectors are missing (a search then asks for them
// again, see retry) or the query has no vector of their space.
func (r *remoteSemantic) sims(ctx context.Context, text string, budget *EmbedBudget, buf []float64) []float64 {
	tv := r.vecs.Load()
	if tv == nil {
		r.retry()
		return nil
	}
	qv := r.query(ctx, text, tv.dims, budget)
	if qv == nil {
		return nil
	}
	sims := buf[:len(tv.vecs)]
	for i, v := range tv.vecs {
		sims[i] = 0
		if v != nil {
			sims[i] = float64(dot(qv, v))
		}
	}
	return sims
}
