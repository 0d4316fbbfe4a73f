package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestBenchReportsAnInterruption(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel) // Ctrl-C, mid-run
	t.Run("an interrupted bench prints what it measured, says so and exits 130", func(t *testing.T) {
		out, errOut, code := runGateway(t, ctx, "bench", "--sizes", "20", "--requests", "100000", "--runs", "1", "--sessions", "0", "--budget", "1m")
		if code != 130 || !strings.Contains(out, "interrupted: the table shows what was measured") || strings.Contains(out, "budget") ||
			!strings.Contains(errOut, "interrupted") {
			t.Errorf("exit %d, stderr %q; want 130 and the interruption reported:\n%s", code, errOut, out)
		}
	})
}
