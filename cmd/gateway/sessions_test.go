package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	toolgate "github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/internal/eval"
	"github.com/toolgate/toolgate/policy"
)

// startReplica runs the gateway command with the given policy text and
// returns its base URL.
func startReplica(t *testing.T, upstream, policyText string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(cfg, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--upstream", upstream, "--config", cfg}, out, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case addr := <-out.addr:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("gateway exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not announce its address")
	}
	return ""
}

func TestReplicasShareSessionsThroughRedis(t *testing.T) {
	var tools []json.RawMessage
	if err := json.Unmarshal(toolgate.SampleCatalog(), &tools); err != nil {
		t.Fatal(err)
	}
	chat := func(t *testing.T, base string, msgs ...string) {
		t.Helper()
		var m []map[string]string
		for i, c := range msgs {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			m = append(m, map[string]string{"role": role, "content": c})
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": m, "tools": tools})
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Session-ID", "conv-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		name   string
		store  func(t *testing.T) string
		shared bool
	}{
		{"replicas on one redis offer the tools another replica found", func(t *testing.T) string {
			return "redis://" + miniredis.RunT(t).Addr()
		}, true},
		{"replicas with in-process memory do not", func(*testing.T) string { return "memory" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &eval.SearchOnceModel{}
			srv := httptest.NewServer(up)
			defer srv.Close()
			policyText := "gateway:\n  mode: search\nsessions:\n  store: " + tc.store(t) + "\n"
			a := startReplica(t, srv.URL+"/v1", policyText)
			b := startReplica(t, srv.URL+"/v1", policyText)

			chat(t, a, "Please review and merge the open pull request.")
			found := up.Seen() // search mode: all of it came from a's search
			if len(found) == 0 {
				t.Fatal("replica a's search found nothing")
			}
			up.Reset()
			chat(t, b, "Please review and merge the open pull request.", "done", "Now the next one.")
			first := up.Offered()[0] // b's first upstream request, before any search
			has := slices.Contains(first, found[0])
			if has != tc.shared {
				t.Errorf("replica b's first request %v; found on a: %v; shared = %v", first, found, has)
			}
		})
	}
}

func TestStartUpSaysWhyRedisIsNotUsable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		url   func(t *testing.T) string
		want  string
		never string
	}{
		{"a refused password is reported as refused credentials, not as unreachable", func(t *testing.T) string {
			srv := miniredis.RunT(t)
			srv.RequireAuth("right-s3cret")
			return "redis://:wrong-s3cret@" + srv.Addr()
		}, "refused the credentials", "unreachable"},
		{"a server that is gone is reported as unreachable", func(t *testing.T) string {
			srv := miniredis.RunT(t)
			addr := srv.Addr()
			srv.Close()
			return "redis://:right-s3cret@" + addr
		}, "unreachable", "refused the credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			_, release, err := newSessions(context.Background(), policy.Sessions{Store: tc.url(t), TTL: time.Minute},
				slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if got := logs.String(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.never) || strings.Contains(got, "s3cret") {
				t.Errorf("start-up log %s; want %q, not %q, and no password", got, tc.want, tc.never)
			}
		})
	}
}

// TestGoRedisLinesAreDebug: go-redis logs every failed dial of its pool;
// the store warns once per outage itself, so go-redis's own lines show
// only at debug, and with serve's level.
func TestGoRedisLinesAreDebug(t *testing.T) {
	for _, tt := range []struct {
		name  string
		level slog.Level
		want  bool
	}{
		{"at info they are not shown", slog.LevelInfo, false},
		{"at debug they are", slog.LevelDebug, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			redisLogger{slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: tt.level}))}.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
			if got := strings.Contains(out.String(), `"component":"redis"`); got != tt.want {
				t.Errorf("logged %q; want a line: %v", out.String(), tt.want)
			}
		})
	}
}
