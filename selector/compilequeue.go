package selector

import (
	"context"
	"slices"
	"sync"
	"time"
)

// compileQueue admits catalog compiles under two bounds at once: the tool
// text compiling (memory: a compile peaks at 100 to 200 times its text)
// and the compiles running (processors: a compile is CPU work on its
// request's goroutine, and requests whose catalogs are compiled already
// need a processor too; a review's load run had four clients sending a
// new 200-tool array every turn take 66 % of the CPU and cut the other
// tenants' throughput from about 290-675 to 67 requests a second).
//
// Waiters are served in arrival order, except that a compile that fits
// goes ahead of those that do not: a weighted semaphore's strict order
// made a 21 KB compile wait 1.9 s for two 2 MB ones with half the room
// free. A waiter queued for aging stops others passing it, so a large
// compile is not starved by a stream of small ones.
type compileQueue struct {
	room  int64         // bytes of text compiling at once; <= 0: no bound
	slots int           // compiles running at once; <= 0: no bound
	aging time.Duration // how long a waiter may be passed

	mu      sync.Mutex
	used    int64
	running int
	queue   []*queueWaiter // arrival order
}

type queueWaiter struct {
	n     int64
	since time.Time
	ready chan struct{} // closed once admitted
}

// weight returns what a compile of n bytes takes of the room: all of it
// at most, so a catalog heavier than the room compiles alone.
func (g *compileQueue) weight(n int64) int64 {
	if g.room > 0 {
		return min(n, g.room)
	}
	return n
}

// acquire waits until a compile of n bytes (weight's) may run, or ctx
// ends; on success the caller must release the same n.
func (g *compileQueue) acquire(ctx context.Context, n int64) error {
	now := time.Now()
	g.mu.Lock()
	if g.fits(n) && !g.blocked(now) {
		g.take(n)
		g.mu.Unlock()
		return nil
	}
	w := &queueWaiter{n: n, since: now, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-w.ready: // admitted as ctx ended: hand the room on
			g.give(n)
		default:
			g.queue = slices.DeleteFunc(g.queue, func(x *queueWaiter) bool { return x == w })
			g.grant(time.Now()) // it may have been the aged waiter others could not pass
		}
		return ctx.Err()
	}
}

// release gives back what acquire(n) took.
func (g *compileQueue) release(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.give(n)
}

func (g *compileQueue) fits(n int64) bool {
	return (g.slots <= 0 || g.running < g.slots) && (g.room <= 0 || g.used+n <= g.room)
}

// blocked reports whether the oldest waiter has waited long enough that
// no one may pass it.
func (g *compileQueue) blocked(now time.Time) bool {
	return len(g.queue) > 0 && now.Sub(g.queue[0].since) >= g.aging
}

func (g *compileQueue) take(n int64) {
	g.used += n
	g.running++
}

func (g *compileQueue) give(n int64) {
	g.used -= n
	g.running--
	g.grant(time.Now())
}

// grant admits the waiters that fit, oldest first, up to the first one
// that does not fit and has waited for aging.
func (g *compileQueue) grant(now time.Time) {
	kept := g.queue[:0]
	stop := false
	for _, w := range g.queue {
		switch {
		case stop:
			kept = append(kept, w)
		case g.fits(w.n):
			g.take(w.n)
			close(w.ready)
		default:
			kept = append(kept, w)
			stop = now.Sub(w.since) >= g.aging
		}
	}
	clear(g.queue[len(kept):])
	g.queue = kept
}
