package selector

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lettersEmbedder stands in for a remote endpoint, in process: each text
// becomes a bag-of-letters vector of 26 dimensions. It counts its calls,
// fails while failing is set or for its first failFirst catalog calls,
// and makes each query wait queryDelay, or, with hang, wait that long and
// fail, as the embeddings client's own deadline would end it. A query's
// ctx ending stops its wait.
type lettersEmbedder struct {
	failing    atomic.Bool
	failFirst  atomic.Int32
	catalogs   atomic.Int32 // Embed calls
	queries    atomic.Int32 // EmbedQuery calls
	queryDelay time.Duration
	hang       time.Duration // when > 0, a query hangs this long, then fails
}

var (
	_ Embedder      = (*lettersEmbedder)(nil)
	_ QueryEmbedder = (*lettersEmbedder)(nil)
)

func (*lettersEmbedder) Model() string { return "letters" }

func (e *lettersEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.catalogs.Add(1)
	if e.failing.Load() || e.failFirst.Add(-1) >= 0 {
		return nil, errors.New("embeddings endpoint down")
	}
	return lettersOf(texts), nil
}

func (e *lettersEmbedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	e.queries.Add(1)
	if e.failing.Load() {
		return nil, errors.New("embeddings endpoint down")
	}
	wait := e.queryDelay
	if e.hang > 0 {
		wait = e.hang
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e.hang > 0 {
		return nil, context.DeadlineExceeded
	}
	return lettersOf([]string{text})[0], nil
}

// lettersOf is texts as bag-of-letters vectors.
func lettersOf(texts []string) [][]float32 {
	vecs := make([][]float32, len(texts))
	for i, s := range texts {
		vecs[i] = make([]float32, 26)
		for _, r := range strings.ToLower(s) {
			if r >= 'a' && r <= 'z' {
				vecs[i][r-'a']++
			}
		}
	}
	return vecs
}

func TestRemoteSemanticFallsBackToOfflineVectors(t *testing.T) {
	tools := testTools(t)
	offline := compileTest(t, tools, Config{})
	for _, failing := range []bool{false, true} {
		name := "a working service adds a semantic signal of its own"
		if failing {
			name = "a failing service ranks as the offline word vectors do"
		}
		t.Run(name, func(t *testing.T) {
			e := &lettersEmbedder{}
			e.failing.Store(failing)
			c := compileTest(t, tools, Config{Embedder: e})
			if !failing {
				waitRemote(t, c)
			}
			q := Query{Text: "merge pull request", Explain: true}
			res, err := c.Search(context.Background(), q)
			if err != nil {
				t.Fatalf("search failed: %v", err)
			}
			if len(res.Items) == 0 {
				t.Fatal("no results")
			}
			if _, ok := res.Items[0].Signals["semantic"]; !ok {
				t.Errorf("no semantic signal with failing = %v", failing)
			}
			if same := sameRanking(t, offline, c, q); same != failing {
				t.Errorf("same ranking as the offline vectors = %v with failing = %v", same, failing)
			}
		})
	}
}

// sameRanking reports whether a and b rank q's results alike, scores and
// signals included.
func sameRanking(t *testing.T, a, b *Catalog, q Query) bool {
	t.Helper()
	q.Limit = 10
	ra, err := a.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(ra, rb)
}

// dimsEmbedder embeds a catalog in catalog dimensions and a query in query
// dimensions, as an endpoint whose model changed between the two would.
type dimsEmbedder struct{ catalog, query int }

func (e dimsEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	n := e.catalog
	if len(texts) == 1 {
		n = e.query
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = make([]float32, n)
		for j, r := range s {
			out[i][(j+int(r))%n]++
		}
	}
	return out, nil
}

func (dimsEmbedder) Model() string { return "dims" }

func TestRemoteVectorsOfAnotherLength(t *testing.T) {
	tools := testTools(t)
	offline := compileTest(t, tools, Config{})
	tests := []struct {
		name string
		e    dimsEmbedder
	}{
		{"a query vector longer than the tool vectors ranks with the offline vectors instead of a panic", dimsEmbedder{catalog: 8, query: 16}},
		{"a query vector shorter than the tool vectors ranks with the offline vectors", dimsEmbedder{catalog: 16, query: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileTest(t, tools, Config{Embedder: tt.e})
			waitRemote(t, c)
			if !sameRanking(t, offline, c, Query{Text: "merge pull request", Explain: true}) {
				t.Errorf("vectors of %d and %d dimensions ranked otherwise than the offline vectors", tt.e.catalog, tt.e.query)
			}
		})
	}
}

// waitRemote waits until c's remote tool vectors are in.
func waitRemote(t *testing.T, c *Catalog) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.sem.remote.vecs.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("tool vectors never arrived")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRemoteCatalogTriesAgainAfterCooldown(t *testing.T) {
	e := &lettersEmbedder{}
	e.failFirst.Store(1)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	c := compileTest(t, testTools(t), Config{Embedder: e})
	r := c.sem.remote
	for {
		r.mu.Lock()
		failed := r.failures
		if failed == 1 {
			r.now = func() time.Time { return time.Unix(0, clock.Load()) }
			r.next = r.now().Add(catalogRetryMin)
		}
		r.mu.Unlock()
		if failed == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	search := func() {
		if _, err := c.Search(context.Background(), Query{Text: "merge pull request"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		advance time.Duration
		want    bool
	}{
		{"a search before the cooldown ends does not ask the endpoint again", catalogRetryMin / 2, false},
		{"a search after the cooldown embeds the catalog again", catalogRetryMin, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Add(int64(tt.advance))
			before := e.catalogs.Load()
			search()
			deadline := time.Now().Add(5 * time.Second)
			for tt.want && r.vecs.Load() == nil && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if asked := e.catalogs.Load() > before; asked != tt.want || (r.vecs.Load() != nil) != tt.want {
				t.Errorf("endpoint asked = %v, vectors in = %v; want %v", asked, r.vecs.Load() != nil, tt.want)
			}
		})
	}
}

// TestRemoteQueryDoesNotHoldUpSearches: a query embedding that hangs
// keeps a search waiting as long as the embedder's own deadline, not
// longer, and the search then ranks with the offline vectors. (That the
// embeddings client does not send the text again moments later is its
// own test, in internal/embeddings.)
func TestRemoteQueryDoesNotHoldUpSearches(t *testing.T) {
	tools := testTools(t)
	offline := compileTest(t, tools, Config{})
	e := &lettersEmbedder{hang: 200 * time.Millisecond}
	c := compileTest(t, tools, Config{Embedder: e})
	waitRemote(t, c)
	q := Query{Text: "merge pull request", Explain: true}
	t.Run("a search whose query embedding hangs answers when the embedder gives up, as the offline vectors rank", func(t *testing.T) {
		start := time.Now()
		res, err := c.Search(context.Background(), q)
		if err != nil || len(res.Items) == 0 {
			t.Fatalf("Search = %v, %v", res.Items, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("search took %v, want at most 1s", d)
		}
		if got := e.queries.Load(); got != 1 {
			t.Errorf("%d query calls, want 1", got)
		}
		if !sameRanking(t, offline, c, q) {
			t.Error("the search without a query vector ranked otherwise than the offline vectors")
		}
	})
}

// TestRemoteCatalogIsNotEmbeddedAgainOnceIn: a search that found no tool
// vectors asks for them (retry), and may do so just after a fetch has
// published them; that must not embed the whole catalog a second time.
func TestRemoteCatalogIsNotEmbeddedAgainOnceIn(t *testing.T) {
	r := &remoteSemantic{e: dimsEmbedder{catalog: 3, query: 3}, texts: []string{"a", "b"}, bg: context.Background(), now: time.Now}
	r.vecs.Store(&toolVecs{vecs: [][]float32{{1, 0, 0}, {0, 1, 0}}, dims: 3})
	r.retry()
	r.mu.Lock()
	started := r.inflight
	r.mu.Unlock()
	if started {
		t.Error("retry started a fetch of vectors already in")
	}
}
