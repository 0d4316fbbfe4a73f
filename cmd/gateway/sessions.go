package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/session"
)

// newSessions returns the session store the policy names (read at start-up)
// and a func that releases it. An unreachable Redis is logged, not fatal:
// sessions are a cache, and the gateway serves without them.
func newSessions(ctx context.Context, s policy.Sessions, logger *slog.Logger) (session.Store, func(), error) {
	if s.Store == "" || s.Store == "memory" {
		return session.NewMemory(s.MaxEntries, s.TTL), func() {}, nil
	}
	r, err := session.NewRedis(s.Store, s.TTL, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("sessions.store: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch err := r.Ping(pingCtx); {
	case errors.Is(err, session.ErrCredentials):
		logger.Warn("redis session store refused the credentials; check sessions.store's password. Serving, each turn may repeat a search until it accepts them", "err", err)
	case err != nil:
		logger.Warn("redis session store unreachable; serving, each turn may repeat a search until it answers", "err", err)
	default:
		logger.Info("sessions in redis")
	}
	return r, func() { _ = r.Close() }, nil
}

// redisLogger adapts slog to go-redis's logging interface, at Debug: go-redis
// logs every failed dial of its pool (16 lines for 10 requests against a
// Redis that is down), and the store already warns once when Redis stops
// answering and says when it is back. go-redis logs through one
// process-wide logger, so serve sets it once, with its own logger.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "component", "redis")
}
