package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheckExitsZeroOnlyWhenTheGatewayIsReady(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		wantCode int
		want     string // in what it printed
	}{
		{"a ready gateway passes", http.StatusOK, 0, "ok"},
		{"a gateway draining or starting fails", http.StatusServiceUnavailable, 1, "503 not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(map[bool]string{true: "ok\n", false: "not ready\n"}[tt.status == http.StatusOK]))
			}))
			defer srv.Close()
			out, errOut, code := runGateway(t, context.Background(), "healthcheck", "--listen", strings.TrimPrefix(srv.URL, "http://"))
			if code != tt.wantCode || !strings.Contains(out+errOut, tt.want) {
				t.Errorf("exit %d, printed %q; want %d and %q", code, out+errOut, tt.wantCode, tt.want)
			}
		})
	}
	t.Run("nothing listening fails", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		if _, errOut, code := runGateway(t, context.Background(), "healthcheck", "--listen", addr); code != 1 || !strings.Contains(errOut, "refused") {
			t.Errorf("exit %d, printed %q; want 1 and the refusal", code, errOut)
		}
	})
}

func TestHealthURLAsksAWildcardListenerOnLoopback(t *testing.T) {
	tests := []struct {
		name, addr, want string
		wantErr          bool
	}{
		{"an IPv4 wildcard is asked on loopback", "0.0.0.0:8080", "http://127.0.0.1:8080/healthz", false},
		{"an IPv6 wildcard is asked on loopback", "[::]:8080", "http://127.0.0.1:8080/healthz", false},
		{"an empty host is asked on loopback", ":9000", "http://127.0.0.1:9000/healthz", false},
		{"a named host is asked as it is", "gw.internal:8080", "http://gw.internal:8080/healthz", false},
		{"an address without a port is a usage error", "localhost", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := healthURL(tt.addr)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("healthURL(%q) = %q, %v; want %q (error: %v)", tt.addr, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		t.Run(strings.Join(args, " ")+" prints the version and exits 0", func(t *testing.T) {
			out, errOut, code := runGateway(t, context.Background(), args...)
			if code != 0 || !strings.HasPrefix(out, "toolgate ") || !strings.Contains(out, "go1.") {
				t.Errorf("exit %d, printed %q %q; want 0 and a toolgate version line with the Go version", code, out, errOut)
			}
		})
	}
	t.Run("version with an argument is a usage error", func(t *testing.T) {
		if _, _, code := runGateway(t, context.Background(), "version", "x"); code != 2 {
			t.Errorf("exit %d, want 2", code)
		}
	})
}
