package session

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrUnavailable is returned (wrapped, with the cause) by a store that
// could not answer: its server is down, slow or refuses the credentials,
// or it failed so often lately that it is not being asked (see breaker).
// The caller serves without session state; the store logs when it becomes
// unavailable and when it answers again, so callers need not log each one.
var ErrUnavailable = errors.New("session store unavailable")

// ErrCredentials is wrapped, with ErrUnavailable, by an error of a store
// whose server refused the credentials: the fix is the password, not the
// network.
var ErrCredentials = errors.New("the session store refused the credentials")

// Breaker settings of the Redis store. Three failures in a row are not a
// blip; five seconds without asking costs those sessions' turns a repeated
// search at most, where asking cost each request up to the read timeout
// twice (a Get and a Put).
const (
	breakerThreshold = 3
	breakerCooldown  = 5 * time.Second
)

// breaker is a circuit breaker: after threshold failures in a row it
// answers at once with ErrUnavailable for cooldown, then lets one probe
// through; the probe's success closes it, its failure opens it again.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	logger    *slog.Logger

	mu       sync.Mutex
	failures int       // in a row
	open     bool      // not asking the server
	until    time.Time // when open, the next probe's earliest time
	probing  bool      // a probe is under way
	cause    error     // the latest failure
}

func newBreaker(logger *slog.Logger) *breaker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &breaker{threshold: breakerThreshold, cooldown: breakerCooldown, now: time.Now, logger: logger}
}

// allow reports whether an operation may ask the server, and whether it is
// the probe of an open breaker; when it may not, err says why (it wraps
// ErrUnavailable and the latest failure).
func (b *breaker) allow() (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return false, nil
	}
	if b.probing || b.now().Before(b.until) {
		return false, fmt.Errorf("%w: not asked after %d failures in a row, until %s: %w",
			ErrUnavailable, b.failures, b.until.Format(time.RFC3339), b.cause)
	}
	b.probing = true
	return true, nil
}

// succeeded records an answer from the server (ErrNotFound included).
func (b *breaker) succeeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		b.logger.Info("redis session store answers again; sessions are kept again", "after_failures", b.failures)
	}
	b.failures, b.open, b.probing, b.cause = 0, false, false, nil
}

// failed records a failure to get an answer.
func (b *breaker) failed(probe bool, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.cause = cause
	switch {
	case probe:
		b.probing = false
		b.until = b.now().Add(b.cooldown)
	case !b.open && b.failures >= b.threshold:
		b.open = true
		b.until = b.now().Add(b.cooldown)
		what := "redis session store unavailable"
		if errors.Is(cause, ErrCredentials) {
			what = "redis session store refused the credentials"
		}
		b.logger.Warn(what+"; serving without session state, asking it again every "+b.cooldown.String(),
			"failures", b.failures, "err", cause)
	}
}

// abandoned records an operation whose caller gave up: it says nothing of
// the server, but a probe's place is freed for the next operation.
func (b *breaker) abandoned(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}
