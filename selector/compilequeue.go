package selector

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// compileQueue admits catalog compiles under two bounds at once: the tool
// text compiling (memory: a compile peaks at 100 to 200 times its text)
// and the compiles running (processors: a compile is CPU work on its
// request's goroutine, and requests whose catalogs are compiled already
// need a processor too; a review's load run had four clients sending a
// new 200-tool array every turn take 66 % of the CPU and cut the other
// tenants' throughput from about 290-675 to 67 requests a second).
//
// Of the waiters that fit, the first admitted is the one whose tenant
// (Cache.GetFor) has compiled the least, then the oldest: a tenant that
// sends a new tools array every turn waits behind a tenant's first
// catalog, not the other way round. A compile that fits goes ahead of
// those that do not (a weighted semaphore's strict order made a 21 KB
// compile wait 1.9 s for two 2 MB ones with half the room free), until
// the oldest waiter has waited for aging: then it goes first, and no one
// passes it, so a large compile is not starved by a stream of small ones.
type compileQueue struct {
	room  int64         // bytes of text compiling at once; <= 0: no bound
	slots int           // compiles running at once; <= 0: no bound
	aging time.Duration // how long a waiter may be passed

	mu      sync.Mutex
	used    int64
	running int
	queue   []*queueWaiter // arrival order
	// served is the weight each recent tenant has compiled, the most
	// recent tenants' only (a bounded LRU: a tenant not seen for
	// thousands of others starts again at none).
	served *simplelru.LRU[string, int64]
}

type queueWaiter struct {
	tenant string
	n      int64
	since  time.Time
	ready  chan struct{} // closed once admitted
}

// servedTenants bounds the tenants compileQueue remembers.
const servedTenants = 4096

func newCompileQueue(room int64, slots int, aging time.Duration) *compileQueue {
	served, _ := simplelru.NewLRU[string, int64](servedTenants, nil) // errors only on size <= 0
	return &compileQueue{room: room, slots: slots, aging: aging, served: served}
}

// weight returns what a compile of n bytes takes of the room: all of it
// at most, so a catalog heavier than the room compiles alone.
func (g *compileQueue) weight(n int64) int64 {
	if g.room > 0 {
		return min(n, g.room)
	}
	return n
}

// acquire waits until a compile of n bytes (weight's) for tenant may
// run, or ctx ends; on success the caller must release the same n.
func (g *compileQueue) acquire(ctx context.Context, tenant string, n int64) error {
	now := time.Now()
	g.mu.Lock()
	if len(g.queue) == 0 && g.fits(n) {
		g.take(tenant, n)
		g.mu.Unlock()
		return nil
	}
	w := &queueWaiter{tenant: tenant, n: n, since: now, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.grant(now) // it may fit, and go ahead of those that do not
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

func (g *compileQueue) take(tenant string, n int64) {
	g.used += n
	g.running++
	done, _ := g.served.Get(tenant)
	g.served.Add(tenant, done+n)
}

func (g *compileQueue) give(n int64) {
	g.used -= n
	g.running--
	g.grant(time.Now())
}

// grant admits waiters while one may go: the oldest when it has waited
// for aging (and none while it does not fit), else the one that fits
// whose tenant has compiled the least, the oldest of those.
func (g *compileQueue) grant(now time.Time) {
	for len(g.queue) > 0 {
		pick := -1
		if oldest := g.queue[0]; now.Sub(oldest.since) >= g.aging {
			if !g.fits(oldest.n) {
				return
			}
			pick = 0
		} else {
			least := int64(0)
			for i, w := range g.queue {
				if !g.fits(w.n) {
					continue
				}
				if done, _ := g.served.Peek(w.tenant); pick < 0 || done < least {
					pick, least = i, done
				}
			}
			if pick < 0 {
				return
			}
		}
		w := g.queue[pick]
		g.queue = slices.Delete(g.queue, pick, pick+1)
		g.take(w.tenant, w.n)
		close(w.ready)
	}
}
