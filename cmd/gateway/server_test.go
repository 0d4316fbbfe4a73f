package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// TestShutdownDrainsThenEndsWhatIsLeftWithAnError: SIGTERM (ctx) first
// fails readiness for the drain delay while requests are still served,
// then waits for requests in flight up to the drain timeout; what is still
// running then, or at a second signal, is canceled with
// proxy.ErrShuttingDown as its cause so it can answer with an error.
func TestShutdownDrainsThenEndsWhatIsLeftWithAnError(t *testing.T) {
	tests := []struct {
		name       string
		work       time.Duration // how long /work takes unless canceled
		delay      time.Duration
		timeout    time.Duration
		force      time.Duration // a second signal this long after the first; 0 none
		wantStatus int           // /work's answer
		wantBody   string
		wantWithin time.Duration // run returns this soon after the first signal
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
					if errors.Is(context.Cause(r.Context()), proxy.ErrShuttingDown) {
						http.Error(w, "shutting down", http.StatusServiceUnavailable)
					}
				}
			})
			ctx, signal := context.WithCancel(context.Background())
			out := &addrWriter{addr: make(chan string, 1)}
			srv := &httpServer{addr: "127.0.0.1:0", handler: mux, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stdout: out, drainDelay: tt.delay, drainTimeout: tt.timeout}
			force := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- srv.run(ctx, force) }()
			addr := <-out.addr
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
					t.Errorf("run: %v", err)
				}
				if took := time.Since(at); took > tt.wantWithin {
					t.Errorf("run returned %s after the signal, want within %s", took, tt.wantWithin)
				}
			case <-time.After(tt.wantWithin + 5*time.Second):
				t.Fatal("run did not return")
			}
		})
	}
}

func TestHealthzFailsWhileTheDrainDelayStillServes(t *testing.T) {
	mux := http.NewServeMux()
	var srv *httpServer
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !srv.ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })
	ctx, signal := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	srv = &httpServer{addr: "127.0.0.1:0", handler: mux, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stdout: out, drainDelay: time.Second, drainTimeout: time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.run(ctx, nil) }()
	addr := <-out.addr
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
		t.Errorf("run: %v", err)
	}
}
