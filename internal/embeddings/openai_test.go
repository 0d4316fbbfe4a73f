package embeddings

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/selector"
)

// fakeAnswer is what a fakeEndpoint answers to one request.
type fakeAnswer struct {
	status     int         // 0 means 200
	vecs       [][]float32 // one per input when status is 200
	retryAfter string
	body       string        // the error body when status is not 200
	block      chan struct{} // when not nil, the answer waits for it (or the client leaving)
}

// fakeEndpoint is an /embeddings endpoint whose answers a test chooses.
type fakeEndpoint struct {
	srv      *httptest.Server
	requests atomic.Int32 // requests received
	texts    atomic.Int32 // inputs received
	mu       sync.Mutex
	answer   func(texts []string) fakeAnswer
}

func newFakeEndpoint(t *testing.T, answer func(texts []string) fakeAnswer) *fakeEndpoint {
	t.Helper()
	f := &fakeEndpoint{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.requests.Add(1)
		f.texts.Add(int32(len(req.Input)))
		f.mu.Lock()
		a := f.answer(req.Input)
		f.mu.Unlock()
		if a.block != nil {
			select {
			case <-a.block:
			case <-r.Context().Done():
				return
			}
		}
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		if a.status != 0 && a.status != http.StatusOK {
			w.WriteHeader(a.status)
			_, _ = w.Write([]byte(a.body))
			return
		}
		writeEmbeddings(w, a.vecs)
	}))
	t.Cleanup(f.srv.Close)
	return f
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

// set changes the endpoint's answers from now on.
func (f *fakeEndpoint) set(answer func(texts []string) fakeAnswer) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

// letters embeds texts as bag-of-letters vectors of dims dimensions.
func letters(dims int) func(texts []string) fakeAnswer {
	return func(texts []string) fakeAnswer {
		var a fakeAnswer
		for _, s := range texts {
			v := make([]float32, dims)
			v[0] = 0.5 // no text has a zero vector
			for _, r := range strings.ToLower(s) {
				if r >= 'a' && r <= 'z' {
					v[int(r-'a')%dims]++
				}
			}
			a.vecs = append(a.vecs, v)
		}
		return a
	}
}

// constant answers every text with v.
func constant(v []float32) func(texts []string) fakeAnswer {
	return func(texts []string) fakeAnswer {
		var a fakeAnswer
		for range texts {
			a.vecs = append(a.vecs, v)
		}
		return a
	}
}

func newTestEmbedder(t *testing.T, url, dir string) *OpenAI {
	t.Helper()
	e, err := NewOpenAI(OpenAIOptions{BaseURL: url, Model: "m", CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// cacheFiles returns the vector files in dir.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.f32"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeCacheFile replaces the one cache file in dir with v, in the
// format readDisk reads.
func writeCacheFile(t *testing.T, dir string, v []float32) string {
	t.Helper()
	files := cacheFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d cache files, want 1", len(files))
	}
	b := []byte(diskMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	return files[0]
}

func TestOpenAIEmbedderKeepsOneDimension(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an endpoint that changes its vectors' length is refused", func(t *testing.T) {
			f := newFakeEndpoint(t, letters(26))
			e := newTestEmbedder(t, f.srv.URL, "")
			if _, err := e.Embed(ctx, []string{"read a file"}); err != nil {
				t.Fatal(err)
			}
			f.set(letters(30))
			if v, err := e.Embed(ctx, []string{"send a message"}); err == nil {
				t.Errorf("Embed = a vector of %d dimensions after 26, want an error", len(v[0]))
			}
		}},
		{"a batch of vectors of two lengths is refused", func(t *testing.T) {
			f := newFakeEndpoint(t, func(texts []string) fakeAnswer {
				a := letters(26)(texts)
				a.vecs[1] = append(a.vecs[1], 1)
				return a
			})
			e := newTestEmbedder(t, f.srv.URL, "")
			if _, err := e.Embed(ctx, []string{"read a file", "send a message"}); err == nil {
				t.Error("Embed accepted vectors of 26 and 27 dimensions")
			}
		}},
		{"a cache file of another length than the endpoint's vectors is a miss and is replaced", func(t *testing.T) {
			f := newFakeEndpoint(t, letters(26))
			dir := t.TempDir()
			if _, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, []string{"read a file"}); err != nil {
				t.Fatal(err)
			}
			writeCacheFile(t, dir, make13())
			e := newTestEmbedder(t, f.srv.URL, dir)
			if _, err := e.Embed(ctx, []string{"send a message"}); err != nil { // learns 26
				t.Fatal(err)
			}
			v, err := e.Embed(ctx, []string{"read a file"})
			if err != nil || len(v[0]) != 26 {
				t.Fatalf("Embed = %d dimensions, %v; want 26", len(v[0]), err)
			}
			if got := readCacheLen(t, dir, e.key4("read a file")); got != 26 {
				t.Errorf("cache file holds %d dimensions, want the recomputed 26", got)
			}
		}},
		{"the same text from another endpoint is not read from a shared cache dir", func(t *testing.T) {
			a, b := newFakeEndpoint(t, letters(26)), newFakeEndpoint(t, letters(30))
			dir := t.TempDir()
			if _, err := newTestEmbedder(t, a.srv.URL, dir).Embed(ctx, []string{"read a file"}); err != nil {
				t.Fatal(err)
			}
			v, err := newTestEmbedder(t, b.srv.URL, dir).Embed(ctx, []string{"read a file"})
			if err != nil || len(v[0]) != 30 || b.texts.Load() != 1 {
				t.Errorf("Embed = %d dimensions, %v, after %d texts sent to the second endpoint; want 30 from it", len(v[0]), err, b.texts.Load())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func make13() []float32 {
	v := make([]float32, 13)
	for i := range v {
		v[i] = 1
	}
	return v
}

// readCacheLen returns the length of the vector cached under key k.
func readCacheLen(t *testing.T, dir, k string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, k+".f32"))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := decodeVector(b)
	if !ok {
		t.Fatalf("cache file %s is not whole", k)
	}
	return len(v)
}

func TestOpenAIEmbedderRefusesInvalidVectors(t *testing.T) {
	ctx := context.Background()
	zero := make([]float32, 8)
	withNaN, withInf := make13()[:8], make13()[:8]
	withNaN[3] = float32(math.NaN())
	withInf[3] = float32(math.Inf(1))
	t.Run("an all-zero vector from the endpoint is neither returned nor cached", func(t *testing.T) {
		f := newFakeEndpoint(t, constant(zero))
		dir := t.TempDir()
		e := newTestEmbedder(t, f.srv.URL, dir)
		if _, err := e.Embed(ctx, []string{"read a file"}); err == nil {
			t.Error("Embed returned the vector")
		}
		if files := cacheFiles(t, dir); len(files) != 0 {
			t.Errorf("cached %d files", len(files))
		}
	})
	tests := []struct {
		name string
		vec  []float32
	}{
		{"a cache file holding an all-zero vector is a miss", zero},
		{"a cache file holding a NaN is a miss", withNaN},
		{"a cache file holding an infinity is a miss", withInf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEndpoint(t, letters(8))
			dir := t.TempDir()
			if _, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, []string{"read a file"}); err != nil {
				t.Fatal(err)
			}
			writeCacheFile(t, dir, tt.vec)
			before := f.texts.Load()
			v, err := newTestEmbedder(t, f.srv.URL, dir).Embed(ctx, []string{"read a file"})
			if err != nil || selector.CheckVector(v[0], 8) != nil || f.texts.Load() != before+1 {
				t.Errorf("Embed = %v, %v after %d texts sent; want the endpoint's vector", v, err, f.texts.Load()-before)
			}
		})
	}
}

// failFirst answers the first n requests with status (and Retry-After),
// then as ok does.
func failFirst(n int, status int, retryAfter string, ok func([]string) fakeAnswer) func([]string) fakeAnswer {
	var seen int
	return func(texts []string) fakeAnswer {
		if seen++; seen <= n {
			return fakeAnswer{status: status, retryAfter: retryAfter, body: `{"error":{"message":"no","type":"t","code":"c"}}`}
		}
		return ok(texts)
	}
}

func TestOpenAIEmbedderRetriesCatalogBatches(t *testing.T) {
	tests := []struct {
		name     string
		answer   func([]string) fakeAnswer
		wantErr  bool
		requests int32
		minWait  time.Duration
	}{
		{"a batch that fails once with a 500 is retried and succeeds", failFirst(1, 500, "", letters(8)), false, 2, 0},
		{"a batch answered 429 is retried after its Retry-After", failFirst(1, 429, "1", letters(8)), false, 2, time.Second},
		{"a batch that keeps failing is tried three times", failFirst(99, 503, "", letters(8)), true, 3, 0},
		{"a batch refused with 401 is not retried", failFirst(99, 401, "", letters(8)), true, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEndpoint(t, tt.answer)
			e := newTestEmbedder(t, f.srv.URL, "")
			e.retryWait = time.Millisecond
			start := time.Now()
			_, err := e.Embed(context.Background(), []string{"read a file", "send a message"})
			if (err != nil) != tt.wantErr {
				t.Errorf("Embed error = %v, want error %v", err, tt.wantErr)
			}
			if got := f.requests.Load(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			if waited := time.Since(start); waited < tt.minWait {
				t.Errorf("retried after %v, want at least %v", waited, tt.minWait)
			}
		})
	}
}

// fakeClock is a settable time for the embedder's cooldowns.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestOpenAIEmbedderQueries(t *testing.T) {
	ctx := context.Background()
	failing := func(status int, retryAfter string) func([]string) fakeAnswer {
		return failFirst(1<<30, status, retryAfter, letters(8))
	}
	tests := []struct {
		name   string
		answer func([]string) fakeAnswer
		// run queries with e, moving clock, and returns what to compare
		run          func(t *testing.T, e *OpenAI, clock *fakeClock)
		wantRequests int32
	}{
		{"a text whose query failed is not sent again moments later, cooldown over or not", failing(500, ""), func(t *testing.T, e *OpenAI, clock *fakeClock) {
			_, _ = e.EmbedQuery(ctx, "read a file")
			clock.advance(2 * cooldownMin)
			if _, err := e.EmbedQuery(ctx, "read a file"); err == nil {
				t.Error("second query succeeded")
			}
		}, 1},
		{"another text is not sent while the endpoint cools down after a failure", failing(500, ""), func(t *testing.T, e *OpenAI, clock *fakeClock) {
			_, _ = e.EmbedQuery(ctx, "read a file")
			_, _ = e.EmbedQuery(ctx, "send a message")
		}, 1},
		{"another text is sent once the cooldown is over", failing(500, ""), func(t *testing.T, e *OpenAI, clock *fakeClock) {
			_, _ = e.EmbedQuery(ctx, "read a file")
			clock.advance(cooldownMin + time.Millisecond)
			_, _ = e.EmbedQuery(ctx, "send a message")
		}, 2},
		{"a 429's Retry-After keeps queries off the endpoint that long", failing(429, "5"), func(t *testing.T, e *OpenAI, clock *fakeClock) {
			_, _ = e.EmbedQuery(ctx, "read a file")
			clock.advance(2 * time.Second)
			_, _ = e.EmbedQuery(ctx, "send a message")
			clock.advance(4 * time.Second)
			_, _ = e.EmbedQuery(ctx, "open a page")
		}, 2},
		{"twenty concurrent queries for one text make one call", func(texts []string) fakeAnswer {
			a := letters(8)(texts)
			a.block = make(chan struct{})
			time.AfterFunc(30*time.Millisecond, func() { close(a.block) })
			return a
		}, func(t *testing.T, e *OpenAI, clock *fakeClock) {
			var wg sync.WaitGroup
			var failed atomic.Int32
			for range 20 {
				wg.Go(func() {
					if _, err := e.EmbedQuery(ctx, "read a file"); err != nil {
						failed.Add(1)
					}
				})
			}
			wg.Wait()
			if failed.Load() > 0 {
				t.Errorf("%d of 20 queries failed", failed.Load())
			}
		}, 1},
		{"a query to a hanging endpoint fails after the query timeout", func(texts []string) fakeAnswer {
			return fakeAnswer{block: make(chan struct{})}
		}, func(t *testing.T, e *OpenAI, clock *fakeClock) {
			start := time.Now()
			if _, err := e.EmbedQuery(ctx, "read a file"); err == nil {
				t.Error("query succeeded")
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("query took %v with a 100 ms query timeout", d)
			}
		}, 1},
		{"a text whose query timed out is not sent again moments later, and fails at once", func(texts []string) fakeAnswer {
			return fakeAnswer{block: make(chan struct{})}
		}, func(t *testing.T, e *OpenAI, clock *fakeClock) {
			_, _ = e.EmbedQuery(ctx, "read a file")
			start := time.Now()
			if _, err := e.EmbedQuery(ctx, "read a file"); err == nil {
				t.Error("second query succeeded")
			}
			if d := time.Since(start); d > 50*time.Millisecond {
				t.Errorf("second query took %v; want no wait on the endpoint again", d)
			}
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEndpoint(t, tt.answer)
			e, err := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, Model: "m", QueryTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{}
			clock.ns.Store(time.Now().UnixNano())
			e.now, e.health.now = clock.now, clock.now
			tt.run(t, e, clock)
			if got := f.requests.Load(); got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

func TestOpenAIEmbedderKeepsQueriesOffDisk(t *testing.T) {
	f := newFakeEndpoint(t, letters(8))
	dir := t.TempDir()
	e := newTestEmbedder(t, f.srv.URL, dir)
	t.Run("a query's vector is kept in memory only, never written to disk", func(t *testing.T) {
		if _, err := e.EmbedQuery(context.Background(), "my secret plans"); err != nil {
			t.Fatal(err)
		}
		if files := cacheFiles(t, dir); len(files) != 0 {
			t.Errorf("%d files written for a query", len(files))
		}
	})
}

// callLog is an EmbedObserver that remembers the calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) EmbeddingCall(kind, outcome string, _ time.Duration) {
	c.mu.Lock()
	c.calls = append(c.calls, kind+" "+outcome)
	c.mu.Unlock()
}

func TestOpenAIEmbedderReportsFailures(t *testing.T) {
	const key = "sk-secret-EMB-123"
	echo := fakeAnswer{status: 401, body: `{"error":{"message":"Incorrect API key provided: Bearer ` + key + `","type":"invalid_request_error","code":"invalid_api_key"}}`}
	ctx := context.Background()
	setup := func(t *testing.T, answer func([]string) fakeAnswer) (*OpenAI, *fakeEndpoint, *strings.Builder, *callLog, *fakeClock) {
		f := newFakeEndpoint(t, answer)
		var logs strings.Builder
		obs := &callLog{}
		e, err := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, Model: "m", APIKey: key,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		e.retryWait = time.Millisecond
		clock := &fakeClock{}
		clock.ns.Store(time.Now().UnixNano())
		e.now, e.health.now = clock.now, clock.now
		return e, f, &logs, obs, clock
	}
	t.Run("an error from an endpoint that echoes the key names the status, type and code but not the key", func(t *testing.T) {
		e, _, logs, _, _ := setup(t, func([]string) fakeAnswer { return echo })
		_, err := e.Embed(ctx, []string{"read a file"})
		if err == nil {
			t.Fatal("Embed succeeded")
		}
		for _, want := range []string{"401", "invalid_request_error", "invalid_api_key"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if strings.Contains(err.Error()+logs.String(), key) {
			t.Errorf("the key is in the error or the log: %v\n%s", err, logs)
		}
	})
	t.Run("a failing endpoint logs one warning however many calls fail, and one line when it recovers", func(t *testing.T) {
		down := true
		var mu sync.Mutex
		e, _, logs, _, clock := setup(t, func(texts []string) fakeAnswer {
			mu.Lock()
			defer mu.Unlock()
			if down {
				return fakeAnswer{status: 503}
			}
			return letters(8)(texts)
		})
		for i := range 5 {
			_, _ = e.EmbedQuery(ctx, "query "+strconv.Itoa(i))
			clock.advance(cooldownMax)
		}
		mu.Lock()
		down = false
		mu.Unlock()
		for i := range 3 {
			if _, err := e.EmbedQuery(ctx, "fine "+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		if w, i := strings.Count(logs.String(), `"level":"WARN"`), strings.Count(logs.String(), `"level":"INFO"`); w != 1 || i != 1 {
			t.Errorf("%d warnings and %d info lines, want 1 and 1:\n%s", w, i, logs)
		}
	})
	t.Run("every call and skipped query or catalog is observed with its kind and outcome", func(t *testing.T) {
		e, f, _, obs, clock := setup(t, failFirst(1, 500, "", letters(8)))
		_, _ = e.EmbedQuery(ctx, "read a file")
		_, _ = e.EmbedQuery(ctx, "send a message")
		f.set(letters(8))
		if _, err := e.Embed(ctx, []string{"open a page"}); err == nil {
			t.Fatal("a catalog was embedded while the endpoint cools down")
		}
		clock.advance(cooldownMin)
		if _, err := e.Embed(ctx, []string{"open a page"}); err != nil {
			t.Fatal(err)
		}
		want := []string{"query status_5xx", "query skipped", "catalog skipped", "catalog ok"}
		if !slices.Equal(obs.calls, want) {
			t.Errorf("observed %q, want %q", obs.calls, want)
		}
	})
}

func TestOpenAIEmbedderBatches(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	tests := []struct {
		name  string
		texts []string
		want  []int32 // inputs per request
	}{
		{"short texts go 128 to a request", slices.Repeat([]string{"a"}, 300), []int32{128, 128, 44}},
		{"long texts are batched by their bytes too", slices.Repeat([]string{long}, 7), []int32{3, 3, 1}},
		{"a text longer than the byte bound goes alone", []string{strings.Repeat("y", 200<<10), "a"}, []int32{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int32
			f := newFakeEndpoint(t, func(texts []string) fakeAnswer {
				mu.Lock()
				sizes = append(sizes, int32(len(texts)))
				mu.Unlock()
				return letters(8)(texts)
			})
			texts := make([]string, len(tt.texts))
			for i, s := range tt.texts {
				texts[i] = s + strconv.Itoa(i) // distinct texts, distinct keys
			}
			if _, err := newTestEmbedder(t, f.srv.URL, "").Embed(context.Background(), texts); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, tt.want) {
				t.Errorf("inputs per request %v, want %v", sizes, tt.want)
			}
		})
	}
}

// TestAFailedEmbeddingsCallHidesTheURLsCredentials: net/http's error
// names the URL with its password masked only, and the embeddings
// endpoint's failure is logged with it.
func TestAFailedEmbeddingsCallHidesTheURLsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens: the call fails in net/http
	for _, tc := range []struct{ name, base string }{
		{"a key given as the user name is hidden", "http://sk-live-SECRET@" + addr + "/v1"},
		{"a password is hidden with its user name", "http://user:SECRET@" + addr + "/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewOpenAI(OpenAIOptions{BaseURL: tc.base, Model: "m", CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.call(context.Background(), []string{"q"})
			if err == nil {
				t.Fatal("the call succeeded with nothing listening")
			}
			if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "xxxxx@") {
				t.Errorf("error %q shows the secret, or does not mark where it was", err)
			}
		})
	}
}
