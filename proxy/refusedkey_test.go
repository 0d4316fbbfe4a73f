package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolgate/toolgate/selector"
)

// TestRequestsTheUpstreamRefusesKeepNoCatalog: a turn compiled and cached
// its catalog before the upstream had accepted its credential, and a
// catalog asked for twice was kept, so requests under a key the upstream
// refused (a 401 each) evicted the catalogs other tenants re-send, and
// started a background embedding of each catalog with the operator's
// embeddings key. A catalog is now kept, and embedded, only once a
// request that used it was accepted.
func TestRequestsTheUpstreamRefusesKeepNoCatalog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(t *testing.T, cache *selector.Cache, emb *countingEmbedder, victim func())
	}{
		{"B's catalog outlives catalogs that refused requests sent twice each", func(t *testing.T, cache *selector.Cache, _ *countingEmbedder, victim func()) {
			before := cache.Stats()
			victim()
			if after := cache.Stats(); after.Misses != before.Misses {
				t.Errorf("B's catalog was compiled again: the refused requests' catalogs evicted it (cache %+v)", after)
			}
		}},
		{"refused requests embed none of their catalogs", func(t *testing.T, _ *selector.Cache, emb *countingEmbedder, _ func()) {
			time.Sleep(50 * time.Millisecond) // time for a background embedding to start, were it let
			if n := emb.batches.Load(); n != 1 {
				t.Errorf("%d catalog embeddings; want B's alone", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb := &countingEmbedder{}
			cache := selector.NewCacheWith(selector.CacheOptions{Catalogs: 8})
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if r.Header.Get("Authorization") != "Bearer sk-tenant-b" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnauthorized)
					_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
					return
				}
				_, _ = io.WriteString(w, plainAnswer)
			})
			g := testGateway(t, up, withPolicy(loadPolicy(t, "search:\n  embeddings: {provider: openai}\n")),
				func(g *Gateway) { g.Catalogs, g.Embedder = cache, emb })
			send := func(key string, tools []map[string]any) int {
				body := chatRequest(t, []map[string]any{{"role": "user", "content": "hello"}}, tools, false, nil)
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+key)
				w := httptest.NewRecorder()
				g.Handler().ServeHTTP(w, r)
				return w.Code
			}
			bTools := testCatalog(40)
			victim := func() {
				t.Helper()
				if code := send("sk-tenant-b", bTools); code != http.StatusOK {
					t.Fatalf("B's request: %d", code)
				}
			}
			victim()
			victim() // re-sent, accepted: kept
			waitFor(t, func() bool { return emb.batches.Load() == 1 })
			for i := range 8 { // as many catalogs as the cache holds, each sent twice
				tools := testCatalog(13)
				tools[0]["function"].(map[string]any)["description"] = fmt.Sprintf("refused catalog %d", i)
				for range 2 {
					if code := send("sk-not-a-valid-key", tools); code != http.StatusUnauthorized {
						t.Fatalf("a request under the refused key: %d", code)
					}
				}
			}
			tc.check(t, cache, emb, victim)
		})
	}
}
