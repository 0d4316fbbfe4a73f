package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// CutGrace is how long the requests a Server cuts when its drain time is
// up get to write their error (a 503, or an error event ending a stream)
// before their connections are closed.
const CutGrace = 2 * time.Second

// Server serves a handler on a TCP address and stops it in order. When
// Run's ctx ends (the first signal), Ready reports false for DrainDelay
// while requests are still served, so that a load balancer reading
// /healthz stops sending new ones; then the listener closes and requests
// in flight get up to DrainTimeout to finish. Those still running then,
// or when Run's force fires (a second signal), are canceled with
// ErrShuttingDown as their context's cause, so that each ends with an
// error of its own instead of a connection cut mid-answer, and get
// CutGrace to write it.
//
// Set the fields before Run; a Server runs once. It does not handle
// signals: the program turns them into ctx and force.
type Server struct {
	// Addr is the TCP address to listen on, such as 127.0.0.1:8080.
	Addr string
	// Handler serves every request, such as a Gateway's Handler. It is
	// required: there is no nil default.
	Handler http.Handler
	// Logger receives the start, the shutdown and the drain's outcome,
	// and net/http's own errors at Warn; nil discards them.
	Logger *slog.Logger
	// OnListen, when not nil, is called with the address listened on
	// (the port chosen, for ":0") before the first request is served.
	OnListen func(addr string)
	// DrainDelay is how long Ready reports false, serving on, before the
	// listener closes; 0 closes it at once.
	DrainDelay time.Duration
	// DrainTimeout is how long requests in flight may then finish before
	// they are cut; 0 cuts them at once.
	DrainTimeout time.Duration

	draining atomic.Bool  // Ready reports false
	inFlight atomic.Int64 // requests being served, for the shutdown's log
}

// Ready reports whether the server takes new requests: false once its
// shutdown has begun. It is the Gateway's Ready hook.
func (s *Server) Ready() bool { return !s.draining.Load() }

// Run listens, serves until ctx ends, then drains as the Server's comment
// says and returns once the last connection is closed. force may be nil.
// It returns an error when it cannot listen or serving fails; a shutdown
// that had to cut requests is logged, not returned.
func (s *Server) Run(ctx context.Context, force <-chan struct{}) error {
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.Addr, err)
	}
	base, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	srv := &http.Server{
		Handler:           s.counted(s.Handler),
		ReadHeaderTimeout: 10 * time.Second,
		// A kept-alive client connection left idle is closed after
		// this, so that idle clients cannot hold file descriptors for
		// good. A body that stops arriving is bounded by the Gateway's
		// BodyTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:    func(net.Listener) context.Context { return base },
		Protocols:      serverProtocols(),
	}
	if s.OnListen != nil {
		s.OnListen(ln.Addr().String())
	}
	logger.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	start := time.Now()
	s.draining.Store(true)
	logger.Info("shutting down", "in_flight", s.inFlight.Load(), "drain_delay", s.DrainDelay.String(), "drain_timeout", s.DrainTimeout.String())
	forced := waitOrForce(s.DrainDelay, force)
	dctx, cancel := context.WithTimeout(context.Background(), s.DrainTimeout)
	defer cancel()
	if forced {
		cancel()
	}
	go func() {
		select {
		case <-force:
			cancel()
		case <-dctx.Done():
		}
	}()
	if err := srv.Shutdown(dctx); err != nil {
		left := s.inFlight.Load()
		cut(ErrShuttingDown)
		gctx, gcancel := context.WithTimeout(context.Background(), CutGrace)
		_ = srv.Shutdown(gctx) // the listener is closed; this waits for the cut requests
		gcancel()
		_ = srv.Close()
		logger.Warn("drain ended before requests in flight did; they ended with a gateway_shutting_down error",
			"requests", left, "after", time.Since(start).Round(time.Millisecond).String(), "forced", forced || errors.Is(context.Cause(dctx), context.Canceled))
	} else {
		logger.Info("drained", "after", time.Since(start).Round(time.Millisecond).String())
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// serverProtocols are HTTP/1 and HTTP/2 without TLS (prior knowledge, as
// curl --http2-prior-knowledge and service-mesh sidecars speak it): the
// gateway listens on plain HTTP, and TLS, where there is any, ends before
// it, so HTTP/2 over TLS would never be offered.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// counted keeps inFlight.
func (s *Server) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// waitOrForce waits d or until force fires, and reports whether it did.
func waitOrForce(d time.Duration, force <-chan struct{}) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-force:
		return true
	}
}
