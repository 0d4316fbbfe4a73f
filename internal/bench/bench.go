// Package bench measures the latency, throughput and memory the gateway
// adds, next to a bare httputil.ReverseProxy and a direct call, against a
// fast in-process upstream on loopback. It backs `gateway bench`. Every
// server it starts listens on 127.0.0.1 and stops when Run returns; runs
// are bounded by request counts and a time budget. It must never be wired
// into serve.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// Options bounds a run. Zero fields take the defaults in brackets.
type Options struct {
	Sizes       []int         // catalog sizes [50, 200, 1000]
	Requests    int           // sequential requests per path, size and mode, per run [300]
	Runs        int           // runs; percentiles are the median over runs [3]
	Concurrency int           // clients in the throughput phase [8]
	Throughput  int           // requests per path in the throughput phase [400]
	Sessions    int           // distinct sessions for the memory phase; 0 skips it [10000]
	Budget      time.Duration // stop starting new work after this long [2m]
	// Mode is the gateway's policy mode (hybrid, search, preselect,
	// passthrough) ["": the default policy's]. search shows what the
	// gateway adds without ranking on every request.
	Mode string
	// DecodeBody makes the upstream decode each request's JSON (into
	// generic values, as a Go server would) instead of only reading its
	// bytes. Every real upstream parses what it receives, so this shows
	// what the gateway saves the upstream by forwarding ~3% of the body;
	// false, the default, is the strictest comparison.
	DecodeBody bool
	// Retries makes each session re-send one user turn (a client retrying,
	// or a harness replaying one request) instead of a new turn each time.
	// The gateway then reuses the turn's preselection; the default, a new
	// turn per request, is the strict comparison.
	Retries bool
	// Progress, if set, is called as work completes.
	Progress func(done, total int)
}

func (o *Options) defaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{50, 200, 1000}
	}
	if o.Requests <= 0 {
		o.Requests = 300
	}
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Throughput <= 0 {
		o.Throughput = 400
	}
	if o.Budget <= 0 {
		o.Budget = 2 * time.Minute
	}
}

// MaxTools is the largest catalog the gateway accepts in one request
// (proxy/caps.go's maxCatalogTools, unexported there;
// TestMaxToolsIsTheGatewaysLimit keeps the two equal). A larger size is
// refused up front: the gateway would answer it with "status 400" at
// warm-up, seconds in.
const MaxTools = 4096

// Modes returns the policy modes a run can put the gateway in, a new
// slice each call, so no caller can change what another one sees.
func Modes() []string {
	return []string{string(policy.ModeHybrid), string(policy.ModeSearch), string(policy.ModePreselect), string(policy.ModePassthrough)}
}

// Paths a request can take to the upstream.
const (
	Direct  = "direct"
	Bare    = "bare proxy"
	Gateway = "gateway"
)

// pathOrder returns the paths in table order.
func pathOrder() []string { return []string{Direct, Bare, Gateway} }

// Row is one path for one catalog size and mode.
type Row struct {
	Tools     int
	BodyBytes int
	Stream    bool
	Path      string
	// Runs is how many latency runs completed; 0 means the latency of
	// this path was not measured (the run was cut short first), and the
	// row is not printed.
	Runs int
	P50  time.Duration // median over runs of each run's percentile
	P95  time.Duration
	P99  time.Duration
	// RunP50 and RunP99 are each run's percentiles, in run order: the
	// ratios' spread within one invocation.
	RunP50, RunP99 []time.Duration
	Throughput     float64 // requests per second with Options.Concurrency clients; 0: not measured
	Errors         int
}

// measured reports whether the row has a latency to show.
func (r Row) measured() bool { return r.Runs > 0 }

// Memory is the process's memory once the gateway holds many sessions. The
// client, upstream and gateway share the process, so RSS is an upper
// bound of the gateway's own.
type Memory struct {
	Sessions  int   // sessions the gateway held, the earlier phases' included
	Earlier   int   // sessions the earlier phases had left when it began
	RSS       int64 // bytes; 0 where /proc is not available
	HeapInuse uint64
	Took      time.Duration
}

// Result is a whole run.
type Result struct {
	Options Options
	Rows    []Row
	Memory  *Memory
	// Partial says the run was cut short: by the time budget, or, when
	// Interrupted, by the caller's context (Ctrl-C).
	Partial     bool
	Interrupted bool
}

// Run measures every size and mode.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	for _, n := range o.Sizes {
		if n <= 0 || n > MaxTools {
			return nil, fmt.Errorf("catalog size %d: want 1 to %d tools, the most the gateway accepts in one request", n, MaxTools)
		}
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Budget)
	defer cancel()
	env, err := start(o)
	if err != nil {
		return nil, err
	}
	defer env.close()
	res := &Result{Options: o}
	// cut marks the result as cut short, and by what: the budget's
	// deadline and a Ctrl-C both end ctx.
	cut := func() (*Result, error) {
		res.Partial, res.Interrupted = true, caller.Err() != nil
		return res, nil
	}
	total := len(o.Sizes)*2*(o.Runs*o.Requests+o.Throughput) + o.Sessions
	var done atomic.Int64
	tick := func(n int) {
		if o.Progress != nil {
			o.Progress(int(done.Add(int64(n))), total)
		}
	}
	for _, size := range o.Sizes {
		tools, err := catalog(size)
		if err != nil {
			return nil, err
		}
		for _, stream := range []bool{false, true} {
			rows, err := env.measure(ctx, o, tools, stream, tick)
			res.Rows = append(res.Rows, rows...)
			if err != nil {
				if ctx.Err() != nil {
					return cut()
				}
				return res, err
			}
		}
	}
	if o.Sessions > 0 {
		tools, err := catalog(200)
		if err != nil {
			return nil, err
		}
		m, err := env.sessions(ctx, o, tools, tick)
		if err != nil {
			if ctx.Err() != nil {
				return cut()
			}
			return res, err
		}
		res.Memory = m
	}
	return res, nil
}

// env is the upstream, the bare proxy and the gateway, each on its own
// loopback listener, and one client for all three.
type env struct {
	up, bare, gw *httptest.Server
	handler      http.Handler // the gateway's, for in-process benchmarks
	store        *session.Memory
	client       *http.Client
	base         map[string]string
}

func newClientTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
	}
}

func start(o Options) (*env, error) {
	e := &env{}
	e.up = httptest.NewServer(newFastUpstream(o.DecodeBody))
	upURL, err := url.Parse(e.up.URL + "/v1")
	if err != nil {
		e.up.Close()
		return nil, fmt.Errorf("parsing upstream URL: %w", err)
	}
	e.store = session.NewMemory(max(2*o.Sessions, 1000), time.Hour)
	snap, err := benchPolicy(o.Mode)
	if err != nil {
		e.up.Close()
		return nil, err
	}
	// The bare proxy and the gateway call the upstream through the same
	// transport as serve's, so the comparison is of what each does with
	// a request, not of their connections' settings.
	upstream := func() http.RoundTripper {
		return proxy.NewTransport(snap.Gateway.ConnectTimeout, snap.Gateway.HeaderTimeout)
	}
	bare := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upURL); pr.Out.URL.Path = pr.In.URL.Path },
		Transport:     upstream(),
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	e.bare = httptest.NewServer(bare)
	g := &proxy.Gateway{
		Upstream:  upURL,
		Policy:    func() *policy.Snapshot { return snap },
		Sessions:  e.store,
		Catalogs:  selector.NewCache(16),
		Learned:   proxy.NewLearned(1024),
		Transport: upstream(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:   proxy.NewMetrics(), // on, as in serve
	}
	e.handler = g.Handler()
	e.gw = httptest.NewServer(e.handler)
	e.client = &http.Client{Transport: newClientTransport(), Timeout: 30 * time.Second}
	e.base = map[string]string{Direct: e.up.URL, Bare: e.bare.URL, Gateway: e.gw.URL}
	return e, nil
}

// benchPolicy is the default policy, in mode when it is set.
func benchPolicy(mode string) (*policy.Snapshot, error) {
	if mode == "" {
		return policy.Default(), nil
	}
	// Checked before the policy file is written: an unknown mode is the
	// caller's mistake, not a problem in that temporary file.
	if !slices.Contains(Modes(), mode) {
		return nil, fmt.Errorf("bench mode %q: want one of %s", mode, strings.Join(Modes(), ", "))
	}
	dir, err := os.MkdirTemp("", "toolgate-bench-")
	if err != nil {
		return nil, fmt.Errorf("writing the bench policy: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte("gateway:\n  mode: "+strconv.Quote(mode)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing the bench policy: %w", err)
	}
	snap, err := policy.Load(path)
	if err != nil {
		return nil, fmt.Errorf("bench mode %q: %w", mode, err)
	}
	return snap, nil
}

func (e *env) close() {
	e.gw.Close()
	e.bare.Close()
	e.up.Close()
	e.client.CloseIdleConnections()
}

// do sends one request on path and reads the whole response.
func (e *env) do(ctx context.Context, path string, body []byte, stream bool, sessionID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base[path]+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer bench-key-not-a-secret")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if sessionID != "" {
		req.Header.Set("X-Session-ID", sessionID)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return nil
}

// benchSessions is how many sessions the latency and throughput phases
// spread their requests over.
const benchSessions = 64

// pick returns request n's body and session: the user messages rotate
// through every session, or, with Retries, each session repeats its own.
func (o Options) pick(bodies requests, n int64) ([]byte, string) {
	s := n % benchSessions
	if o.Retries {
		return bodies.at(s), strconv.FormatInt(s, 10)
	}
	return bodies.at(n), strconv.FormatInt(s, 10)
}

// warmup returns how many requests each path gets before timing:
// connections, the catalog's compile, tokenizer tables, and every user
// message twice, as a catalog's word memo keeps a word's rows from its
// second sighting on (selector/wordmemo.go). With 20 requests, whichever
// mode ran first was measured before the gateway had settled: streamed
// turns added 1.51x and 1.73x what the bare proxy adds at p50 when they
// ran first, 1.29x and 1.27x when they ran second; with this warmup,
// 1.25-1.28x first. What settles besides the memo (the heap's size, the
// sessions' state) was not told apart.
func warmup() int { return 2 * len(userMessages) }

// measure runs the latency phase (sequential, paths interleaved in a
// rotating order so drift hits all three alike) Options.Runs times, then
// the throughput phase per path.
func (e *env) measure(ctx context.Context, o Options, tools []json.RawMessage, stream bool, tick func(int)) ([]Row, error) {
	bodies, err := requestBodies(tools, stream)
	if err != nil {
		return nil, err
	}
	paths := pathOrder()
	rows := make([]Row, len(paths))
	for i, p := range paths {
		rows[i] = Row{Tools: len(tools), BodyBytes: len(bodies[0]), Stream: stream, Path: p}
		for n := range warmup() {
			if err := e.do(ctx, p, bodies.at(int64(n)), stream, "warm"); err != nil {
				return nil, fmt.Errorf("warming up %s: %w", p, err)
			}
		}
	}
	perRun := make([][3][]time.Duration, len(paths)) // path -> run percentiles
	// finish sets the rows' latencies from the runs completed, so a run
	// cut short keeps what its earlier runs measured; a path with no
	// complete run stays unmeasured (it printed as 0.000ms).
	finish := func() {
		for i := range paths {
			rows[i].Runs = len(perRun[i][0])
			if rows[i].Runs == 0 {
				continue
			}
			rows[i].P50, rows[i].P95, rows[i].P99 = median(perRun[i][0]), median(perRun[i][1]), median(perRun[i][2])
			rows[i].RunP50, rows[i].RunP99 = perRun[i][0], perRun[i][2]
		}
	}
	for run := 0; run < o.Runs; run++ {
		lat := make([][]time.Duration, len(paths))
		for n := 0; n < o.Requests; n++ {
			for k := range paths {
				i := (n + k) % len(paths)
				t0 := time.Now()
				body, session := o.pick(bodies, int64(n))
				err := e.do(ctx, paths[i], body, stream, "s"+session)
				d := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil {
						finish()
						return rows, ctx.Err()
					}
					rows[i].Errors++
					continue
				}
				lat[i] = append(lat[i], d)
			}
			tick(1)
		}
		for i := range paths {
			p50, p95, p99 := percentiles(lat[i])
			perRun[i][0] = append(perRun[i][0], p50)
			perRun[i][1] = append(perRun[i][1], p95)
			perRun[i][2] = append(perRun[i][2], p99)
		}
	}
	finish()
	for i := range paths {
		rps, errs, err := e.throughput(ctx, o, paths[i], bodies, stream)
		rows[i].Throughput, rows[i].Errors = rps, rows[i].Errors+errs
		if err != nil {
			return rows, err
		}
		tick(o.Throughput / len(paths))
	}
	return rows, nil
}

// throughput sends Options.Throughput requests from Options.Concurrency
// clients and returns requests per second.
func (e *env) throughput(ctx context.Context, o Options, path string, bodies requests, stream bool) (float64, int, error) {
	t0 := time.Now()
	errs := fanOut(ctx, o.Concurrency, o.Throughput, func(n int64) error {
		body, session := o.pick(bodies, n)
		return e.do(ctx, path, body, stream, "t"+session)
	})
	if ctx.Err() != nil {
		// Requests the cut failed are not the path's errors, and the
		// phase was not measured.
		return 0, 0, ctx.Err()
	}
	return float64(o.Throughput) / time.Since(t0).Seconds(), errs, nil
}

// fanOut calls fn for n = 1..total from workers goroutines and returns how
// many calls failed; it stops early when ctx ends.
func fanOut(ctx context.Context, workers, total int, fn func(n int64) error) int {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < workers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(total) || ctx.Err() != nil {
					return
				}
				if err := fn(n); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// sessions sends one request for each of Options.Sessions distinct
// sessions through the gateway, then measures memory.
func (e *env) sessions(ctx context.Context, o Options, tools []json.RawMessage, tick func(int)) (*Memory, error) {
	bodies, err := requestBodies(tools, false)
	if err != nil {
		return nil, err
	}
	earlier := e.store.Len()
	t0 := time.Now()
	failed := fanOut(ctx, o.Concurrency, o.Sessions, func(n int64) error {
		if n%100 == 0 {
			defer tick(100)
		}
		return e.do(ctx, Gateway, bodies.at(n), false, "mem-"+strconv.FormatInt(n, 10))
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if failed > 0 {
		return nil, fmt.Errorf("%d of %d session requests failed", failed, o.Sessions)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &Memory{Sessions: e.store.Len(), Earlier: earlier, RSS: rss(), HeapInuse: ms.HeapInuse, Took: time.Since(t0)}, nil
}
