package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/embeddings"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
)

// embeddingsServer answers /embeddings with one small vector per input,
// or with status when it is not 200.
func embeddingsServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != http.StatusOK {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: sk-echoed","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i := range req.Input {
			out.Data = append(out.Data, item{i, []float32{1, 2, 3}})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEmbedderReportsToTheGateway(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		outcome string
		logged  string
	}{
		{"a query embedded is counted as ok in the gateway's metrics", http.StatusOK, "ok", ""},
		{"a refused query is counted and warned about on the gateway's logger without the echoed key", http.StatusUnauthorized, "unauthorized", "invalid_api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := embeddingsServer(t, tt.status)
			cfg := writeFile(t, "tools.yaml", "search:\n  embeddings:\n    provider: openai\n    url: "+srv.URL+"\n    cache_dir: "+t.TempDir()+"\n")
			snap, err := policy.Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			metrics := proxy.NewMetrics()
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			up, _ := url.Parse("http://127.0.0.1:1/v1")
			emb, err := newEmbedder(func() *policy.Snapshot { return snap }, up, http.DefaultTransport, logger, metrics.Embeddings())
			if err != nil {
				t.Fatal(err)
			}
			_, _ = emb.(selector.QueryEmbedder).EmbedQuery(context.Background(), "read a file")
			if got := embeddingCalls(t, metrics, "query", tt.outcome); got != 1 {
				t.Errorf("toolgate_embedding_calls_total{kind=query,outcome=%s} = %v, want 1", tt.outcome, got)
			}
			if !strings.Contains(logs.String(), tt.logged) || strings.Contains(logs.String(), "sk-echoed") {
				t.Errorf("log %q: want %q in it and not the echoed key", logs.String(), tt.logged)
			}
		})
	}
}

// embeddingCalls reads toolgate_embedding_calls_total{kind, outcome}.
func embeddingCalls(t *testing.T, m *proxy.Metrics, kind, outcome string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "toolgate_embedding_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestTheEmbeddingsQueryTimeoutIsThePolicys: search.embeddings.query_timeout
// bounds a request's wait for its query's vector. The endpoint here answers
// after a second, so under the default (2 s) the query would get its
// vector; under 100 ms it gives up long before.
func TestTheEmbeddingsQueryTimeoutIsThePolicys(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[1,2,3]}]}`))
	}))
	defer srv.Close()
	defer close(release)
	for _, tc := range []struct {
		name    string
		setting string
		waits   bool // the query waits for the slow answer and gets it
	}{
		{"the default waits for an answer within 2 s", "", true},
		{"a policy's 100ms gives up before the answer", "    query_timeout: 100ms\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb := openAIEmbedder(t, srv.URL, tc.setting)
			v, err := emb.(selector.QueryEmbedder).EmbedQuery(context.Background(), "read a file "+tc.name)
			if got := err == nil && len(v) == 3; got != tc.waits {
				t.Errorf("query got its vector: %v (err %v), want %v", got, err, tc.waits)
			}
		})
	}
}

// TestTheEmbeddingsDiskCacheBoundIsThePolicys: search.embeddings.cache_max_mb
// reaches the embeddings client in bytes.
func TestTheEmbeddingsDiskCacheBoundIsThePolicys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setting string
		want    int64
	}{
		{"the default bounds the cache at 1 GiB", "", 1 << 30},
		{"a policy's 64 bounds it at 64 MiB", "    cache_max_mb: 64\n", 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb := openAIEmbedder(t, "http://127.0.0.1:1/v1", tc.setting)
			if got := emb.(*embeddings.OpenAI).CacheMaxBytes(); got != tc.want {
				t.Errorf("disk cache bound = %d bytes, want %d", got, tc.want)
			}
		})
	}
}

// TestTheEmbeddingsClientFollowsARotatedUpstreamKey: without a key of its
// own, the embeddings client borrows gateway.upstream_key, and a reload
// that rotates it must reach the client as it reaches the upstream calls.
// A key of its own is a start-up setting, kept until a restart.
func TestTheEmbeddingsClientFollowsARotatedUpstreamKey(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_OLD_KEY", "sk-old")
	t.Setenv("TOOLGATE_TEST_NEW_KEY", "sk-new")
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[1,2,3]}]}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, embeddingsKey string
		want                []string // Authorization before and after the reload
	}{
		{"without a key of its own it sends the upstream key a reload rotated", "", []string{"Bearer sk-old", "Bearer sk-new"}},
		{"with a key of its own it keeps that key", "    key: sk-own\n", []string{"Bearer sk-own", "Bearer sk-own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policyWith := func(upstreamKey string) string {
				return "gateway: {upstream_key: $" + upstreamKey + "}\nsearch:\n  embeddings:\n    provider: openai\n    url: " + srv.URL + "\n    cache_dir: " + t.TempDir() + "\n" + tc.embeddingsKey
			}
			cfg := writeFile(t, "tools.yaml", policyWith("TOOLGATE_TEST_OLD_KEY"))
			live, err := policy.NewLive(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			up, _ := url.Parse("http://127.0.0.1:1/v1")
			emb, err := newEmbedder(live.Current, up, http.DefaultTransport, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			auth = nil
			mu.Unlock()
			if _, err := emb.(selector.QueryEmbedder).EmbedQuery(context.Background(), "before "+tc.name); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte(policyWith("TOOLGATE_TEST_NEW_KEY")), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := live.Reload(); err != nil {
				t.Fatal(err)
			}
			if _, err := emb.(selector.QueryEmbedder).EmbedQuery(context.Background(), "after "+tc.name); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(auth, tc.want) {
				t.Errorf("Authorization sent %q, want %q", auth, tc.want)
			}
		})
	}
}

// openAIEmbedder builds the embeddings client serve would for a policy of
// provider openai at endpoint, a cache dir of the test's own, and the
// embeddings keys in setting (indented under search.embeddings).
func openAIEmbedder(t *testing.T, endpoint, setting string) selector.Embedder {
	t.Helper()
	cfg := writeFile(t, "tools.yaml", "search:\n  embeddings:\n    provider: openai\n    url: "+endpoint+"\n    cache_dir: "+t.TempDir()+"\n"+setting)
	snap, err := policy.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse("http://127.0.0.1:1/v1")
	emb, err := newEmbedder(func() *policy.Snapshot { return snap }, up, http.DefaultTransport, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return emb
}
