package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// cutGrace is how long requests still running when the drain time is up
// get to write their error (a 503, or an error event ending a stream)
// before their connections are closed.
const cutGrace = 2 * time.Second

// httpServer serves the gateway and stops it in order. On the first
// signal (ctx done) it answers /healthz with 503 for the drain delay while
// serving on, so a load balancer stops sending new requests; then it
// closes the listener and waits up to the drain timeout for requests in
// flight. Those still running then, or when force fires (a second signal),
// end with an error of their own (proxy.ErrShuttingDown) instead of a
// connection cut mid-answer.
type httpServer struct {
	addr         string
	handler      http.Handler
	logger       *slog.Logger
	stdout       io.Writer
	drainDelay   time.Duration
	drainTimeout time.Duration

	draining atomic.Bool  // /healthz says 503 (ready)
	inFlight atomic.Int64 // requests being served, for the shutdown's log
}

// ready is the gateway's readiness: false once shutdown has begun.
func (s *httpServer) ready() bool { return !s.draining.Load() }

// run listens, serves until ctx ends, then drains. force may be nil.
func (s *httpServer) run(ctx context.Context, force <-chan struct{}) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	base, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	srv := &http.Server{
		Handler:           s.counted(s.handler),
		ReadHeaderTimeout: 10 * time.Second,
		// A kept-alive client connection left idle is closed after this,
		// so idle clients cannot hold file descriptors for good (1,000
		// idle connections stayed open indefinitely without it). A body
		// that stops arriving is bounded by the gateway's BodyTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext:    func(net.Listener) context.Context { return base },
		Protocols:      serverProtocols(),
	}
	fmt.Fprintf(s.stdout, "toolgate listening on http://%s\n", ln.Addr())
	s.logger.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	start := time.Now()
	s.draining.Store(true)
	s.logger.Info("shutting down", "in_flight", s.inFlight.Load(), "drain_delay", s.drainDelay.String(), "drain_timeout", s.drainTimeout.String())
	forced := wait(s.drainDelay, force)
	dctx, cancel := context.WithTimeout(context.Background(), s.drainTimeout)
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
		cut(proxy.ErrShuttingDown)
		gctx, gcancel := context.WithTimeout(context.Background(), cutGrace)
		_ = srv.Shutdown(gctx) // the listener is closed; this waits for the cut requests
		gcancel()
		_ = srv.Close()
		s.logger.Warn("drain ended before requests in flight did; they ended with a gateway_shutting_down error",
			"requests", left, "after", time.Since(start).Round(time.Millisecond).String(), "forced", forced || errors.Is(context.Cause(dctx), context.Canceled))
	} else {
		s.logger.Info("drained", "after", time.Since(start).Round(time.Millisecond).String())
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
func (s *httpServer) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// wait waits d or until force fires, and reports whether it did.
func wait(d time.Duration, force <-chan struct{}) bool {
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
