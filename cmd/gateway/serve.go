package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/embeddings"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
)

// serveConfig is what serve reads from flags and the environment; flags win
// over env, env over tools.yaml, tools.yaml over built-in defaults.
type serveConfig struct {
	listen, upstream, config string
	logLevel                 string
	decisionLog              string
	adminToken               string
	drainDelay, drainTimeout time.Duration
	maxInflight              int64  // bytes; below 0: no bound
	maxInflightFrom          string // where maxInflight came from, for the log
	maxCompile               int64  // bytes of tool text compiling at once; below 0: no bound
	maxCompiles              int    // compiles running at once; below 0: no bound
	catalogCache             int64  // bytes of compiled catalogs held; below 0: no bound
	catalogCacheFrom         string // where catalogCache came from, for the log
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	fs.StringVar(&c.listen, "listen", "", "address to listen on (env GATEWAY_LISTEN; default 127.0.0.1:8080)")
	fs.StringVar(&c.upstream, "upstream", "", "upstream base URL ending in /v1 (env GATEWAY_UPSTREAM; default https://api.openai.com/v1)")
	fs.StringVar(&c.config, "config", "", "policy file (env GATEWAY_CONFIG; default ./tools.yaml when present)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (env GATEWAY_LOG_LEVEL)")
	fs.StringVar(&c.decisionLog, "decision-log", "", "append one JSON record per chat request to FILE, \"-\" for stderr; SIGHUP reopens FILE, for logrotate (env GATEWAY_DECISION_LOG; default off)")
	fs.StringVar(&c.adminToken, "admin-token", "", "enables GET /debug/sessions/{id} and the Go profiles under /debug/pprof/ for requests with this X-Toolgate-Admin-Token (env GATEWAY_ADMIN_TOKEN; default off)")
	var drainDelay, drainTimeout string
	fs.StringVar(&drainDelay, "drain-delay", "0s", "on SIGTERM, how long /healthz answers 503 while requests are still served, before the listener closes (env GATEWAY_DRAIN_DELAY; set it to what a load balancer needs to stop sending, e.g. 5s)")
	fs.StringVar(&drainTimeout, "drain-timeout", "25s", "then how long requests in flight may finish; those left end with a gateway_shutting_down error (env GATEWAY_DRAIN_TIMEOUT, 7s in the container image; keep delay + timeout + 2s under the orchestrator's kill grace: 30s in Kubernetes, 10s for docker stop)")
	maxInflight := fs.String("max-inflight-mb", "", "megabytes of request bodies the gateway may hold at once, all requests together; a request past it gets a 503 gateway_overloaded with Retry-After, which the SDKs retry; 0 for no bound (env GATEWAY_MAX_INFLIGHT_MB; default 1024, or a quarter of the container's memory limit when lower)")
	maxCompile := fs.String("max-compile-mb", strconv.Itoa(selector.DefaultCompileBytes>>20), "megabytes of tool text the gateway may compile into catalogs at once, all requests together (a compile peaks at 100 to 200 times its text in memory); a request whose new catalog finds no room within 5s gets a 503 gateway_overloaded with Retry-After; a catalog larger than the bound compiles alone; 0 for no bound (env GATEWAY_MAX_COMPILE_MB)")
	maxCompiles := fs.String("max-compiles", strconv.Itoa(selector.DefaultCompiles()), "catalog compiles the gateway may run at once, all requests together (each a processor's work for milliseconds to a second, which requests whose catalog is compiled must not queue behind); a request whose new catalog finds no slot within 5s gets a 503 gateway_overloaded with Retry-After; 0 for no bound (env GATEWAY_MAX_COMPILES; default one less than GOMAXPROCS, at least 1)")
	catalogCache := fs.String("catalog-cache-mb", "", "megabytes of compiled catalogs the gateway keeps (their estimated heap, 0.5 to 15 MB for 200 tools by their words, growing a few MB as they rank requests): past it, the catalogs least recently used go first, and a tools array compiles again when it comes back; a catalog larger than the bound alone is compiled for each request and not kept; 0 for no bound (env GATEWAY_CATALOG_CACHE_MB; default 512, or a quarter of the container's memory limit when lower)")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	fromEnv(fs, [][2]string{
		{"listen", "GATEWAY_LISTEN"}, {"upstream", "GATEWAY_UPSTREAM"}, {"config", "GATEWAY_CONFIG"},
		{"log-level", "GATEWAY_LOG_LEVEL"}, {"decision-log", "GATEWAY_DECISION_LOG"}, {"admin-token", "GATEWAY_ADMIN_TOKEN"},
		{"drain-delay", "GATEWAY_DRAIN_DELAY"}, {"drain-timeout", "GATEWAY_DRAIN_TIMEOUT"},
		{"max-inflight-mb", "GATEWAY_MAX_INFLIGHT_MB"}, {"max-compile-mb", "GATEWAY_MAX_COMPILE_MB"},
		{"max-compiles", "GATEWAY_MAX_COMPILES"}, {"catalog-cache-mb", "GATEWAY_CATALOG_CACHE_MB"},
	})
	var err error
	if c.maxInflight, c.maxInflightFrom, err = inflightLimit(*maxInflight, cgroupMemoryFiles); err != nil {
		return c, err
	}
	if c.maxCompile, err = compileLimit(*maxCompile); err != nil {
		return c, err
	}
	if c.maxCompiles, err = compilesLimit(*maxCompiles); err != nil {
		return c, err
	}
	if c.catalogCache, c.catalogCacheFrom, err = catalogCacheLimit(*catalogCache, cgroupMemoryFiles); err != nil {
		return c, err
	}
	for _, d := range []struct {
		name, text string
		to         *time.Duration
	}{{"drain-delay", drainDelay, &c.drainDelay}, {"drain-timeout", drainTimeout, &c.drainTimeout}} {
		v, err := time.ParseDuration(d.text)
		if err != nil || v < 0 {
			return c, fmt.Errorf("%w: --%s %q must be a duration of 0 or more, such as 25s", errUsage, d.name, d.text)
		}
		*d.to = v
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if c.config == "" {
		if _, err := os.Stat("tools.yaml"); err == nil {
			c.config = "tools.yaml"
		}
	}
	return c, nil
}

// fromEnv sets each flag of fs the command line did not set to its
// environment variable's value, when that is not empty: flags win over the
// environment. The variables are read after parsing and never become the
// flags' defaults, because the flag package prints defaults in the usage
// text (-h, and every parse error) and GATEWAY_UPSTREAM (a URL with
// credentials) and GATEWAY_ADMIN_TOKEN hold secrets. flagEnv pairs a flag's
// name with its variable's; every flag named is a string flag, whose Set
// cannot fail.
func fromEnv(fs *flag.FlagSet, flagEnv [][2]string) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, fe := range flagEnv {
		if v := os.Getenv(fe[1]); v != "" && !set[fe[0]] {
			_ = fs.Set(fe[0], v)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: log level %q: %w", errUsage, level, err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// SIGHUP is taken before anything else and kept until serve returns:
	// its default action ends the process, and a config reloader may
	// send it while the gateway starts or drains.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	c, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, c.logLevel)
	if err != nil {
		return err
	}
	// Process-wide loggers go through serve's too, with its level and in
	// JSON: go-redis's, and the standard library's log package (net/http's
	// transport logs "Unsolicited response received on idle HTTP channel"
	// there) by way of slog's default.
	redis.SetLogger(redisLogger{logger})
	slog.SetDefault(logger)
	logger.Info("starting", "version", versionString(), "max_inflight_mb", max(c.maxInflight>>20, 0), "max_inflight_from", c.maxInflightFrom,
		"max_compile_mb", max(c.maxCompile>>20, 0), "max_compiles", max(c.maxCompiles, 0), "catalog_cache_mb", max(c.catalogCache>>20, 0), "catalog_cache_from", c.catalogCacheFrom,
		"go_memory_limit_mb", goMemoryLimitMB())
	live, err := policy.NewLive(c.config, logger)
	if err != nil {
		return err
	}
	metrics := proxy.NewMetrics()
	catalogs := selector.NewCacheWith(selector.CacheOptions{Catalogs: 256, Bytes: c.catalogCache, CompileBytes: c.maxCompile, Compiles: c.maxCompiles})
	onPolicyReload(live, metrics, catalogs) // before Watch starts reloading
	decisions, dlog, err := openDecisionLog(c.decisionLog, stderr, metrics, logger)
	if err != nil {
		return err
	}
	defer closeDecisionLog(ctx, dlog, logger)
	snap := live.Current()
	logger.Info("policy loaded", "source", snap.Source())
	listen := firstNonEmpty(c.listen, snap.Gateway.Listen)
	for _, o := range []struct{ key, file, set, by string }{
		{"gateway.listen", snap.Gateway.Listen, c.listen, "--listen or GATEWAY_LISTEN"},
		{"gateway.upstream", snap.Gateway.Upstream, c.upstream, "--upstream or GATEWAY_UPSTREAM"},
	} {
		if snap.Writes(o.key) && o.set != "" && o.file != o.set {
			// The documented order, but a mounted policy's value losing
			// to an image's environment variable is easy to miss. Only
			// a value the file set: the built-in default's losing is
			// no news (the image sets GATEWAY_LISTEN on every start).
			// No values: an upstream URL may carry credentials.
			logger.Info("the policy's "+o.key+" is overridden", "by", o.by)
		}
	}
	if err := checkListen(listen); err != nil {
		return err
	}
	up, err := parseUpstream(firstNonEmpty(c.upstream, snap.Gateway.Upstream))
	if err != nil {
		return err
	}
	if up.Path == "" {
		// Not refused: a server may serve the API at its root. Most serve
		// it under /v1, and without it every call is a 404 from them.
		logger.Warn("the upstream URL has no path; OpenAI-compatible servers usually serve under /v1", "upstream", policy.RedactURL(up.String()))
	}
	transport := newTransport(snap.Gateway)
	embedder, err := newEmbedder(live.Current, up, transport, logger, metrics.Embeddings())
	if err != nil {
		return err
	}
	sessions, closeSessions, err := newSessions(ctx, snap.Sessions, logger)
	if err != nil {
		return err
	}
	defer closeSessions()
	srv := &proxy.Server{
		Addr: listen, Logger: logger, DrainDelay: c.drainDelay, DrainTimeout: c.drainTimeout,
		OnListen: func(addr string) { fmt.Fprintf(stdout, "toolgate listening on http://%s\n", addr) },
	}
	gw := &proxy.Gateway{
		Ready:       srv.Ready,
		Upstream:    up,
		Policy:      live.Current,
		Sessions:    sessions,
		Catalogs:    catalogs,
		Learned:     proxy.NewLearned(4096),
		Embedder:    embedder,
		Transport:   transport,
		Logger:      logger,
		Metrics:     metrics,
		DecisionLog: decisions,
		AdminToken:  c.adminToken,

		MaxInflightBytes: c.maxInflight,
	}
	// The policy watcher and the SIGHUP handler run until serve returns,
	// not until ctx ends: SIGTERM starts the drain, and a policy edit, a
	// SIGHUP's reload and its decision log reopen (logrotate's) still
	// apply while requests finish. Deferred after closeDecisionLog, so
	// that they stop, and are waited for, before the log closes.
	untilExit, stopReloads := context.WithCancel(context.WithoutCancel(ctx))
	var reloaders sync.WaitGroup
	defer reloaders.Wait()
	defer stopReloads()
	reloaders.Go(func() {
		if err := live.Watch(untilExit); err != nil {
			logger.Warn("policy watch stopped; edits need SIGHUP or a restart", "err", err)
		}
	})
	reloaders.Go(func() { reloadOnHangup(untilExit, hup, live, dlog, logger) })
	// Loading the embedded tables is CPU work of a fixed ~0.1 s, not I/O
	// a shutdown could be waiting on: it runs whole even when ctx ends
	// during it. It only saves the first request the wait; if it fails,
	// that request loads them, and reports what fails then.
	warmed := time.Now()
	if err := gw.Warm(context.WithoutCancel(ctx)); err != nil {
		logger.Warn("warming up", "err", err)
	} else {
		logger.Info("warmed", "took_ms", time.Since(warmed).Milliseconds())
	}
	srv.Handler = gw.Handler()
	served := make(chan struct{})
	defer close(served)
	return srv.Run(ctx, secondSignal(ctx, served))
}

// secondSignal fires on an interrupt or SIGTERM that arrives after ctx
// ended (the first one) and before done closes: a second Ctrl-C ends the
// drain at once.
func secondSignal(ctx context.Context, done <-chan struct{}) <-chan struct{} {
	force := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		select {
		case <-sig:
			close(force)
		case <-done:
		}
	}()
	return force
}

// onPolicyReload sets live's reload hooks: every attempt is counted, and
// the compiled catalogs learn each new snapshot's catalog keys
// (selector.Cache.Retain decides what to let go). The proxy's caches
// keyed by generation (policy tables) hold kilobytes each and are left to
// their LRU.
func onPolicyReload(live *policy.Live, metrics *proxy.Metrics, catalogs *selector.Cache) {
	live.OnReload = metrics.PolicyReloaded
	catalogs.Retain(live.Current().CatalogKeys()...)
	live.OnChange = func(snap *policy.Snapshot) { catalogs.Retain(snap.CatalogKeys()...) }
}

// reloadOnHangup reloads the policy and reopens the decision log on each
// SIGHUP from hup until ctx ends (serve's ends when serve returns, after
// the drain); later ones are ignored (the caller keeps hup registered). The reopen is what logrotate's postrotate kill -HUP
// asks for. It comes second and waits at most decisionReopenWait: a
// decision log that takes no writes (a FIFO whose reader stopped, a hung
// disk) must not hold up the policy.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, live *policy.Live, dlog *decisionLog, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := live.Reload(); err == nil {
				logger.Info("policy reloaded on SIGHUP", "source", live.Current().Source())
			}
			if dlog == nil || dlog.path == "" {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, decisionReopenWait)
			err := dlog.Reopen(rctx)
			cancel()
			if err != nil {
				logger.Warn("reopening the decision log on SIGHUP; still writing to the previous file", "err", err)
			} else {
				logger.Info("decision log reopened on SIGHUP", "path", dlog.path)
			}
		}
	}
}

// newEmbedder returns the remote embedder when the policy asks for one
// (defaulting to the upstream's /embeddings with the upstream key), or nil
// for the offline word vectors. Its settings are read from current() once,
// at start-up, except the upstream key it borrows when the policy gives it
// no key of its own: that is read at each call, so that a key a reload
// rotates reaches the embeddings calls when it reaches the upstream
// requests, and a revoked key never keeps ranking on the word vectors
// until a restart. The embedder logs its endpoint's failures and
// recoveries on logger and reports its calls to obs (nil: none).
func newEmbedder(current func() *policy.Snapshot, up *url.URL, rt http.RoundTripper, logger *slog.Logger, obs selector.EmbedObserver) (selector.Embedder, error) {
	snap := current()
	e := snap.Search.Embeddings
	if e.Provider != "openai" {
		return nil, nil
	}
	cacheDir := e.CacheDir
	if cacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(d, "toolgate", "embeddings")
		}
	}
	var upstreamKey func() string // nil: the embeddings key, fixed at start-up
	if e.Key == "" {
		upstreamKey = func() string { return current().Gateway.UpstreamKey }
	}
	emb, err := embeddings.NewOpenAI(embeddings.OpenAIOptions{
		BaseURL:  firstNonEmpty(e.URL, up.String()),
		Model:    e.Model,
		APIKey:   e.Key,
		Client:   &http.Client{Transport: rt, Timeout: 30 * time.Second},
		CacheDir: cacheDir,
		Logger:   logger.With("component", "embeddings"),
		Observer: obs,

		APIKeyFunc:    upstreamKey,
		QueryTimeout:  e.QueryTimeout,
		CacheMaxBytes: int64(e.CacheMaxMB) << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring embeddings: %w", err)
	}
	return emb, nil
}

// checkListen refuses a listen address net.Listen would, as a usage
// error: it comes from a flag, the environment or the policy.
func checkListen(addr string) error {
	if err := policy.CheckListen(addr); err != nil {
		return fmt.Errorf("%w: listen address %q: %w (want host:port, such as 127.0.0.1:8080)", errUsage, addr, err)
	}
	return nil
}

// parseUpstream reads the upstream URL; its error prints it through
// policy.RedactURL, never as written, as the process's output ends up in
// logs.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: the upstream is not a URL such as https://api.openai.com/v1", errUsage)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("%w: upstream %q must be an http(s) URL such as https://api.openai.com/v1", errUsage, policy.RedactURL(u.String()))
	}
	return u, nil
}

// newTransport builds the upstream transport with the policy's connect and
// first-byte timeouts.
func newTransport(g policy.Gateway) *http.Transport {
	return proxy.NewTransport(g.ConnectTimeout, g.HeaderTimeout)
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// goMemoryLimitMB is the runtime's soft memory limit in megabytes (main
// sets it in a container; GOMEMLIMIT does anywhere), or 0 for none.
func goMemoryLimitMB() int64 {
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit >> 20
	}
	return 0
}
