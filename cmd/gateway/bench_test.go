package main

import (
	"context"
	"slices"
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

func TestBenchRefusesBadFlags(t *testing.T) {
	// A run that would end at once, were the flag under test accepted.
	quick := []string{"bench", "--sizes", "20", "--requests", "1", "--runs", "1", "--throughput", "1", "--sessions", "0", "--budget", "200ms"}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"a zero budget is a usage error, not the default", []string{"--budget", "0"}, "--budget 0s: want a positive duration"},
		{"a negative budget is a usage error", []string{"--budget", "-1s"}, "--budget -1s"},
		{"zero runs are a usage error, not the default 3", []string{"--runs", "0"}, "--runs 0: want at least 1"},
		{"negative requests are a usage error", []string{"--requests", "-1"}, "--requests -1"},
		{"zero throughput requests are a usage error", []string{"--throughput", "0"}, "--throughput 0"},
		{"zero clients are a usage error", []string{"--concurrency", "0"}, "--concurrency 0"},
		{"negative sessions are a usage error", []string{"--sessions", "-5"}, "--sessions -5"},
		{"a size above the gateway's limit is a usage error naming the limit", []string{"--sizes", "5000"}, "want 1 to 4096 tools"},
		{"an unknown mode is a usage error naming the modes", []string{"--mode", "bogus"}, `--mode "bogus": want one of hybrid, search, preselect, passthrough`},
		{"an argument is a usage error, not ignored", []string{"200"}, "bench takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runGateway(t, context.Background(), slices.Concat(quick, tc.args)...)
			if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "toolgate-bench-") || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want a usage error (2) with %q", code, out, errOut, tc.want)
			}
		})
	}
}
