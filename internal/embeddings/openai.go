package embeddings

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/toolgate/toolgate/internal/redact"
	"github.com/toolgate/toolgate/selector"
)

var (
	_ selector.Embedder      = (*OpenAI)(nil)
	_ selector.QueryEmbedder = (*OpenAI)(nil)
)

// OpenAI calls an OpenAI-compatible POST {BaseURL}/embeddings. It
// caches vectors in memory (LRU) and, when CacheDir is set, on disk, keyed
// by the hash of base URL, model and text, so a restart does not re-embed a
// catalog, and two endpoints or models sharing a directory never mix their
// vector spaces. It is safe for concurrent use.
type OpenAI struct {
	baseURL  string
	model    string
	key      func() string
	client   *http.Client
	cacheDir string
	disk     diskBound
	mem      *lru.Cache[string, []float32]
	batch    int
	// batchBytes bounds a batch's texts in bytes.
	batchBytes int
	// Catalog batches: each tried up to attempts times, retryWait before
	// the second, doubling (or the endpoint's Retry-After, up to
	// maxRetryWait), each attempt bounded by batchTimeout.
	attempts     int
	retryWait    time.Duration
	batchTimeout time.Duration
	// The query path (EmbedQuery): its deadline, the endpoint's health,
	// recently failed query texts (key -> until when), and the calls in
	// flight by key.
	queryTimeout time.Duration
	health       *health
	failed       *lru.Cache[string, time.Time]
	flights      singleflight.Group
	now          func() time.Time
	observer     selector.EmbedObserver
	// dims is the length of the endpoint's vectors, learned from its first
	// valid answer or cache file; vectors of another length are refused
	// (another model behind the same URL, a corrupt file), since a catalog
	// and its queries must come from one space.
	dims atomic.Int64
}

// OpenAIOptions configures NewOpenAI.
type OpenAIOptions struct {
	BaseURL  string       // e.g. https://api.openai.com/v1 (required)
	Model    string       // e.g. text-embedding-3-small (required)
	APIKey   string       // sent as a Bearer token when not empty
	Client   *http.Client // nil means a client with a 30 s timeout
	CacheDir string       // "" disables the on-disk cache; one that cannot be written is logged and left unused
	MemSize  int          // in-memory cached vectors; <= 0 means 20,000
	Batch    int          // texts per request; <= 0 means 128
	// CacheMaxBytes bounds the vector files in CacheDir, the least
	// recently written or read removed first; <= 0 means
	// selector.DefaultDiskCacheMB MiB.
	CacheMaxBytes int64
	// BatchBytes bounds a request's texts in bytes (a longer text goes
	// alone); <= 0 means 128 KiB, some 32k tokens.
	BatchBytes int
	// QueryTimeout bounds a request's query embedding; <= 0 means
	// selector.DefaultQueryTimeout. Catalog batches have 30 s per attempt.
	QueryTimeout time.Duration
	// Logger receives the endpoint's failures and recoveries (one line
	// each, not one per request); nil discards them.
	Logger *slog.Logger
	// Observer, when not nil, is told of every call and skipped query.
	Observer selector.EmbedObserver
	// APIKeyFunc, when not nil, is asked for the key at each request
	// instead of APIKey: a key a policy reload rotated is then sent
	// without a restart.
	APIKeyFunc func() string
}

// queryFailTTL is how long a query text whose call failed is not sent
// again: a turn embeds its text for the preselection and again for the
// search, and a retried request sends the same text.
const queryFailTTL = 30 * time.Second

// NewOpenAI returns an embedder for opts. It makes no call; a cache dir
// that cannot be used is logged and left unused, never an error.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	if opts.BaseURL == "" || opts.Model == "" {
		return nil, fmt.Errorf("openai embedder: base URL and model are required")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.MemSize <= 0 {
		opts.MemSize = 20000
	}
	if opts.Batch <= 0 {
		opts.Batch = 128
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 128 << 10
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = selector.DefaultQueryTimeout
	}
	if opts.CacheMaxBytes <= 0 {
		opts.CacheMaxBytes = selector.DefaultDiskCacheMB << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.APIKeyFunc == nil {
		key := opts.APIKey
		opts.APIKeyFunc = func() string { return key }
	}
	mem, err := lru.New[string, []float32](opts.MemSize)
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	failed, err := lru.New[string, time.Time](1024)
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	if opts.CacheDir != "" {
		if err := prepareCacheDir(opts.CacheDir); err != nil {
			// The disk cache only saves re-embedding catalogs after a
			// restart: a read-only root file system must not keep the
			// gateway from starting.
			opts.Logger.Warn("embeddings disk cache off; vectors are kept in memory only", "err", err)
			opts.CacheDir = ""
		}
	}
	e := &OpenAI{
		baseURL: strings.TrimRight(opts.BaseURL, "/"), model: opts.Model, key: opts.APIKeyFunc,
		client: opts.Client, cacheDir: opts.CacheDir, mem: mem, batch: opts.Batch, batchBytes: opts.BatchBytes,
		attempts: 3, retryWait: time.Second, batchTimeout: 30 * time.Second,
		queryTimeout: opts.QueryTimeout, failed: failed, now: time.Now,
		health: &health{now: time.Now, logger: opts.Logger}, observer: opts.Observer,
	}
	e.disk.max = opts.CacheMaxBytes
	if e.cacheDir != "" {
		// The directory's size is measured in the background: listing a
		// large cache must not delay serving. Writes meanwhile are counted
		// on top of what the listing finds.
		e.startSweep(true)
	}
	return e, nil
}

// maxRetryWait caps the wait before retrying a catalog batch, whatever
// the endpoint's Retry-After says: the catalog ranks with the offline
// vectors meanwhile, and it tries again later anyway.
const maxRetryWait = 30 * time.Second

// Model returns the embedding model name.
func (e *OpenAI) Model() string { return e.model }

// QueryTimeout returns how long a query may wait for its vector
// (OpenAIOptions.QueryTimeout).
func (e *OpenAI) QueryTimeout() time.Duration { return e.queryTimeout }

// CacheMaxBytes returns the bound of the on-disk cache
// (OpenAIOptions.CacheMaxBytes).
func (e *OpenAI) CacheMaxBytes() int64 { return e.disk.max }

// Embed returns one vector per text of a catalog, from the caches where it
// can, else from the endpoint in batches, each tried up to three times
// (see callRetrying). It stops at the first batch that still fails: the
// endpoint is likely down, and the batches before it are cached, so the
// catalog's next attempt asks only for the rest. It stops, too, before a
// batch while the endpoint cools down after a failure (errCoolingDown).
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var missIdx []int
	for i, t := range texts {
		k := e.key4(t)
		if v, ok := e.mem.Get(k); ok {
			out[i] = v
			continue
		}
		if v, ok := e.readDisk(k); ok {
			e.mem.Add(k, v)
			out[i] = v
			continue
		}
		missIdx = append(missIdx, i)
	}
	for len(missIdx) > 0 {
		if e.health.coolingDown() {
			// Queries skip the endpoint meanwhile; a catalog's batches
			// would go on calling it, for a whole catalog, every time.
			e.observe("catalog", "skipped", 0)
			return nil, fmt.Errorf("embedding %d catalog texts: %w", len(missIdx), errCoolingDown)
		}
		var idx []int
		idx, missIdx = e.nextBatch(texts, missIdx)
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = texts[i]
		}
		vecs, err := e.callRetrying(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embedding %d catalog texts: %w", len(idx)+len(missIdx), err)
		}
		for j, i := range idx {
			out[i] = vecs[j]
			k := e.key4(texts[i])
			e.mem.Add(k, vecs[j])
			e.writeDisk(k, vecs[j])
		}
	}
	return out, nil
}

// EmbedQuery returns the vector of a request's query text: from memory
// (query texts are users' messages: never written to disk) or from one
// call bounded by the query timeout, without retries. It fails without a
// call while the endpoint cools down after a failure, and for
// queryFailTTL after this text's own call failed; concurrent requests for
// one text share one call, which the first caller leaving does not cancel.
func (e *OpenAI) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	k := e.key4(text)
	if v, ok := e.mem.Get(k); ok {
		return v, nil
	}
	if until, ok := e.failed.Get(k); ok && e.now().Before(until) {
		return nil, errors.New("embedding query: its last call failed moments ago")
	}
	ch := e.flights.DoChan(k, func() (any, error) {
		if !e.health.allow() {
			e.observe("query", "skipped", 0)
			return nil, errCoolingDown
		}
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.queryTimeout)
		defer cancel()
		vecs, err := e.do(qctx, "query", []string{text})
		if err != nil {
			e.failed.Add(k, e.now().Add(queryFailTTL))
			return nil, err
		}
		e.mem.Add(k, vecs[0])
		return vecs[0], nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, fmt.Errorf("embedding query: %w", r.Err)
		}
		return r.Val.([]float32), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("embedding query: %w", ctx.Err())
	}
}

// do calls the endpoint once for kind ("query" or "catalog") and tells
// the endpoint's health and the observer.
func (e *OpenAI) do(ctx context.Context, kind string, texts []string) ([][]float32, error) {
	start := time.Now()
	vecs, err := e.call(ctx, texts)
	e.observe(kind, outcome(err), time.Since(start))
	e.health.record(err)
	return vecs, err
}

func (e *OpenAI) observe(kind, outcome string, d time.Duration) {
	if e.observer != nil {
		e.observer.EmbeddingCall(kind, outcome, d)
	}
}

// nextBatch splits the next batch off idx (indices into texts): at most
// e.batch texts and e.batchBytes bytes of them, at least one text. A
// count alone let a batch of long tool texts grow past half a megabyte,
// past what endpoints accept per request.
func (e *OpenAI) nextBatch(texts []string, idx []int) (batch, rest []int) {
	n, size := 0, 0
	for n < len(idx) && n < e.batch {
		l := len(texts[idx[n]])
		if n > 0 && size+l > e.batchBytes {
			break
		}
		size += l
		n++
	}
	return idx[:n], idx[n:]
}

// callRetrying calls the endpoint for a catalog batch, retrying a
// failure that may pass (a timeout, a network error, 408, 409, 429, 5xx)
// after a backoff that honours Retry-After.
func (e *OpenAI) callRetrying(ctx context.Context, batch []string) ([][]float32, error) {
	wait := e.retryWait
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, e.batchTimeout)
		vecs, err := e.do(actx, "catalog", batch)
		cancel()
		if err == nil || attempt >= e.attempts || !retryable(err) || ctx.Err() != nil {
			return vecs, err
		}
		d := max(wait, retryAfterOf(err))
		wait *= 2
		t := time.NewTimer(min(d, maxRetryWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

func (e *OpenAI) key4(text string) string {
	h := sha256.Sum256([]byte(e.baseURL + "\x00" + e.model + "\x00" + text))
	return hex.EncodeToString(h[:16])
}

// checkDims checks v against the endpoint's vector length, learning it
// from v when it is not known yet.
func (e *OpenAI) checkDims(v []float32) error {
	if err := selector.CheckVector(v, int(e.dims.Load())); err != nil {
		return err
	}
	if !e.dims.CompareAndSwap(0, int64(len(v))) && e.dims.Load() != int64(len(v)) {
		return fmt.Errorf("vector of %d dimensions, want %d", len(v), e.dims.Load())
	}
	return nil
}

func (e *OpenAI) call(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(map[string]any{"model": e.model, "input": texts})
	if err != nil {
		return nil, fmt.Errorf("encoding embeddings request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.baseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building embeddings request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key := e.key(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// net/http's error repeats the URL with only its password
		// masked; a key given as the user name would reach the log.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			ue.URL = redact.URL(ue.URL)
		}
		return nil, fmt.Errorf("calling embeddings: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("reading embeddings response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, newStatusError(resp, data)
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		return nil, fmt.Errorf("%w: %w", errResponse, err)
	}
	out := make([][]float32, len(texts))
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(out) {
			return nil, fmt.Errorf("%w: index %d out of range", errResponse, d.Index)
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: no vector for input %d", errResponse, i)
		}
		if err := e.checkDims(v); err != nil {
			return nil, fmt.Errorf("%w: input %d: %w", errResponse, i, err)
		}
	}
	return out, nil
}
