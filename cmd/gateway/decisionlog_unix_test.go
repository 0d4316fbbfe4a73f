//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
)

// TestTheDecisionLogOpensWithoutBlocking: a FIFO as the decision log hung
// start-up in open(2) until a reader came, before the gateway listened
// or heeded SIGTERM.
func TestTheDecisionLogOpensWithoutBlocking(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the path to open and, for a FIFO, starts its
		// reader, which returns what it read when the writer closes.
		setup   func(t *testing.T, dir string) (path string, read func() string)
		wantErr string
	}{
		{"a FIFO without a reader fails at once and says why", func(t *testing.T, dir string) (string, func() string) {
			return mkfifo(t, dir), nil
		}, "no reader"},
		{"a FIFO with a reader gets the records", func(t *testing.T, dir string) (string, func() string) {
			path := mkfifo(t, dir)
			// O_RDWR opens without waiting for a writer, and holds the
			// FIFO open for reading until the test closes it.
			r, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return path, func() string {
				line, _ := bufio.NewReader(r).ReadString('\n')
				return line
			}
		}, ""},
		{"a regular file gets the records", func(t *testing.T, dir string) (string, func() string) {
			path := filepath.Join(dir, "decisions.jsonl")
			return path, func() string {
				b, _ := os.ReadFile(path)
				return string(b)
			}
		}, ""},
		{"a device such as /dev/null opens", func(t *testing.T, dir string) (string, func() string) {
			return os.DevNull, nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, read := tc.setup(t, t.TempDir())
			type opened struct {
				dlog *decisionLog
				err  error
			}
			done := make(chan opened, 1)
			go func() {
				logger, dlog, err := openDecisionLog(path, io.Discard, nil, nil)
				if err == nil {
					logger.Info("decision", "n", 1)
				}
				done <- opened{dlog, err}
			}()
			var o opened
			select {
			case o = <-done:
			case <-time.After(2 * time.Second):
				// Unblock the open so the goroutine ends, then fail.
				if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					defer r.Close()
				}
				t.Fatalf("opening %s blocked for 2 s", path)
			}
			switch {
			case tc.wantErr != "" && (o.err == nil || !strings.Contains(o.err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", o.err, tc.wantErr)
			case tc.wantErr == "" && o.err != nil:
				t.Fatal(o.err)
			}
			// The record is written on the log's goroutine; Close
			// waits for it.
			if err := o.dlog.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if read != nil {
				if got := read(); !strings.Contains(got, `"msg":"decision"`) {
					t.Errorf("read %q, want the record", got)
				}
			}
		})
	}
}

func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}

// TestAStuckDecisionLogHoldsUpNothing: a decision log whose reader stops
// reading (a FIFO, filled) holds up no request, nor the SIGHUP handler
// (policy reload included), nor the exit after the drain. Written in the
// request handler under one mutex with no deadline, one blocked write
// would keep them all waiting on the lock for good.
func TestAStuckDecisionLogHoldsUpNothing(t *testing.T) {
	const records = 64 // of 4 KiB: four times what a pipe holds
	const bound = 200 * time.Millisecond
	pad := strings.Repeat("x", 4096)
	for _, tc := range []struct {
		name string
		// act runs once the records are logged, and must return within
		// a second (a second more than decisionFlushWait).
		act func(t *testing.T, path string, dlog *decisionLog)
	}{
		{"logging records returns while the FIFO's reader has stopped reading", nil},
		{"a SIGHUP reloads the policy while a write to the FIFO is stuck", func(t *testing.T, path string, dlog *decisionLog) {
			policyPath := filepath.Join(filepath.Dir(path), "tools.yaml")
			if err := os.WriteFile(policyPath, []byte("deny: [a_*]\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			live, err := policy.NewLive(policyPath, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			reloaded := make(chan struct{}, 1)
			live.OnReload = func(error) { reloaded <- struct{}{} }
			ctx, cancel := context.WithCancel(context.Background())
			hup := make(chan os.Signal, 1)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				reloadOnHangup(ctx, hup, live, dlog, slog.New(slog.DiscardHandler))
			}()
			hup <- nil
			<-reloaded
			cancel() // the reopen that follows waits no longer
			<-ended
		}},
		{"Reopen returns at its deadline while a write to the FIFO is stuck", func(t *testing.T, path string, dlog *decisionLog) {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := dlog.Reopen(ctx); err == nil {
				t.Error("Reopen returned no error, want one saying a write has not returned")
			}
		}},
		{"Close returns at its deadline while a write to the FIFO is stuck", func(t *testing.T, path string, dlog *decisionLog) {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := dlog.Close(ctx); err == nil || !strings.Contains(err.Error(), "gave up") {
				t.Errorf("Close = %v, want an error saying it gave up", err)
			}
		}},
		{"closing at shutdown gives up after decisionFlushWait and says so, though serve's context has ended", func(t *testing.T, path string, dlog *decisionLog) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // SIGTERM
			var said syncBuffer
			start := time.Now()
			closeDecisionLog(ctx, dlog, slog.New(slog.NewJSONHandler(&said, nil)))
			if took := time.Since(start); took < decisionFlushWait {
				t.Errorf("gave up after %v, want %v: the queued records get their time", took, decisionFlushWait)
			}
			if !strings.Contains(said.String(), "gave up flushing the decision log") {
				t.Errorf("said %q, want a warning that records were left", said.String())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			path := mkfifo(t, t.TempDir())
			// A reader that never reads: O_RDWR opens without a writer.
			r, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			metrics := proxy.NewMetrics()
			logger, dlog, err := openDecisionLog(path, io.Discard, metrics, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			returnsWithin(t, time.Second, "logging records", func() {
				for i := range records {
					logger.Info("decision", "n", i, "pad", pad)
				}
			})
			if tc.act != nil {
				returnsWithin(t, decisionFlushWait+time.Second, tc.name, func() { tc.act(t, path, dlog) })
			}
			returnsWithin(t, time.Second, "closing the decision log", func() {
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				defer cancel()
				_ = dlog.Close(ctx) // it gives up on the stuck write
			})
			// Every record reached the FIFO whole or was counted.
			if err := r.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r)
			whole := strings.Count(string(b), "\n")
			lost := lostRecords(t, metrics)
			if whole+lost != records {
				t.Errorf("%d records whole in the FIFO and %d counted as lost, want %d together", whole, lost, records)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// returnsWithin fails t when f takes longer than d: f waits on the
// decision log's stuck write.
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s took longer than %v: it waits on the decision log's stuck write", what, d)
	}
}

// lostRecords sums toolgate_decision_log_errors_total over its reasons.
func lostRecords(t *testing.T, m *proxy.Metrics) int {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "toolgate_decision_log_errors_total" {
			for _, s := range mf.GetMetric() {
				n += s.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}
