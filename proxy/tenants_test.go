package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/selector"
)

func TestTenantsSharingASessionIDShareNothing(t *testing.T) {
	// Search mode: no preselection, so a tool is offered only because the
	// session discovered it.
	up := &toolRecorder{replies: []string{searchReply, plainAnswer}}
	base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway:\n  mode: search\n")))
	req := func(prompt string) []byte {
		return chatRequest(t, []map[string]any{{"role": "user", "content": prompt}}, testCatalog(30), false, nil)
	}
	as := func(key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "X-Session-ID": "shared-session"}
	}
	// Tenant A searches; repo_create_issue joins A's session.
	if x := send(t, base, req("File a bug about the login crash."), as("sk-tenant-a")); x.status != 200 {
		t.Fatalf("tenant A: %d %s", x.status, x.body)
	}
	cases := []struct {
		name  string
		key   string
		wants bool
	}{
		{"the same tenant with the same session id gets the tool it discovered", "sk-tenant-a", true},
		{"another tenant with the same session id does not", "sk-tenant-b", false},
		{"a client without a credential does not either", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := as(tc.key)
			if tc.key == "" {
				hdr["Authorization"] = ""
			}
			if x := send(t, base, req("What is on my plate today?"), hdr); x.status != 200 {
				t.Fatalf("%d %s", x.status, x.body)
			}
			got := strings.Contains(strings.Join(up.last(), ","), "repo_create_issue")
			if got != tc.wants {
				t.Errorf("upstream offered %v; repo_create_issue present = %v, want %v", up.last(), got, tc.wants)
			}
		})
	}
}

func TestCredentialsNeverReachTheLogs(t *testing.T) {
	const secret = "sk-live-SECRET-9f8e7d6c5b4a"
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var calls atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1: // a search round, then an answer: a full turn with debug logs
			_, _ = io.WriteString(w, searchReply)
		case 2:
			_, _ = io.WriteString(w, plainAnswer)
		default: // then failures, which are logged with their errors
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"boom"}}`)
		}
	})
	base := newTestGateway(t, up, func(g *Gateway) { g.Logger = logger })
	hdr := map[string]string{"Authorization": "Bearer " + secret, "X-Session-ID": "s1"}
	for _, stream := range []bool{false, false, true} {
		send(t, base, bigRequest(t, stream), hdr)
	}
	send(t, base, []byte(`{"model":"m","messages":"nope"}`), hdr)
	out := logs.String()
	if !strings.Contains(out, "request failed") {
		t.Fatalf("the turns logged no failure; the test would prove nothing:\n%s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "SECRET") {
		t.Errorf("the credential appears in the logs:\n%s", out)
	}
}

// countingEmbedder counts the catalog-sized batches it embeds: one per
// catalog compile (queries come one text at a time).
type countingEmbedder struct{ batches atomic.Int32 }

func (e *countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if len(texts) > 1 {
		e.batches.Add(1)
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, float32(i), 0.5}
	}
	return out, nil
}

func (e *countingEmbedder) Model() string { return "counting" }

func TestConcurrentFirstRequestsCompileTheCatalogOnce(t *testing.T) {
	const n = 200
	emb := &countingEmbedder{}
	cache := selector.NewCache(8)
	model := newEpisodeModel(1)
	base := newTestGateway(t, model, withPolicy(loadPolicy(t, "search:\n  embeddings: {provider: openai}\n")), func(g *Gateway) {
		g.Embedder = emb
		g.Catalogs = cache
	})
	body := chatRequest(t, []map[string]any{{"role": "user", "content": "hello"}}, testCatalog(60), false, nil)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Post(base+"/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				failed.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed", failed.Load(), n)
	}
	// The catalog's vectors are embedded in the background: wait for them.
	deadline := time.Now().Add(5 * time.Second)
	for emb.batches.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	st := cache.Stats()
	if got := emb.batches.Load(); got != 1 || st.Len != 1 || st.Hits+st.Misses != n {
		t.Errorf("%d catalog compiles, %d cached, %d hits + %d misses; want 1 compile, 1 cached, %d lookups", got, st.Len, st.Hits, st.Misses, n)
	}
}
