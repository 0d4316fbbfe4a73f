package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// failingStore is a session store whose every operation fails with err.
type failingStore struct{ err error }

func (s failingStore) Get(context.Context, string) (session.State, error) {
	return session.State{}, s.err
}
func (s failingStore) Put(context.Context, string, session.State) error { return s.err }
func (s failingStore) Delete(context.Context, string) error             { return s.err }

func TestSessionStoreFailuresAreCountedAndLoggedOnlyWhenNews(t *testing.T) {
	unavailable := fmt.Errorf("reading session from redis: %w: no answer within 250ms", session.ErrUnavailable)
	for _, tc := range []struct {
		name     string
		err      error
		warnings int // per request: a Get and a Put
	}{
		{"an unavailable store is counted but not logged per request (the store logs it once)", unavailable, 0},
		{"any other store failure is counted and logged", errors.New("decoding session from redis: unexpected end of JSON input"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics()
			var logs syncBuffer
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			base := newTestGateway(t, model, func(g *Gateway) {
				g.Metrics = m
				g.Sessions = failingStore{tc.err}
				g.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			body := chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(60), false, nil)
			const requests = 3
			for range requests {
				resp := post(t, base, body, nil)
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			get, put := storeErrors(t, base, requests)
			if get < requests || put < requests {
				t.Errorf("store errors get = %v, put = %v; want %d each", get, put, requests)
			}
			if n := strings.Count(logs.String(), `"level":"WARN"`); n != tc.warnings*requests {
				t.Errorf("%d warnings, want %d:\n%s", n, tc.warnings*requests, logs.String())
			}
		})
	}
}

// storeErrors waits until the gateway at base has counted at least n
// failed session gets and n failed puts, and returns both counts (lower
// when the wait ran out).
func storeErrors(t *testing.T, base string, n float64) (get, put float64) {
	t.Helper()
	scrapeUntil(t, base, func(text string) bool {
		get = metricValue(t, text, `toolgate_session_store_errors_total{op="get"}`)
		put = metricValue(t, text, `toolgate_session_store_errors_total{op="put"}`)
		return get >= n && put >= n
	})
	return get, put
}
