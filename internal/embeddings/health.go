package embeddings

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Query cooldown: after a failed call, queries skip the endpoint for
// cooldownMin, doubling with each further failure up to cooldownMax, or
// for the endpoint's Retry-After when longer (up to cooldownMax).
const (
	cooldownMin = time.Second
	cooldownMax = time.Minute
)

// errCoolingDown: a call not made while the endpoint cools down after a
// failure.
var errCoolingDown = errors.New("embeddings endpoint cooling down after a failure")

// health is the embeddings endpoint's state as the query path sees it.
// A request waits on its query's embedding, so a failing endpoint must
// cost one call per cooldown, not one or two per request: while it cools
// down, queries fail without a call; then one query probes while the
// others still skip. Catalog batches count too, and are not sent while
// it cools down (coolingDown); once it is over they go without waiting
// for a probe, for they may be the only calls. The start and the end of a
// failure are logged once each.
type health struct {
	now    func() time.Time
	logger *slog.Logger

	mu       sync.Mutex
	failures int // consecutive failed calls
	until    time.Time
	probing  bool
}

// allow reports whether a query may call the endpoint now.
func (h *health) allow() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		return true
	}
	if h.probing || h.now().Before(h.until) {
		return false
	}
	h.probing = true
	return true
}

// coolingDown reports whether the endpoint is in a cooldown after a
// failure (a probe after it does not count).
func (h *health) coolingDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failures > 0 && h.now().Before(h.until)
}

// record takes a call's outcome. A call its caller cancelled says nothing
// about the endpoint.
func (h *health) record(err error) {
	if errors.Is(err, context.Canceled) {
		h.mu.Lock()
		h.probing = false
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probing = false
	if err == nil {
		if h.failures > 0 {
			h.logger.Info("embeddings endpoint answers again; semantic ranking uses it", "failed_calls", h.failures)
		}
		h.failures = 0
		return
	}
	h.failures++
	d := min(cooldownMin<<min(h.failures-1, 16), cooldownMax)
	d = max(d, min(retryAfterOf(err), cooldownMax))
	h.until = h.now().Add(d)
	if h.failures == 1 {
		h.logger.Warn("embeddings endpoint failing; semantic ranking uses the offline word vectors until it answers",
			"err", err, "retry_in", d.String())
	}
}
