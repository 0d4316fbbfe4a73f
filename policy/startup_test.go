package policy

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStartupChangesNamesWhatOnlyARestartApplies(t *testing.T) {
	const base = "gateway: {listen: '127.0.0.1:8080', mode: hybrid}\nsessions: {ttl: 1h}\n"
	prev := mustLoad(t, base, nil)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"the same settings name nothing", base, nil},
		{"settings that reload live name nothing", "gateway: {listen: '127.0.0.1:8080', mode: search, max_rounds: 2}\nsessions: {ttl: 1h}\ndeny: [x]\n", nil},
		{"another listen address is named", "gateway: {listen: '127.0.0.1:9090'}\nsessions: {ttl: 1h}\n", []string{"gateway.listen"}},
		{"session settings are named", "gateway: {listen: '127.0.0.1:8080'}\nsessions: {ttl: 2h, max_entries: 5}\n", []string{"sessions.ttl", "sessions.max_entries"}},
		{"another embeddings disk cache bound is named", base + "search:\n  embeddings: {cache_max_mb: 64}\n", []string{"search.embeddings.cache_max_mb"}},
		{"writing out the default embeddings disk cache bound names nothing", base + "search:\n  embeddings: {cache_max_mb: 0}\n", nil},
		{"switching embeddings to openai is named", base + "search:\n  embeddings: {provider: openai, query_timeout: 5s}\n", []string{"search.embeddings.provider", "search.embeddings.query_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := startupChanges(prev, mustLoad(t, tc.src, nil))
			if !slices.Equal(got, tc.want) {
				t.Errorf("startupChanges = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("the upstream and the transport's timeouts are named", func(t *testing.T) {
		next := mustLoad(t, "gateway:\n  listen: '127.0.0.1:8080'\n  upstream: http://other:1/v1\n  timeouts: {connect: 3s, first_byte: 1m, idle: 9s}\nsessions: {ttl: 1h}\n", nil)
		want := []string{"gateway.upstream", "gateway.timeouts.connect", "gateway.timeouts.first_byte"}
		if got := startupChanges(prev, next); !slices.Equal(got, want) {
			t.Errorf("startupChanges = %v, want %v (idle reloads live)", got, want)
		}
	})
	t.Run("turning openai embeddings off applies live and names nothing", func(t *testing.T) {
		on := mustLoad(t, base+"search:\n  embeddings: {provider: openai}\n", nil)
		off := mustLoad(t, base+"search:\n  embeddings: {provider: offline}\n", nil)
		if got := startupChanges(on, off); got != nil {
			t.Errorf("startupChanges = %v, want none", got)
		}
	})
}

// TestAReloadSaysWhichEditsWaitForARestart: a reload publishes every
// setting, but those read at start-up keep their running values; the log
// says so while the file differs from what the process started with, and
// stops once the edit is undone.
func TestAReloadSaysWhichEditsWaitForARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sessions: {ttl: 1h}\n")
	var logs bytes.Buffer
	live, err := NewLive(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const warning = "read only at start-up differ"
	for _, tc := range []struct {
		name, src string
		warned    bool
	}{
		{"an edit of a live setting says nothing", "sessions: {ttl: 1h}\ngateway: {max_rounds: 2}\n", false},
		{"an edit of the session ttl is said to wait for a restart", "sessions: {ttl: 2h}\ngateway: {max_rounds: 2}\n", true},
		{"another edit is said again while the ttl still differs", "sessions: {ttl: 2h}\ngateway: {max_rounds: 3}\n", true},
		{"undoing the ttl edit says nothing", "sessions: {ttl: 1h}\ngateway: {max_rounds: 3}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			write(tc.src)
			if err := live.Reload(); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if got := strings.Contains(out, warning); got != tc.warned {
				t.Errorf("warned: %v, want %v; log:\n%s", got, tc.warned, out)
			}
			if tc.warned && !strings.Contains(out, "sessions.ttl") {
				t.Errorf("the warning does not name sessions.ttl:\n%s", out)
			}
		})
	}
}
