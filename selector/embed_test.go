package selector

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEmbeddings serves /embeddings with bag-of-letters vectors, counting
// the texts it embeds; failing makes it answer 500.
func fakeEmbeddings(t *testing.T, failing bool, embedded *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing {
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusInternalServerError)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		vecs := make([][]float32, len(req.Input))
		for i, s := range req.Input {
			embedded.Add(1)
			vecs[i] = make([]float32, 26)
			for _, r := range strings.ToLower(s) {
				if r >= 'a' && r <= 'z' {
					vecs[i][r-'a']++
				}
			}
		}
		writeEmbeddings(w, vecs)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenAIEmbedderCachesVectors(t *testing.T) {
	var n atomic.Int32
	srv := fakeEmbeddings(t, false, &n)
	dir := t.TempDir()
	mk := func() *OpenAIEmbedder {
		e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{BaseURL: srv.URL, Model: "m", CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ctx := context.Background()
	texts := []string{"read a file", "send a message"}
	if _, err := mk().Embed(ctx, texts); err != nil {
		t.Fatal(err)
	}
	t.Run("a second embedder reads the disk cache instead of the service", func(t *testing.T) {
		before := n.Load()
		v, err := mk().Embed(ctx, texts)
		if err != nil || len(v) != 2 || len(v[0]) != 26 {
			t.Fatalf("Embed = %d vectors, %v", len(v), err)
		}
		if n.Load() != before {
			t.Errorf("service embedded %d more texts, want 0", n.Load()-before)
		}
	})
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
			var n atomic.Int32
			srv := fakeEmbeddings(t, failing, &n)
			e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{BaseURL: srv.URL, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
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
	f := newFakeEndpoint(t, failFirst(1, http.StatusUnauthorized, "", letters(26)))
	e := newTestEmbedder(t, f.srv.URL, "")
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	e.health.now = func() time.Time { return time.Unix(0, clock.Load()) } // the failure's cooldown passes with the clock
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
			before := f.requests.Load()
			search()
			deadline := time.Now().Add(5 * time.Second)
			for tt.want && r.vecs.Load() == nil && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if asked := f.requests.Load() > before; asked != tt.want || (r.vecs.Load() != nil) != tt.want {
				t.Errorf("endpoint asked = %v, vectors in = %v; want %v", asked, r.vecs.Load() != nil, tt.want)
			}
		})
	}
}

func TestRemoteQueryDoesNotHoldUpSearches(t *testing.T) {
	var queries atomic.Int32
	f := newFakeEndpoint(t, func(texts []string) fakeAnswer {
		if len(texts) > 1 {
			return letters(26)(texts)
		}
		queries.Add(1)
		return fakeAnswer{block: make(chan struct{})} // hangs until the client leaves
	})
	e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{BaseURL: f.srv.URL, Model: "m", QueryTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := compileTest(t, testTools(t), Config{Embedder: e})
	waitRemote(t, c)
	tests := []struct {
		name        string
		maxDuration time.Duration
		wantQueries int32
	}{
		{"a search with a hanging endpoint answers after the query timeout", time.Second, 1},
		{"the turn's second search for the same text does not wait on the endpoint again", 100 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := c.Search(context.Background(), Query{Text: "merge pull request"})
			if err != nil || len(res.Items) == 0 {
				t.Fatalf("Search = %v, %v", res.Items, err)
			}
			if d := time.Since(start); d > tt.maxDuration {
				t.Errorf("search took %v, want at most %v", d, tt.maxDuration)
			}
			if got := queries.Load(); got != tt.wantQueries {
				t.Errorf("%d query calls, want %d", got, tt.wantQueries)
			}
		})
	}
}

// writeEmbeddings answers an embeddings request with vecs, in order, as
// the OpenAI API does.
func writeEmbeddings(w http.ResponseWriter, vecs [][]float32) {
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var out struct {
		Data []item `json:"data"`
	}
	for i, v := range vecs {
		out.Data = append(out.Data, item{i, v})
	}
	_ = json.NewEncoder(w).Encode(out)
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
