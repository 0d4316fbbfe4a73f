package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// runHealthcheck asks a running gateway's /healthz and exits 0 when it
// answers 200: the container image has no shell or curl for a
// HEALTHCHECK to run, only this binary.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", envOr("GATEWAY_LISTEN", "127.0.0.1:8080"), "the gateway's listen address (env GATEWAY_LISTEN); a wildcard host is asked on loopback")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer; above 0")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *timeout <= 0 {
		// A deadline already past fails every check: a healthy gateway
		// would be reported unhealthy.
		return fmt.Errorf("%w: --timeout %s must be a duration above 0, such as 3s", errUsage, *timeout)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	u, err := healthURL(*listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %d %s", u, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "%s: %s", u, body)
	return nil
}

// healthURL is the /healthz URL of a gateway listening on addr.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: listen address %q: %w", errUsage, addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
