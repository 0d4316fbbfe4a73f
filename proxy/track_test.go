package proxy

import (
	"context"
	"log/slog"
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
			m := NewMetrics()
			var buf syncBuffer
			base := newTestGateway(t, textAnswer, tc.opt, func(g *Gateway) {
				g.Metrics = m
				g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
			})
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
