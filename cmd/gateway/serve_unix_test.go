//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheGatewayReloadsWhileItDrains: the README promises that SIGHUP
// reloads the policy "at any time: while the gateway starts or drains
// too". The SIGHUP handler and the policy watcher outlive SIGTERM:
// stopped there, a SIGHUP during the drain would reload nothing,
// logrotate's reopen of the decision log would not happen, and policy
// edits would not apply.
func TestTheGatewayReloadsWhileItDrains(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tools.yaml")
	writePolicy := func(t *testing.T, text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy(t, "deny: [a_*]\n")
	decisions := filepath.Join(dir, "decisions.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &addrWriter{addr: make(chan string, 1)}
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--decision-log", decisions, "--drain-delay", "4s"}, out, &stderr)
	}()
	select {
	case <-out.addr:
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not listen:\n%s", stderr.String())
	}
	cancel() // SIGTERM: the drain begins, /healthz fails for 4 s
	waitFor := func(t *testing.T, what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); strings.Count(stderr.String(), what) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("the gateway did not log %q in 3 s; it said:\n%s", what, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(t, `"msg":"shutting down"`, 1)

	t.Run("a SIGHUP during the drain reloads the policy and reopens the decision log", func(t *testing.T) {
		if err := os.Rename(decisions, decisions+".1"); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "policy reloaded on SIGHUP", 1)
		waitFor(t, "decision log reopened on SIGHUP", 1)
		if _, err := os.Stat(decisions); err != nil {
			t.Errorf("the decision log was not created again at its path: %v", err)
		}
	})
	t.Run("a policy edit during the drain is applied", func(t *testing.T) {
		writePolicy(t, "deny: [b_*]\n")
		waitFor(t, `"msg":"policy reloaded","file"`, 1)
	})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not end after its drain")
	}
}
