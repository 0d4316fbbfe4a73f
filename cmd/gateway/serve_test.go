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

	"github.com/toolgate/toolgate/policy"
)

// addrWriter captures the address httpServer.run announces.
type addrWriter struct {
	once sync.Once
	addr chan string
}

func (w *addrWriter) Write(p []byte) (int, error) {
	if _, rest, ok := strings.Cut(string(p), "http://"); ok {
		w.once.Do(func() { w.addr <- strings.TrimSpace(rest) })
	}
	return len(p), nil
}

func TestServerRefusesOversizedHeaders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	done := make(chan error, 1)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &httpServer{addr: "127.0.0.1:0", handler: ok, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stdout: out, drainTimeout: time.Second}
	go func() { done <- srv.run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveHTTP: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-out.addr:
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

func TestUpstreamTransportTakesItsTimeoutsFromThePolicy(t *testing.T) {
	g := policy.Default().Gateway
	g.HeaderTimeout = 1234 * time.Millisecond
	tr := newTransport(g)
	if tr.ResponseHeaderTimeout != g.HeaderTimeout {
		t.Errorf("ResponseHeaderTimeout = %s, want the policy's first_byte %s", tr.ResponseHeaderTimeout, g.HeaderTimeout)
	}
	if tr.DialContext == nil {
		t.Error("no DialContext: the connect timeout is not applied")
	}
}

func TestAListenAddressNetListenWouldRefuseIsAUsageError(t *testing.T) {
	tests := []struct {
		name, addr string
		ok         bool
	}{
		{"host and port", "127.0.0.1:8080", true},
		{"a wildcard host", ":8080", true},
		{"a port by service name", "127.0.0.1:http", true},
		{"no port", "nonsense", false},
		{"a port out of range", ":99999", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkListen(tt.addr)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, errUsage) {
				t.Errorf("checkListen(%q) = %v; want ok %v, else a usage error", tt.addr, err, tt.ok)
			}
		})
	}
}

func TestAnOverriddenPolicySettingIsLogged(t *testing.T) {
	cfg := writeFile(t, "tools.yaml", "gateway:\n  listen: 127.0.0.1:0\n")
	for _, tt := range []struct {
		name string
		args []string
		want bool
	}{
		{"a --listen other than the policy's is logged", []string{"serve", "--config", cfg, "--listen", "localhost:0"}, true},
		{"the policy's own listen is not", []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // serve starts, then stops at once
			_, stderr, _ := runGateway(t, ctx, tt.args...)
			if got := strings.Contains(stderr, "gateway.listen is overridden"); got != tt.want {
				t.Errorf("logged the override: %v, want %v:\n%s", got, tt.want, stderr)
			}
		})
	}
}

// TestABadUpstreamIsRefusedWithoutItsPassword: serve's error goes to the
// process's output, which logs keep.
func TestABadUpstreamIsRefusedWithoutItsPassword(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"a scheme that is not http", "ftp://user:hunter2@x/v1"},
		{"a URL that does not parse", "https://user:hunter2@ho st/v1"},
		{"a URL without a host", "https://user:hunter2@/v1"},
	} {
		t.Run(tc.name+" is refused without its password", func(t *testing.T) {
			_, err := parseUpstream(tc.url)
			if !errors.Is(err, errUsage) {
				t.Fatalf("parseUpstream: %v; want a usage error", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
