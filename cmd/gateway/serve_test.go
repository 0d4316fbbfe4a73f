package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// addrWriter captures the address serve announces on stdout.
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
		{"a host and port are accepted", "127.0.0.1:8080", true},
		{"a wildcard host is accepted", ":8080", true},
		{"a port by service name is accepted", "127.0.0.1:http", true},
		{"an address without a port is a usage error", "nonsense", false},
		{"a port out of range is a usage error", ":99999", false},
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

// TestAnOverriddenPolicySettingIsLogged: a flag or variable overriding
// what the policy file says is logged, but not one overriding a built-in
// default the file left alone (the image sets GATEWAY_LISTEN, which would
// otherwise say at every start that the policy's listen is overridden).
func TestAnOverriddenPolicySettingIsLogged(t *testing.T) {
	withListen := writeFile(t, "tools.yaml", "gateway:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:9/v1\n")
	withoutListen := writeFile(t, "tools.yaml", "deny: [a_*]\n")
	for _, tt := range []struct {
		name string
		env  string // GATEWAY_LISTEN
		args []string
		key  string
		want bool
	}{
		{"a --listen other than the policy's is logged", "", []string{"--config", withListen, "--listen", "localhost:0"}, "gateway.listen", true},
		{"the policy's own listen is not", "", []string{"--config", withListen, "--listen", "127.0.0.1:0"}, "gateway.listen", false},
		{"GATEWAY_LISTEN other than the policy's is logged", "localhost:0", []string{"--config", withListen}, "gateway.listen", true},
		{"an --upstream other than the policy's is logged", "", []string{"--config", withListen, "--upstream", "http://localhost:9/v1"}, "gateway.upstream", true},
		{"a --listen over a policy that leaves listen to its default is not", "", []string{"--config", withoutListen, "--listen", "127.0.0.1:0"}, "gateway.listen", false},
		{"GATEWAY_LISTEN over a policy that leaves listen to its default is not", "127.0.0.1:0", []string{"--config", withoutListen}, "gateway.listen", false},
		{"an --upstream over a policy that leaves upstream to its default is not", "", []string{"--config", withoutListen, "--listen", "127.0.0.1:0", "--upstream", "http://localhost:9/v1"}, "gateway.upstream", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GATEWAY_LISTEN", tt.env)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // serve starts, then stops at once
			_, stderr, code := runGateway(t, ctx, append([]string{"serve"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			if got := strings.Contains(stderr, tt.key+" is overridden"); got != tt.want {
				t.Errorf("logged the override of %s: %v, want %v:\n%s", tt.key, got, tt.want, stderr)
			}
		})
	}
}

// TestServeWarmsUpBeforeItListens: the first request of a process would
// otherwise wait about 90 ms for the selector's tables and the tokenizer
// to load; serve loads them before /healthz can answer 200.
func TestServeWarmsUpBeforeItListens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, then stops at once
	_, stderr, code := runGateway(t, ctx, "serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/v1")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `"msg":"warmed"`) {
		t.Errorf("serve did not warm up:\n%s", stderr)
	}
}

// TestABadUpstreamIsRefusedWithoutItsPassword: serve's error goes to the
// process's output, which logs keep.
func TestABadUpstreamIsRefusedWithoutItsPassword(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"a scheme that is not http", "ftp://user:hunter2@x/v1"},
		{"a URL that does not parse", "https://user:hunter2@ho st/v1"},
		{"a URL without a host", "https://user:hunter2@/v1"},
		{"a scheme that is not http with a key as the user name", "ftp://sk-live-hunter2@x/v1"},
		{"a scheme that is not http with a key in the query", "ftp://x/v1?api-key=hunter2"},
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

// TestServeNeverPrintsTheSecretsItReadsFromTheEnvironment: the flag
// package prints each flag's default in its usage text, on -h and on every
// parse error, so an environment variable holding a secret must never be
// a flag's default.
func TestServeNeverPrintsTheSecretsItReadsFromTheEnvironment(t *testing.T) {
	const (
		upstream = "https://sk-live-UPSTREAMSECRET@llm.internal/v1"
		token    = "ADMINTOKENSECRET"
	)
	t.Setenv("GATEWAY_UPSTREAM", upstream)
	t.Setenv("GATEWAY_ADMIN_TOKEN", token)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"serve -h prints the usage without the secrets", []string{"serve", "-h"}, 0},
		{"serve --help prints the usage without the secrets", []string{"serve", "--help"}, 0},
		{"an unknown flag's error prints the usage without the secrets", []string{"serve", "--no-such-flag"}, 2},
		{"a flag without its value prints the usage without the secrets", []string{"serve", "--listen"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runGateway(t, context.Background(), tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, tc.wantCode, stderr)
			}
			printed := stdout + stderr
			if !strings.Contains(printed, "GATEWAY_ADMIN_TOKEN") {
				t.Errorf("the usage does not name GATEWAY_ADMIN_TOKEN:\n%s", printed)
			}
			for _, secret := range []string{"UPSTREAMSECRET", token} {
				if strings.Contains(printed, secret) {
					t.Errorf("printed the secret %q:\n%s", secret, printed)
				}
			}
		})
	}
	t.Run("the environment's values apply when no flag is given", func(t *testing.T) {
		c, err := parseServe(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.upstream != upstream || c.adminToken != token {
			t.Errorf("upstream %q, admin token %q; want the environment's %q and %q", c.upstream, c.adminToken, upstream, token)
		}
	})
	t.Run("a flag wins over the environment", func(t *testing.T) {
		c, err := parseServe([]string{"--upstream", "http://localhost:9/v1", "--admin-token", "other"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.upstream != "http://localhost:9/v1" || c.adminToken != "other" {
			t.Errorf("upstream %q, admin token %q; want the flags' values", c.upstream, c.adminToken)
		}
	})
	t.Run("a flag set to empty wins over the environment", func(t *testing.T) {
		c, err := parseServe([]string{"--admin-token="}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.adminToken != "" {
			t.Errorf("admin token %q; want the flag's empty value (off)", c.adminToken)
		}
	})
	t.Run("the environment's drain timeout applies when no flag is given", func(t *testing.T) {
		t.Setenv("GATEWAY_DRAIN_TIMEOUT", "7s")
		c, err := parseServe(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.drainTimeout != 7*time.Second {
			t.Errorf("drain timeout %s, want the environment's 7s", c.drainTimeout)
		}
	})
}

// TestServesWarningAboutAnUpstreamWithoutAPathHidesItsCredentials: the
// warning goes to the gateway's log, which log collectors keep.
func TestServesWarningAboutAnUpstreamWithoutAPathHidesItsCredentials(t *testing.T) {
	for _, tc := range []struct{ name, upstream, want string }{
		{"a key given as the user name is hidden", "https://sk-live-hunter2@llm.internal", `"upstream":"https://xxxxx@llm.internal"`},
		{"a password is hidden with its user name", "https://user:hunter2@llm.internal", `"upstream":"https://xxxxx@llm.internal"`},
		{"a key in the query is hidden and its name kept", "https://llm.internal?api-key=hunter2", `"upstream":"https://llm.internal?api-key=xxxxx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // serve starts, then stops at once
			cfg := writeFile(t, "tools.yaml", "{}\n")
			_, stderr, code := runGateway(t, ctx, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", tc.upstream)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "the upstream URL has no path") || !strings.Contains(stderr, tc.want) {
				t.Errorf("no warning with %s:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("the log shows the secret:\n%s", stderr)
			}
		})
	}
}
