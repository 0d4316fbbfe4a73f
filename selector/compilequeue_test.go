package selector

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// admitted starts acquire(n) on g and returns a channel that gets its
// error once it returns.
func admitted(ctx context.Context, g *compileQueue, n int64) <-chan error {
	return admittedFor(ctx, g, "", n)
}

// admittedFor is admitted for tenant.
func admittedFor(ctx context.Context, g *compileQueue, tenant string, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.acquire(ctx, tenant, n) }()
	return done
}

// admittedWithin reports whether done delivers within d, and fails the test if
// what it delivers is an error.
func admittedWithin(t *testing.T, done <-chan error, d time.Duration) bool {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		return true
	case <-time.After(d):
		return false
	}
}

// queued waits until g holds n waiters.
func queued(t *testing.T, g *compileQueue, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		l := len(g.queue)
		g.mu.Unlock()
		if l == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued, want %d", l, n)
		}
	}
}

func TestCompileQueue(t *testing.T) {
	ctx := context.Background()
	const blocked = 30 * time.Millisecond

	t.Run("a compile that fits goes ahead of a larger one queued before it", func(t *testing.T) {
		g := newCompileQueue(100, 0, time.Hour)
		if err := g.acquire(ctx, "", 60); err != nil {
			t.Fatal(err)
		}
		large := admitted(ctx, g, 100)
		queued(t, g, 1)
		if !admittedWithin(t, admitted(ctx, g, 30), time.Second) {
			t.Fatal("the 30-byte compile waited behind the 100-byte one with 40 bytes free")
		}
		if admittedWithin(t, large, blocked) {
			t.Fatal("the 100-byte compile ran with 90 bytes taken")
		}
		g.release(60)
		g.release(30)
		if !admittedWithin(t, large, time.Second) {
			t.Fatal("the 100-byte compile still waits with the room free")
		}
	})

	t.Run("no more compiles run than the slots, whatever the room", func(t *testing.T) {
		g := newCompileQueue(0, 1, time.Hour)
		if err := g.acquire(ctx, "", 1); err != nil {
			t.Fatal(err)
		}
		second := admitted(ctx, g, 1)
		if admittedWithin(t, second, blocked) {
			t.Fatal("a second compile ran beside the first with one slot")
		}
		g.release(1)
		if !admittedWithin(t, second, time.Second) {
			t.Fatal("the second compile still waits with the slot free")
		}
	})

	t.Run("a waiter queued past the aging is passed by no one", func(t *testing.T) {
		g := newCompileQueue(100, 0, 10*time.Millisecond)
		if err := g.acquire(ctx, "", 60); err != nil {
			t.Fatal(err)
		}
		large := admitted(ctx, g, 100)
		queued(t, g, 1)
		time.Sleep(20 * time.Millisecond)
		small := admitted(ctx, g, 30)
		if admittedWithin(t, small, blocked) {
			t.Fatal("the 30-byte compile passed a waiter queued past the aging")
		}
		g.release(60)
		if !admittedWithin(t, large, time.Second) {
			t.Fatal("the aged 100-byte compile did not run once the room was free")
		}
		if admittedWithin(t, small, blocked) {
			t.Fatal("the 30-byte compile ran beside the 100-byte one in 100 bytes of room")
		}
		g.release(100)
		if !admittedWithin(t, small, time.Second) {
			t.Fatal("the 30-byte compile still waits with the room free")
		}
	})

	t.Run("a waiter that gives up lets those it held back go", func(t *testing.T) {
		g := newCompileQueue(100, 0, 10*time.Millisecond)
		if err := g.acquire(ctx, "", 60); err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		large := admitted(lctx, g, 100)
		queued(t, g, 1)
		time.Sleep(20 * time.Millisecond)
		small := admitted(ctx, g, 30)
		queued(t, g, 2)
		cancel()
		if err := <-large; !errors.Is(err, context.Canceled) {
			t.Fatalf("the abandoned acquire returned %v, want context.Canceled", err)
		}
		if !admittedWithin(t, small, time.Second) {
			t.Fatal("the 30-byte compile still waits after the waiter ahead of it left")
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.used != 90 || g.running != 2 || len(g.queue) != 0 {
			t.Errorf("used %d, running %d, queued %d; want 90, 2, 0", g.used, g.running, len(g.queue))
		}
	})

	for _, tc := range []struct {
		name  string
		aging time.Duration
		// the busy tenant's second compile queues this long before the
		// quiet tenant's first
		ahead     time.Duration
		quietWins bool
	}{
		{"a tenant's first compile goes ahead of a tenant that has compiled more", time.Hour, 0, true},
		{"a waiter queued past the aging goes first, whatever its tenant compiled", 10 * time.Millisecond, 20 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newCompileQueue(0, 1, tc.aging)
			if err := g.acquire(ctx, "busy", 10); err != nil {
				t.Fatal(err)
			}
			again := admittedFor(ctx, g, "busy", 10)
			queued(t, g, 1)
			time.Sleep(tc.ahead)
			first := admittedFor(ctx, g, "quiet", 10)
			queued(t, g, 2)
			g.release(10)
			winner, loser := first, again
			if !tc.quietWins {
				winner, loser = again, first
			}
			if !admittedWithin(t, winner, time.Second) {
				t.Fatal("the compile that should go first still waits with the slot free")
			}
			if admittedWithin(t, loser, blocked) {
				t.Fatal("a second compile ran beside the first in one slot")
			}
			g.release(10)
			if !admittedWithin(t, loser, time.Second) {
				t.Fatal("the other compile still waits with the slot free")
			}
		})
	}

	t.Run("a catalog heavier than the room compiles alone", func(t *testing.T) {
		g := newCompileQueue(100, 0, time.Hour)
		n := g.weight(500)
		if n != 100 {
			t.Fatalf("weight(500) = %d, want the room, 100", n)
		}
		if err := g.acquire(ctx, "", n); err != nil {
			t.Fatal(err)
		}
		other := admitted(ctx, g, 1)
		if admittedWithin(t, other, blocked) {
			t.Fatal("a compile ran beside one that takes the whole room")
		}
		g.release(n)
		if !admittedWithin(t, other, time.Second) {
			t.Fatal("the compile still waits with the room free")
		}
	})
}

// TestCompileQueueGivesBackWhatAWaiterLeavingWasGiven: a waiter whose ctx
// ends as it is admitted must hand its room and slot back, or the queue
// shrinks for good.
func TestCompileQueueGivesBackWhatAWaiterLeavingWasGiven(t *testing.T) {
	g := newCompileQueue(100, 2, time.Hour)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range 2000 {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- g.acquire(ctx, "t", 40) }()
				if i%2 == 0 {
					cancel()
				}
				if err := <-done; err == nil {
					g.release(40)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used != 0 || g.running != 0 || len(g.queue) != 0 {
		t.Errorf("after every acquire returned: used %d, running %d, queued %d; want 0, 0, 0", g.used, g.running, len(g.queue))
	}
}
