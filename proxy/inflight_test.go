package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestTheInflightBoundAdmitsWhatFitsAndAnyRequestAlone(t *testing.T) {
	f := inflight{max: 100}
	for _, st := range []struct {
		name    string
		reserve int64
		release int64
		ok      bool
		held    int64
	}{
		{"a request over the bound is admitted when it is alone", 150, 0, true, 150},
		{"a second request is refused while the first passes the bound", 10, 0, false, 150},
		{"once the first is done, one that fits is admitted", 60, 150, true, 60},
		{"one that would pass the bound beside it is refused", 50, 0, false, 60},
		{"one that reaches the bound exactly is admitted", 40, 0, true, 100},
	} {
		t.Run(st.name, func(t *testing.T) {
			f.release(st.release)
			err := f.reserve(st.reserve)
			if (err == nil) != st.ok || (err != nil && !errors.Is(err, ErrOverloaded)) {
				t.Errorf("reserve(%d) = %v, want admitted %v", st.reserve, err, st.ok)
			}
			if got := f.held.Load(); got != st.held {
				t.Errorf("%d bytes held, want %d", got, st.held)
			}
		})
	}
}

// TestRequestsOverTheInflightBoundAreRefusedUntilTheHeldOnesAreDone: the
// gateway holds the bodies it reads whole for the request's life; while
// a slow request holds most of the bound, a request that would pass it
// gets a 503 the SDKs retry, on the chat route and on the passthrough,
// and is admitted again once the slow one is done.
func TestRequestsOverTheInflightBoundAreRefusedUntilTheHeldOnesAreDone(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte("HOLD")) {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainAnswer)
	})
	base := newTestGateway(t, upstream, func(g *Gateway) { g.MaxInflightBytes, g.Metrics = 500<<10, NewMetrics() })
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	chat := func(text string, size int) []byte {
		return chatRequest(t, []map[string]any{{"role": "user", "content": text + strings.Repeat(" padding", size/8)}}, nil, false, nil)
	}
	send := func(path string, body []byte, chunked bool) *http.Response {
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // no length: the client sends it chunked
		}
		req, _ := http.NewRequest(http.MethodPost, base+path, r)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	held := make(chan *http.Response, 1)
	go func() { held <- send("/chat/completions", chat("HOLD", 400<<10), false) }()
	waitFor(t, func() bool { return gatewayHolds(t, base) >= 400<<10 })

	for _, tc := range []struct {
		name    string
		path    string
		body    []byte
		chunked bool
		status  int
	}{
		{"a chat request that would pass the bound is refused", "/chat/completions", chat("next", 200<<10), false, http.StatusServiceUnavailable},
		{"a chunked chat request that would pass the bound is refused once read", "/chat/completions", chat("next", 200<<10), true, http.StatusServiceUnavailable},
		{"a passthrough body that would pass the bound is refused", "/embeddings", []byte(`{"input":"` + strings.Repeat("x", 200<<10) + `"}`), false, http.StatusServiceUnavailable},
		{"a chat request that fits beside the held one is served", "/chat/completions", chat("small", 50<<10), false, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(tc.path, tc.body, tc.chunked)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, b, tc.status)
			}
			if tc.status != http.StatusServiceUnavailable {
				return
			}
			if code := gjson.GetBytes(b, "error.code").String(); code != "gateway_overloaded" {
				t.Errorf("error code %q, want gateway_overloaded", code)
			}
			if ra := resp.Header.Get("Retry-After"); ra != "1" {
				t.Errorf("Retry-After %q, want 1", ra)
			}
		})
	}
	t.Run("once the held request is done the refused one is served", func(t *testing.T) {
		once.Do(func() { close(release) })
		if resp := <-held; resp.StatusCode != http.StatusOK {
			t.Fatalf("the held request ended %d", resp.StatusCode)
		}
		waitFor(t, func() bool { return gatewayHolds(t, base) == 0 })
		resp := send("/chat/completions", chat("next", 200<<10), false)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
	})
}

// gatewayHolds reads toolgate_inflight_request_bytes from the gateway's
// /metrics.
func gatewayHolds(t *testing.T, base string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(scrape(t, base), "\n") {
		if v, ok := strings.CutPrefix(line, "toolgate_inflight_request_bytes "); ok {
			return gjson.Parse(v).Float()
		}
	}
	t.Fatalf("no toolgate_inflight_request_bytes in /metrics")
	return 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestABodyOfUnknownLengthCountsAgainstTheBoundAsItArrives: a chunked or
// compressed body is read whole before its length is known; it must be
// counted as it arrives, so many such uploads at once are refused before
// they fill the memory the bound protects.
func TestABodyOfUnknownLengthCountsAgainstTheBoundAsItArrives(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name   string
		max    int64
		others int64 // held by other requests
		body   int64
		ok     bool
	}{
		{"a body alone passes the bound, as a request alone always may", 1 * mb, 0, 3 * mb, true},
		{"a body that fits beside the others is read whole", 8 * mb, 2 * mb, 3 * mb, true},
		{"a body that would pass the bound beside the others is refused mid-read", 4 * mb, 2 * mb, 3 * mb, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &inflight{max: tc.max}
			if err := f.reserve(tc.others); err != nil {
				t.Fatal(err)
			}
			h := &heldReader{r: io.LimitReader(zeros{}, tc.body), f: f}
			n, err := io.Copy(io.Discard, h)
			if ok := err == nil; ok != tc.ok || (err != nil && !errors.Is(err, ErrOverloaded)) {
				t.Fatalf("read %d bytes, %v; want read whole: %v", n, err, tc.ok)
			}
			if got := f.held.Load(); got != tc.others+h.held {
				t.Errorf("%d bytes held; want the others' %d and the %d the reader reserved", got, tc.others, h.held)
			}
			if tc.ok && h.held < tc.body {
				t.Errorf("the reader reserved %d bytes for a %d-byte body", h.held, tc.body)
			}
			if !tc.ok && tc.others+h.held > tc.max {
				t.Errorf("%d bytes held past the %d bound", tc.others+h.held, tc.max)
			}
		})
	}
	t.Run("a chunked upload under way shows in the in-flight gauge", func(t *testing.T) {
		base := newTestGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, plainAnswer)
		}), func(g *Gateway) { g.Metrics = NewMetrics() })
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", pr)
		req.Header.Set("Content-Type", "application/json")
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		_, _ = io.WriteString(pw, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("x", 3*mb))
		waitFor(t, func() bool { return gatewayHolds(t, base) >= 2*mb })
		_, _ = io.WriteString(pw, `"}]}`)
		pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return gatewayHolds(t, base) == 0 })
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
