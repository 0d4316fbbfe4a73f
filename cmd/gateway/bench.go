package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/bench"
	"github.com/toolgate/toolgate/internal/progress"
)

// runBench measures the latency, throughput and memory the gateway adds
// next to a bare reverse proxy, on loopback.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	sizes := fs.String("sizes", "50,200,1000", "catalog sizes, comma-separated")
	fs.IntVar(&o.Requests, "requests", 300, "sequential requests per path, size and mode, per run")
	fs.IntVar(&o.Runs, "runs", 3, "runs; the table shows the median of each run's percentiles")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "clients in the throughput and memory phases")
	fs.IntVar(&o.Throughput, "throughput", 400, "requests per path in the throughput phase")
	fs.IntVar(&o.Sessions, "sessions", 10000, "distinct sessions for the memory phase (0 skips it)")
	fs.DurationVar(&o.Budget, "budget", 2*time.Minute, "stop after this long and print what was measured (above 0)")
	fs.StringVar(&o.Mode, "mode", "", "the gateway's policy mode: "+strings.Join(bench.Modes(), ", ")+
		" (default: the built-in policy's, hybrid); search shows the gateway without ranking per request")
	fs.BoolVar(&o.Retries, "retries", false, "each session re-sends one user turn (a client retrying, or a harness replaying one request) instead of a new turn per request; the gateway then reuses the turn's preselection")
	fs.BoolVar(&o.DecodeBody, "decode", false, "the upstream decodes each request's JSON, as every real server must, instead of only reading its bytes; shows what forwarding ~3% of the body saves the upstream")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client, proxies and upstream share the process) to FILE")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: bench takes no arguments, only flags; got %q", errUsage, fs.Args())
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > bench.MaxTools {
			return fmt.Errorf("%w: --sizes: bad catalog size %q: want 1 to %d tools, the most the gateway accepts in one request", errUsage, s, bench.MaxTools)
		}
		o.Sizes = append(o.Sizes, n)
	}
	// bench.Options reads 0 as "the default"; on the command line a 0 or
	// a negative number is a mistake, and silently running the default
	// instead hid it.
	for _, c := range []struct {
		flag string
		n    int
	}{{"runs", o.Runs}, {"requests", o.Requests}, {"concurrency", o.Concurrency}, {"throughput", o.Throughput}} {
		if c.n <= 0 {
			return fmt.Errorf("%w: --%s %d: want at least 1", errUsage, c.flag, c.n)
		}
	}
	if o.Sessions < 0 {
		return fmt.Errorf("%w: --sessions %d: want 0 (skip the memory phase) or more", errUsage, o.Sessions)
	}
	if o.Budget <= 0 {
		return fmt.Errorf("%w: --budget %s: want a positive duration (a long one, such as 1h, for a long run)", errUsage, o.Budget)
	}
	if o.Mode != "" && !slices.Contains(bench.Modes(), o.Mode) {
		return fmt.Errorf("%w: --mode %q: want one of %s", errUsage, o.Mode, strings.Join(bench.Modes(), ", "))
	}
	if isTerminal(stderr) {
		o.Progress = progress.Bar(stderr, "benchmarking")
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := bench.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := res.Print(stdout); err != nil {
		return err
	}
	if res.Interrupted {
		return fmt.Errorf("bench: %w: what was measured is above", errInterrupted)
	}
	return nil
}

// startCPUProfile starts profiling into path and returns the func that
// stops and closes it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
