package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	fs.StringVar(&c.listen, "listen", os.Getenv("GATEWAY_LISTEN"), "address to listen on (env GATEWAY_LISTEN; default 127.0.0.1:8080)")
	fs.StringVar(&c.upstream, "upstream", os.Getenv("GATEWAY_UPSTREAM"), "upstream base URL ending in /v1 (env GATEWAY_UPSTREAM; default https://api.openai.com/v1)")
	fs.StringVar(&c.config, "config", os.Getenv("GATEWAY_CONFIG"), "policy file (env GATEWAY_CONFIG; default ./tools.yaml when present)")
	fs.StringVar(&c.logLevel, "log-level", envOr("GATEWAY_LOG_LEVEL", "info"), "debug, info, warn or error (env GATEWAY_LOG_LEVEL)")
	fs.StringVar(&c.decisionLog, "decision-log", os.Getenv("GATEWAY_DECISION_LOG"), "append one JSON record per chat request to FILE, \"-\" for stderr (env GATEWAY_DECISION_LOG; default off)")
	fs.StringVar(&c.adminToken, "admin-token", os.Getenv("GATEWAY_ADMIN_TOKEN"), "enables GET /debug/sessions/{id} and the Go profiles under /debug/pprof/ for requests with this X-Toolgate-Admin-Token (env GATEWAY_ADMIN_TOKEN; default off)")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
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
	c, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, c.logLevel)
	if err != nil {
		return err
	}
	live, err := policy.NewLive(c.config, logger)
	if err != nil {
		return err
	}
	metrics := proxy.NewMetrics()
	catalogs := selector.NewCache(256)
	onPolicyReload(live, metrics, catalogs) // before Watch starts reloading
	decisions, closeDecisions, err := openDecisionLog(c.decisionLog, stderr)
	if err != nil {
		return err
	}
	defer closeDecisions()
	snap := live.Current()
	logger.Info("policy loaded", "source", snap.Source())
	listen := firstNonEmpty(c.listen, snap.Gateway.Listen)
	up, err := parseUpstream(firstNonEmpty(c.upstream, snap.Gateway.Upstream))
	if err != nil {
		return err
	}
	transport := newTransport(snap.Gateway)
	embedder, err := newEmbedder(snap, up, transport, logger, metrics.Embeddings())
	if err != nil {
		return err
	}
	sessions, closeSessions, err := newSessions(ctx, snap.Sessions, logger)
	if err != nil {
		return err
	}
	defer closeSessions()
	gw := &proxy.Gateway{
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
	}
	go func() {
		if err := live.Watch(ctx); err != nil {
			logger.Warn("policy watch stopped; edits need SIGHUP or a restart", "err", err)
		}
	}()
	go reloadOnHangup(ctx, live, logger)
	return serveHTTP(ctx, listen, gw.Handler(), logger, stdout)
}

// onPolicyReload sets live's reload hooks: every attempt is counted, and a
// reload that publishes a new snapshot lets the compiled catalogs go. Their
// keys carry the old snapshot's generation, so no request asks for them
// again, yet each holds megabytes and its index's goroutine until evicted.
// The proxy's other caches keyed by generation (policy tables, tool_search
// definitions, token counts) hold kilobytes each and are left to their LRUs.
func onPolicyReload(live *policy.Live, metrics *proxy.Metrics, catalogs *selector.Cache) {
	live.OnReload = metrics.PolicyReloaded
	live.OnChange = func(*policy.Snapshot) { catalogs.Purge() }
}

// openDecisionLog returns the decision logger for path ("" none, "-"
// stderr, else a file opened for appending) and a func that closes it.
func openDecisionLog(path string, stderr io.Writer) (*slog.Logger, func(), error) {
	switch path {
	case "":
		return nil, func() {}, nil
	case "-":
		return slog.New(slog.NewJSONHandler(stderr, nil)), func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening decision log: %w", err)
	}
	return slog.New(slog.NewJSONHandler(f, nil)), func() { _ = f.Close() }, nil
}

// reloadOnHangup reloads the policy on SIGHUP until ctx ends.
func reloadOnHangup(ctx context.Context, live *policy.Live, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := live.Reload(); err == nil {
				logger.Info("policy reloaded on SIGHUP", "source", live.Current().Source())
			}
		}
	}
}

// newEmbedder returns the remote embedder when the policy asks for one
// (defaulting to the upstream's /embeddings with the upstream key), or nil
// for the offline word vectors. Settings are read at start-up. The
// embedder logs its endpoint's failures and recoveries on logger and
// reports its calls to obs (nil: none).
func newEmbedder(snap *policy.Snapshot, up *url.URL, rt http.RoundTripper, logger *slog.Logger, obs selector.EmbedObserver) (selector.Embedder, error) {
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
	emb, err := selector.NewOpenAIEmbedder(selector.OpenAIEmbedderOptions{
		BaseURL:  firstNonEmpty(e.URL, up.String()),
		Model:    e.Model,
		APIKey:   firstNonEmpty(e.Key, snap.Gateway.UpstreamKey),
		Client:   &http.Client{Transport: rt, Timeout: 30 * time.Second},
		CacheDir: cacheDir,
		Logger:   logger.With("component", "embeddings"),
		Observer: obs,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring embeddings: %w", err)
	}
	return emb, nil
}

// serveHTTP listens, serves until ctx ends, then drains in-flight requests.
func serveHTTP(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// A kept-alive client connection left idle is closed after this,
		// so idle clients cannot hold file descriptors for good (1,000
		// idle connections stayed open indefinitely without it). A body
		// that stops arriving is bounded by the gateway's BodyTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(stdout, "toolgate listening on http://%s\n", ln.Addr())
	logger.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: upstream %q must be an http(s) URL such as https://api.openai.com/v1", errUsage, s)
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
