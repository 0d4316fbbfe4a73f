package selector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
)

// Cache holds compiled catalogs keyed by a caller-given key (the proxy uses
// a hash of its tools' texts that no order changes, plus the policy's
// catalog key, and asks the catalog for its request's order with
// InOrder: a catalog is compiled once for every order). Concurrent
// Gets of the same missing key compile once. It is safe for concurrent use and
// starts no goroutines. Failed compiles are not cached.
//
// It is bounded by the heap its catalogs hold (CacheOptions.Bytes), for
// what a compiled catalog holds grows with its distinct words far more
// than with its tools (BenchmarkCatalogHeld: 0.5 MB for 200 tools of one
// line, 6 MB for 200 tools of 300 bytes and five parameters, 15 MB for
// 128 tools of 4 KB and 60 parameters, and a few megabytes more as its
// memos fill with the words of the requests it ranks), so clients, or
// tenants, that send a changed catalog with every request would fill a
// count bound with the largest ones. Its catalogs and their tools are
// bounded too (CacheOptions.Catalogs, CacheTools). Catalogs not yet used
// by two accepted requests (Accepted) may fill a quarter of each bound,
// no more (catalogStore): clients that send one-off catalogs, or whose
// requests the upstream refuses, let go of each other's catalogs, not the
// ones re-sent. A set of catalogs asked for in turn that is larger than
// the bounds still hits about half the time (catalogStore). A catalog
// embeds its tools (Config.Embedder) only once a request that used it was
// accepted.
//
// Compiling costs far more than the compiled catalog holds: a 4,096-tool
// catalog of 4 MB of text took about a second of CPU and peaked at 300 to
// 570 MB of heap, so eight such requests at once peaked at 4.2 GB. The
// compiles running at once are therefore bounded by their text
// (CacheOptions.CompileBytes), and by their number (CacheOptions.Compiles:
// compiling is CPU work, which requests whose catalogs are compiled
// already must not queue behind); a Get that finds no room waits for it
// (compileQueue), up to CompileWait, then fails with ErrCompileBusy.
type Cache struct {
	held    *catalogStore
	group   singleflight.Group
	hits    atomic.Int64
	misses  atomic.Int64
	refused atomic.Int64

	queue  *compileQueue // admits compiles by weight (compileWeight) and number
	wait   time.Duration
	embeds *semaphore.Weighted // background catalog embeddings running (Config.Embedder)
	// compile is Compile; tests count the compiles running through it.
	compile func(context.Context, []Tool, Config) (*Catalog, error)

	retainMu sync.Mutex
	retained []uint64 // the rule keys Retain last named
}

// CacheTools is the most tools the catalogs a Cache holds may have in
// all, beside the byte bound, which is what bounds memory: at 32,768 the
// tools bound let 163 small catalogs of 200 tools fill it at 119 MB, and
// 200 tenants taking turns hit 55 % where this bound holds all of them.
// The catalog last compiled is held whatever its tools. Those compiled
// once and not asked for again hold a quarter of it at most.
const CacheTools = 1 << 17

// DefaultCacheBytes is CacheOptions.Bytes' default: 512 MB of compiled
// catalogs, some 80 catalogs of 200 tools with a few hundred bytes of
// text each, fewer once their memos fill.
const DefaultCacheBytes = 512 << 20

// DefaultCompileBytes is CacheOptions.CompileBytes' default: a catalog
// at the proxy's text cap (4 MB for 4,096 tools, 5 MB of weight)
// compiles alone, and a 200-tool one beside some forty others.
// BenchmarkFreshCatalogsAtOnce: eight fresh 2,048-tool catalogs of 2 MB
// peaked at 2.4 GB of heap unbounded, 0.75 GB under this bound, in as
// much time (the compiles are CPU-bound).
const DefaultCompileBytes = 4 << 20

// DefaultCompiles returns CacheOptions.Compiles' default: one processor
// fewer than the process may use, and at least one, so requests whose
// catalogs are compiled keep a processor (README: "A tools array the
// gateway has not compiled yet" has the load runs behind it). On two
// processors, 200 tenants arriving at once (a restart) were served as
// fast with their compiles one at a time as with all of them at once.
func DefaultCompiles() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// DefaultCatalogEmbeddings is CacheOptions.CatalogEmbeddings' default.
const DefaultCatalogEmbeddings = 2

// DefaultCompileWait is CacheOptions.CompileWait's default: several
// compiles of the largest catalogs.
const DefaultCompileWait = 5 * time.Second

// toolWeight is what a tool weighs in compile work beyond its text: its
// document, postings and field tables exist whatever its text.
const toolWeight = 256

// ErrCompileBusy is returned by Get when the catalog could not start
// compiling within CacheOptions.CompileWait, other compiles taking the
// room. Nothing was compiled; asking again later may succeed.
var ErrCompileBusy = errors.New("too many catalogs compiling at once")

// errStarterLeft: the caller whose Get started a compile left while the
// compile waited for room. The Gets that joined it wait again themselves.
var errStarterLeft = errors.New("the request that started the compile left while it waited")

// CacheOptions configures NewCacheWith.
type CacheOptions struct {
	// Catalogs bounds the catalogs held; <= 0 means 64.
	Catalogs int
	// Bytes bounds the heap the catalogs held hold together, as they
	// estimate it (within some 10 % of the heap they keep alive, their
	// tools' text included, the word vectors all catalogs share not).
	// A catalog whose heap alone passes it is compiled and returned but
	// not held: each Get of its key compiles it again. 0 means
	// DefaultCacheBytes; below 0, no bound.
	Bytes int64
	// CompileBytes bounds the compile work running at once, all Gets
	// together, in bytes of tool text (plus 256 a tool): memory while
	// compiling grows with it (100 to 200 bytes of heap a byte). A
	// catalog heavier than the bound compiles alone. 0 means
	// DefaultCompileBytes; below 0, no bound.
	CompileBytes int64
	// Compiles bounds the compiles running at once, all Gets together: a
	// compile runs on its request's goroutine, a processor's work for
	// milliseconds to a second. 0 means DefaultCompiles(); below 0, no
	// bound.
	Compiles int
	// CompileWait is how long a Get waits for room to compile before it
	// fails with ErrCompileBusy; <= 0 means DefaultCompileWait. The Get's
	// ctx ending stops the wait sooner.
	CompileWait time.Duration
	// CatalogEmbeddings bounds the catalogs whose tools a Config.Embedder
	// embeds in the background at once, the cache's catalogs together;
	// the others wait their turn, and stop waiting, or embedding, when
	// the cache lets their catalog go. <= 0 means
	// DefaultCatalogEmbeddings.
	CatalogEmbeddings int
}

// CacheStats are a Cache's counters since it was created.
type CacheStats struct {
	Hits     int64 // Gets answered from the cache
	Misses   int64 // Gets that compiled or waited on another Get's compile
	Refused  int64 // compiles given up for want of room (ErrCompileBusy)
	TooLarge int64 // catalogs compiled but not held: larger than CacheOptions.Bytes alone
	Len      int   // catalogs held now
	Tools    int64 // their tools
	Bytes    int64 // their estimated heap, as last read (when each was last asked for)
}

// NewCache returns a cache holding up to size catalogs (<= 0 means 64),
// least recently used evicted first, with the default byte and compile
// bounds.
func NewCache(size int) *Cache { return NewCacheWith(CacheOptions{Catalogs: size}) }

// NewCacheWith returns a cache configured by o.
func NewCacheWith(o CacheOptions) *Cache { return newCache(o, CacheTools) }

func newCache(o CacheOptions, maxTools int) *Cache {
	if o.Catalogs <= 0 {
		o.Catalogs = 64
	}
	if o.CompileBytes == 0 {
		o.CompileBytes = DefaultCompileBytes
	}
	if o.CompileWait <= 0 {
		o.CompileWait = DefaultCompileWait
	}
	if o.CatalogEmbeddings <= 0 {
		o.CatalogEmbeddings = DefaultCatalogEmbeddings
	}
	if o.Bytes == 0 {
		o.Bytes = DefaultCacheBytes
	}
	if o.Compiles == 0 {
		o.Compiles = DefaultCompiles()
	}
	// A queued compile is passed by smaller ones that fit for a quarter
	// of the wait, then by none: it still has the rest to get its room.
	queue := newCompileQueue(o.CompileBytes, o.Compiles, o.CompileWait/4)
	return &Cache{held: newCatalogStore(o.Catalogs, int64(maxTools), o.Bytes), wait: o.CompileWait, compile: Compile,
		queue: queue, embeds: semaphore.NewWeighted(int64(o.CatalogEmbeddings))}
}

// Get returns the catalog for key, compiling build's tools and config on a
// miss. build runs at most once per key among concurrent callers; a caller
// whose ctx ends stops waiting (the compile itself finishes for the
// others and is cached). A compile that finds no room waits for it up to
// CacheOptions.CompileWait, then fails with ErrCompileBusy.
func (c *Cache) Get(ctx context.Context, key string, build func() ([]Tool, Config)) (*Catalog, error) {
	return c.GetFor(ctx, "", key, build)
}

// GetFor is Get for a tenant: a compile it starts queues behind those of
// tenants that have compiled less (compileQueue), so a client that sends
// a new tools array every turn waits behind other tenants' first
// catalogs. The catalog is shared by key whoever compiled it.
func (c *Cache) GetFor(ctx context.Context, tenant, key string, build func() ([]Tool, Config)) (*Catalog, error) {
	if cat, ok := c.held.get(key); ok {
		c.hits.Add(1)
		return cat, nil
	}
	c.misses.Add(1)
	// One wait for room, however many compiles this Get joins: a Get that
	// joined a compile whose starter left asks again with what is left.
	until := time.Now().Add(c.wait)
	for {
		ch := c.group.DoChan(key, func() (any, error) { return c.compileKey(ctx, tenant, key, until, build) })
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for catalog compile: %w", ctx.Err())
		case r := <-ch:
			if errors.Is(r.Err, errStarterLeft) && ctx.Err() == nil {
				continue // this caller still wants it: wait for room in its own name
			}
			if r.Err != nil {
				return nil, fmt.Errorf("compiling catalog %s: %w", key, r.Err)
			}
			return r.Val.(*Catalog), nil
		}
	}
}

// compileKey compiles key's catalog once there is room for it, for the
// Get whose ctx and tenant are given and those that joined it, and holds
// it.
func (c *Cache) compileKey(ctx context.Context, tenant, key string, until time.Time, build func() ([]Tool, Config)) (*Catalog, error) {
	if cat, ok := c.held.get(key); ok {
		return cat, nil
	}
	tools, cfg := build()
	cfg.embedSlots, cfg.embedLater = c.embeds, true
	release, err := c.admit(ctx, tenant, compileWeight(tools), until)
	if err != nil {
		return nil, err
	}
	defer release()
	// Detached from the first caller's ctx: other callers share this
	// compile, and one client leaving must not fail it for them.
	cat, err := c.compile(context.WithoutCancel(ctx), tools, cfg)
	if err != nil {
		return nil, err
	}
	c.held.add(key, cat)
	return cat, nil
}

// admit takes room for a compile of weight n and a compile slot, waiting
// for them until until (the end of the Get's wait) while ctx lasts, and
// returns what gives them back. A compile heavier than the whole room takes all of it: it
// runs alone.
func (c *Cache) admit(ctx context.Context, tenant string, weight int64, until time.Time) (release func(), err error) {
	n := c.queue.weight(weight)
	wctx, cancel := context.WithDeadline(ctx, until)
	err = c.queue.acquire(wctx, tenant, n)
	cancel()
	switch {
	case err == nil:
		return func() { c.queue.release(n) }, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %w", errStarterLeft, ctx.Err())
	default:
		c.refused.Add(1)
		return nil, fmt.Errorf("%w: no room to compile %d KB of tool text within %v", ErrCompileBusy, max(weight>>10, 1), c.wait)
	}
}

// compileWeight is what compiling tools costs against the compile room:
// the bytes of their text, and toolWeight a tool.
func compileWeight(tools []Tool) int64 {
	var n int
	for i := range tools {
		t := &tools[i]
		n += toolWeight + len(t.Name) + len(t.Description) + len(t.Meta.Title) + len(t.Meta.Category) + len(t.Meta.Hint)
		for _, p := range t.Params {
			n += len(p.Name) + len(p.Description)
		}
		for _, lists := range [...][]string{t.Meta.Keywords, t.Meta.Examples, t.Meta.AvoidWhen} {
			for _, s := range lists {
				n += len(s)
			}
		}
	}
	return int64(n)
}

// Accepted notes that a request that used key's catalog was accepted
// (the upstream answered it with a 2xx): the first time, the catalog's
// background embedding (Config.Embedder) starts; the next time, the
// catalog is kept (catalogStore), as one its clients re-send. A request
// the upstream refuses is never noted: its catalog stays among those
// compiled once, which hold a quarter of the bounds, and embeds nothing
// with the embedder's key. A key whose catalog is not held is noted all
// the same, so its next compile is kept once accepted.
func (c *Cache) Accepted(key string) {
	if cat := c.held.accept(key); cat != nil {
		cat.startBackground()
	}
}

// Purge lets every catalog go. A caller that still holds a catalog keeps
// using it; it is collected when the last one is done. The hit and miss
// counters stay.
func (c *Cache) Purge() {
	c.held.purge()
}

// Retain tells the cache which rule sets its catalogs are compiled under
// now: keys are the caller's keys of what a catalog compiles from (the
// proxy's cache keys carry the policy's catalog key, one for the policy
// and one per profile). When a key the previous call named is missing,
// the catalogs compiled under it are keyed by rules no request asks for
// again, yet each would hold megabytes, and its index's goroutine, until
// the LRU got round to it: Retain lets every catalog go (Purge). Keys
// that only joined purge nothing, so a reload that changes only what
// compiling does not read keeps the catalogs requests go on hitting. The
// first call only records keys. It is safe for concurrent use.
func (c *Cache) Retain(keys ...uint64) {
	c.retainMu.Lock()
	defer c.retainMu.Unlock()
	if slices.ContainsFunc(c.retained, func(k uint64) bool { return !slices.Contains(keys, k) }) {
		c.Purge()
	}
	c.retained = slices.Clone(keys)
}

// Stats returns the hit and miss counters and the current size.
func (c *Cache) Stats() CacheStats {
	n := c.held.size()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Refused: c.refused.Load(), TooLarge: n.tooLarge,
		Len: n.catalogs, Tools: n.tools, Bytes: n.bytes}
}
