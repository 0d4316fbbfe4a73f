package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// pause is a reader that waits, then ends: between two readers in an
// io.MultiReader it is a client that stops mid-upload.
type pause time.Duration

func (p pause) Read([]byte) (int, error) {
	time.Sleep(time.Duration(p))
	return 0, io.EOF
}

// slowClient is a client's connection that takes delay for every flush:
// a client reading slowly, or a congested network. A short write lands in
// the server's buffer at once; the flush that sends it is what waits.
type slowClient struct {
	*httptest.ResponseRecorder
	delay time.Duration
}

func (c *slowClient) Flush() {
	time.Sleep(c.delay)
	c.ResponseRecorder.Flush()
}

// addedSeconds is toolgate_added_latency_seconds' sum and count over
// both stream labels.
func addedSeconds(t *testing.T, m *Metrics) (sum float64, count uint64) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toolgate_added_latency_seconds" {
			for _, s := range mf.GetMetric() {
				sum += s.GetHistogram().GetSampleSum()
				count += s.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, count
}

// TestAddedLatencyIsTheGatewaysOwnTime: toolgate_added_latency_seconds
// (and the record's added_ms) is the time the gateway adds, never the
// client's slow upload or the time a stream waits on a slow reader: an
// operator would read a client's slow network as a slow gateway.
func TestAddedLatencyIsTheGatewaysOwnTime(t *testing.T) {
	const wait = 800 * time.Millisecond
	body := bigRequest(t, false)
	stream := bigRequest(t, true)
	for _, tc := range []struct {
		name string
		// serve sends the turn to h and returns the status it got.
		serve func(t *testing.T, h http.Handler) int
	}{
		{"a body sent in two halves 800 ms apart adds no latency", func(t *testing.T, h http.Handler) int {
			srv := httptest.NewServer(h)
			defer srv.Close()
			half := len(body) / 2
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
				io.MultiReader(bytes.NewReader(body[:half]), pause(wait), bytes.NewReader(body[half:])))
			req.ContentLength = int64(len(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode
		}},
		{"a stream flushed to a client that takes 800 ms to read it adds no latency", func(t *testing.T, h http.Handler) int {
			w := &slowClient{ResponseRecorder: httptest.NewRecorder(), delay: wait}
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(stream))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(w, req)
			return w.Code
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if !gjson.GetBytes(b, "stream").Bool() {
					textAnswer(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, textChunk("Done.")+finishChunk("stop")+doneEvent)
			})
			g, m, buf := observedTestGateway(t, up)
			if status := tc.serve(t, g.Handler()); status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			took := recs[0].Get("duration_ms").Float()
			added := recs[0].Get("added_ms").Float()
			if took < float64(wait.Milliseconds()) {
				t.Fatalf("the request took %v ms; the test needs the client to have made it wait %v", took, wait)
			}
			// The gateway's own time (the catalog's first compile under
			// -race on a loaded machine can take most of a second) has no
			// fixed bound; what it can never include is the client's wait.
			// Counting that wait would make added about took, well over
			// this bound.
			const slack = 50 // ms: rounding, and the clock read after the wait
			most := took - float64(wait.Milliseconds()) + slack
			if added > most {
				t.Errorf("added_ms = %v of the request's %v ms; want at most %v: the request's time less the client's %v wait", added, took, most, wait)
			}
			if sum, n := addedSeconds(t, m); n != 1 || sum*1000 > most {
				t.Errorf("toolgate_added_latency_seconds sum %v s over %d requests; want one of at most %v ms: the request's %v ms less the client's %v wait", sum, n, most, took, wait)
			}
		})
	}
}
