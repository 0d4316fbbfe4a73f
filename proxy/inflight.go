package proxy

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrOverloaded is returned when admitting a request would pass a bound
// on what the gateway holds at once (MaxInflightBytes).
var ErrOverloaded = errors.New("the gateway is at its in-flight limit")

// DefaultMaxInflightBytes is MaxInflightBytes' default.
const DefaultMaxInflightBytes = 1 << 30

// inflight counts the request body bytes the gateway holds: a body it
// reads whole lives as long as its turn, which a streamed answer makes
// minutes, where a bare reverse proxy holds a few buffers of it. Without
// a bound, a burst of large requests (long conversations, images inlined
// as base64) grows the heap until the container is killed, taking every
// request in flight with it; with one, the requests over it are refused
// at once with a 503 that the OpenAI SDKs retry after a back-off.
type inflight struct {
	max  int64 // <= 0: no bound
	held atomic.Int64
}

// reserve takes n bytes, or refuses them (and takes nothing) when they
// would pass the bound. A request alone is always admitted, whatever its
// size: the body limit bounds it, and refusing it could only ever fail.
func (f *inflight) reserve(n int64) error { return f.grow(0, n) }

// grow takes n more bytes for a request that holds have already, or
// refuses them as reserve does: a request that holds everything held is
// alone, and admitted.
func (f *inflight) grow(have, n int64) error {
	if n <= 0 {
		return nil
	}
	held := f.held.Add(n)
	if f.max <= 0 || held <= f.max || held == have+n {
		return nil
	}
	f.held.Add(-n)
	return fmt.Errorf("%w: %d MB of request bodies held, %d MB more would pass the %d MB limit (--max-inflight-mb); retry shortly",
		ErrOverloaded, (held-n)>>20, max(n>>20, 1), f.max>>20)
}

// release gives back n bytes reserve took.
func (f *inflight) release(n int64) {
	if n > 0 {
		f.held.Add(-n)
	}
}
