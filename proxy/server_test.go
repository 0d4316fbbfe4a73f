package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestShutdownDrainsThenEndsWhatIsLeftWithAnError: SIGTERM (ctx) first
// fails readiness for the drain delay while requests are still served,
// then waits for requests in flight up to the drain timeout; what is still
// running then, or at a second signal, is canceled with
// ErrShuttingDown as its cause so it can answer with an error.
func TestShutdownDrainsThenEndsWhatIsLeftWithAnError(t *testing.T) {
	tests := []struct {
		name       string
		work       time.Duration // how long /work takes unless canceled
		delay      time.Duration
		timeout    time.Duration
		force      time.Duration // a second signal this long after the first; 0 none
		wantStatus int           // /work's answer
		wantBody   string
		wantWithin time.Duration // Run returns this soon after the first signal
	}{
		{"a request that ends within the drain timeout is answered whole", 300 * time.Millisecond, 0, 5 * time.Second, 0, http.StatusOK, "done", 2 * time.Second},
		{"a request still running when the drain time is up ends with the shutdown's error", 30 * time.Second, 0, 300 * time.Millisecond, 0, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
		{"a second signal ends the drain at once", 30 * time.Second, 0, 20 * time.Second, 200 * time.Millisecond, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
		{"a second signal during the drain delay ends it too", 30 * time.Second, 20 * time.Second, 20 * time.Second, 200 * time.Millisecond, http.StatusServiceUnavailable, "shutting down", 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			var once sync.Once
			mux := http.NewServeMux()
			mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(started) })
				select {
				case <-time.After(tt.work):
					_, _ = io.WriteString(w, "done")
				case <-r.Context().Done():
					if errors.Is(context.Cause(r.Context()), ErrShuttingDown) {
						http.Error(w, "shutting down", http.StatusServiceUnavailable)
					}
				}
			})
			ctx, signal := context.WithCancel(context.Background())
			addrs := make(chan string, 1)
			srv := &Server{Addr: "127.0.0.1:0", Handler: mux, OnListen: func(a string) { addrs <- a }, DrainDelay: tt.delay, DrainTimeout: tt.timeout}
			force := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx, force) }()
			addr := <-addrs
			type answer struct {
				status int
				body   string
				err    error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/work")
				if err != nil {
					got <- answer{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- answer{resp.StatusCode, string(b), err}
			}()
			<-started
			signal()
			at := time.Now()
			if tt.force > 0 {
				time.AfterFunc(tt.force, func() { close(force) })
			}
			a := <-got
			if a.err != nil || a.status != tt.wantStatus || !strings.Contains(a.body, tt.wantBody) {
				t.Errorf("/work answered %d %q (err %v), want %d %q", a.status, a.body, a.err, tt.wantStatus, tt.wantBody)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
				if took := time.Since(at); took > tt.wantWithin {
					t.Errorf("Run returned %s after the signal, want within %s", took, tt.wantWithin)
				}
			case <-time.After(tt.wantWithin + 5*time.Second):
				t.Fatal("Run did not return")
			}
		})
	}
}

func TestHealthzFailsWhileTheDrainDelayStillServes(t *testing.T) {
	mux := http.NewServeMux()
	var srv *Server
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !srv.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })
	ctx, signal := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	srv = &Server{Addr: "127.0.0.1:0", Handler: mux, OnListen: func(a string) { addrs <- a }, DrainDelay: time.Second, DrainTimeout: time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil) }()
	addr := <-addrs
	status := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/healthz"); got != http.StatusOK {
		t.Errorf("before the signal /healthz = %d, want 200", got)
	}
	signal()
	time.Sleep(100 * time.Millisecond) // the server sees ctx end
	if got := status("/healthz"); got != http.StatusServiceUnavailable {
		t.Errorf("during the drain delay /healthz = %d, want 503", got)
	}
	if got := status("/work"); got != http.StatusOK {
		t.Errorf("during the drain delay /work = %d, want 200: requests are still served", got)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestServerRefusesOversizedHeaders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &Server{Addr: "127.0.0.1:0", Handler: ok, OnListen: func(a string) { addrs <- a }, DrainTimeout: time.Second}
	go func() { done <- srv.Run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not announce its address")
	}
	for _, tc := range []struct {
		name   string
		size   int
		status int
	}{
		{"a request with ordinary headers is served", 100, http.StatusOK},
		{"a request with 2 MiB of headers is refused with 431", 2 << 20, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			req.Header.Set("X-Padding", strings.Repeat("a", tc.size))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}
