package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAPassthroughAnswerInChunksIsNeverCut: an answer that reaches the
// passthrough in chunks over time arrives whole, request after request.
// With the request body streamed to the upstream by the transport, net/http
// cancelled about one request in forty of these mid-answer, and the
// client read a cut body as a whole one.
func TestAPassthroughAnswerInChunksIsNeverCut(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 300 requests of 30 ms each, 10 at a time")
	}
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		for _, c := range []string{"AAAA", "BBBB", "CCCC"} {
			_, _ = io.WriteString(w, c)
			_ = http.NewResponseController(w).Flush()
			// The answer must still be arriving when the request's body
			// has ended: that is when a streamed body cut it.
			time.Sleep(10 * time.Millisecond)
		}
	})
	base := newTestGateway(t, up)
	const requests, together = 300, 10
	var cut atomic.Int32
	var wg sync.WaitGroup
	for w := range together {
		wg.Go(func() {
			for i := w; i < requests; i += together {
				resp, err := http.Post(base+"/audio/speech", "application/json", strings.NewReader(`{"input":"hi"}`))
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "AAAABBBBCCCC" {
					cut.Add(1)
					t.Logf("request %d: read %q, %v", i, b, err)
				}
			}
		})
	}
	wg.Wait()
	if n := cut.Load(); n > 0 {
		t.Errorf("%d of %d answers were cut", n, requests)
	}
}

// TestAPassthroughAnswerCutMidBodyReachesTheClientCut: when the upstream's
// answer breaks off, the client's read fails, as it would direct; it must
// not end as if the answer were whole.
func TestAPassthroughAnswerCutMidBodyReachesTheClientCut(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "AAAA")
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the upstream's connection drops mid-body
	})
	base := newTestGateway(t, up)
	resp, err := http.Post(base+"/audio/speech", "application/json", strings.NewReader(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("the client read %q and a clean end; want the read to fail", b)
	}
}
