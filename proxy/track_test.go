package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/session"
)

// requestsBy sums toolgate_requests_total by the value of one label
// (route, mode or status) over the series whose other labels match want.
func requestsBy(t *testing.T, m *Metrics, label string, want map[string]string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_requests_total" {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				} else if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			out[key] += s.GetCounter().GetValue()
		}
	}
	return out
}

// panickingStore is a session store whose Get panics: a bug in a store
// implementation, or in the code that reads it.
type panickingStore struct{ session.Store }

func (panickingStore) Get(context.Context, string) (session.State, error) {
	panic("session store bug")
}

// panickingTransport is an upstream transport that panics.
type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) { panic("transport bug") }

// TestAPanickingRequestIsReportedAsThe500TheClientGot: the tracker's
// report ran while the panic unwound, before the recovery wrote the 500,
// and counted the request as status 0, a client that left.
func TestAPanickingRequestIsReportedAsThe500TheClientGot(t *testing.T) {
	turn := chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, nil)
	for _, tc := range []struct {
		name, path string
		body       []byte
		opt        func(*Gateway)
		route      string
	}{
		{"a turn whose session store panics is counted and logged as a 500", "/chat/completions", turn,
			func(g *Gateway) { g.Sessions = panickingStore{session.NewMemory(10, 0)} }, routeChat},
		{"a request on the passthrough route whose transport panics is counted as a 500", "/embeddings", []byte(`{"model":"m","input":"hi"}`),
			func(g *Gateway) { g.Transport = panickingTransport{} }, routePassthrough},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, m, buf := observedGateway(t, textAnswer, tc.opt)
			x := sendTo(t, base, tc.path, tc.body, nil)
			wantError(t, x, http.StatusInternalServerError, "internal_error")
			if tc.route != routePassthrough {
				if recs := buf.waitLines(t, 1); len(recs) != 1 || recs[0].Get("status").Int() != http.StatusInternalServerError {
					t.Errorf("want one record with status 500:\n%s", buf.String())
				}
			}
			if got := requestsBy(t, m, "status", map[string]string{"route": tc.route}); got["500"] != 1 || len(got) != 1 {
				t.Errorf("toolgate_requests_total{route=%q} by status = %v, want 500: 1", tc.route, got)
			}
		})
	}
}

// TestEveryRequestIsCountedUnderAMode: the passthrough route's requests,
// and the turns refused before the gateway decided anything, were counted
// and logged with mode="", a mode no policy has.
func TestEveryRequestIsCountedUnderAMode(t *testing.T) {
	const pol = "gateway: {mode: search}\ndeny: [repo_delete_branch]\n" +
		"profiles:\n  - name: preselecting\n    match: {model: \"gpt-pre\"}\n    gateway: {mode: preselect}\n"
	tools := testCatalog(60)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	denied := map[string]any{"type": "function", "function": map[string]any{"name": "repo_delete_branch"}}
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		route, mode        string
		status             int
	}{
		{"a model list on the passthrough route is counted under mode passthrough", http.MethodGet, "/models", nil,
			routePassthrough, "passthrough", http.StatusOK},
		{"an embeddings call on the passthrough route is counted under mode passthrough", http.MethodPost, "/embeddings", []byte(`{"model":"m","input":"hi"}`),
			routePassthrough, "passthrough", http.StatusOK},
		{"a turn whose body is not JSON is counted under the policy's mode", http.MethodPost, "/chat/completions", []byte(`{"model":`),
			routeChat, "search", http.StatusBadRequest},
		{"a turn whose tool_choice names a denied tool is counted under the policy's mode", http.MethodPost, "/chat/completions",
			chatRequest(t, msgs, tools, false, map[string]any{"tool_choice": denied}), routeChat, "search", http.StatusBadRequest},
		{"a refused turn of a model a profile matches is counted under the profile's mode", http.MethodPost, "/chat/completions",
			chatRequest(t, msgs, tools, false, map[string]any{"model": "gpt-pre", "tool_choice": denied}), routeChat, "preselect", http.StatusBadRequest},
		{"a Responses turn whose body is not JSON is counted under the policy's mode", http.MethodPost, "/responses", []byte(`[`),
			routeResponses, "search", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, m, buf := observedGateway(t, textAnswer, withPolicy(loadPolicy(t, pol)))
			req, _ := http.NewRequest(tc.method, base+tc.path, bytes.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer sk-test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.route != routePassthrough {
				if recs := buf.waitLines(t, 1); len(recs) != 1 || recs[0].Get("mode").String() != tc.mode {
					t.Errorf("want one record of mode %q:\n%s", tc.mode, buf.String())
				}
			}
			// A request is counted when its handler returns, which can be
			// after the client has read the whole answer.
			waitFor(t, func() bool { return len(requestsBy(t, m, "mode", map[string]string{"route": tc.route})) > 0 })
			if got := requestsBy(t, m, "mode", map[string]string{"route": tc.route}); got[tc.mode] != 1 || len(got) != 1 {
				t.Errorf("toolgate_requests_total{route=%q} by mode = %v, want %s: 1", tc.route, got, tc.mode)
			}
		})
	}
}
