package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestASlowRedisCostsACallAtMostItsTimeout plays a Redis that answers
// every command 3 s late: each store call (a get, a put, a merged save),
// however many run at once and however small the pool, gives up within
// about the read timeout. Before, go-redis waited ReadTimeout+1s for a
// pooled connection on top of the read, and 300 concurrent calls took up
// to 2.8 s.
func TestASlowRedisCostsACallAtMostItsTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		query   string
		calls   int
		timeout time.Duration
	}{
		{"100 calls at once with the default timeouts each give up within 250 ms", "", 100, 250 * time.Millisecond},
		{"40 calls at once on a pool of 2 each give up within their 100 ms read timeout", "?read_timeout=100ms&pool_size=2", 40, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSlowProxy(t, miniredis.RunT(t).Addr(), 3*time.Second)
			r, err := NewRedis("redis://"+p.Addr()+tc.query, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			// Generous for a loaded CI machine under -race, and still far
			// below the seconds this cost before.
			bound := 2*tc.timeout + 200*time.Millisecond
			var wg sync.WaitGroup
			for i := range tc.calls {
				wg.Go(func() {
					start := time.Now()
					var err error
					switch st := (State{Active: []string{"fs_read_file"}}); i % 3 {
					case 0:
						_, err = r.Get(context.Background(), "conv")
					case 1:
						err = r.Put(context.Background(), "conv", st)
					default: // a merged save gives up at its first round trip
						err = Save(context.Background(), r, "conv", State{}, st, 8)
					}
					if d := time.Since(start); d > bound {
						t.Errorf("call %d took %v, want at most %v", i, d, bound)
					}
					if err == nil || errors.Is(err, ErrNotFound) {
						t.Errorf("call %d: err = %v, want a failure", i, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestAMergedSaveServesWhereAPutDoes plays a Redis 90 ms away behind a
// 250 ms read timeout: a Put (one round trip) is served, and a merged
// save (three) must be too, each of its round trips bounded by the read
// timeout rather than the whole.
func TestAMergedSaveServesWhereAPutDoes(t *testing.T) {
	ctx := context.Background()
	// slowRedis returns a store behind a proxy that delays every reply by
	// delay, its connections already dialled (a dial and go-redis's
	// handshake cost two more round trips; pipelines have a pool of their
	// own), and a client that reaches the same server directly.
	slowRedis := func(t *testing.T, delay time.Duration) (*Redis, *slowProxy, *Redis) {
		t.Helper()
		srv := miniredis.RunT(t)
		p := newSlowProxy(t, srv.Addr(), 0)
		r, err := NewRedis("redis://"+p.Addr()+"?read_timeout=250ms", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		if err := r.Put(ctx, "warm", State{}); err != nil {
			t.Fatalf("warming the connections: %v", err)
		}
		if _, err := r.Get(ctx, "warm"); err != nil {
			t.Fatalf("warming the connections: %v", err)
		}
		p.setDelay(delay)
		return r, p, newTestRedis(t, srv, time.Minute)
	}

	t.Run("a save merges and the put after it is served, where three round trips overrun the read timeout", func(t *testing.T) {
		r, _, _ := slowRedis(t, 90*time.Millisecond)
		if err := r.Put(ctx, "k", State{Active: []string{"a", "b"}}); err != nil {
			t.Fatalf("put: %v", err)
		}
		base, err := r.Get(ctx, "k")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		s := base.Base()
		s.Join("c")
		if err := Save(ctx, r, "k", base, s, 8); err != nil {
			t.Fatalf("save: %v", err)
		}
		if err := r.Put(ctx, "other", State{Active: []string{"x"}}); err != nil {
			t.Errorf("the put after the save: %v", err)
		}
		got, err := r.Get(ctx, "k")
		if want := []string{"a", "b", "c"}; err != nil || !slices.Equal(got.Active, want) {
			t.Errorf("active %v (%v), want %v", got.Active, err, want)
		}
	})

	t.Run("a transaction another write voids once the read timeout has passed is not tried again: the key is read again and the merge of that written with a plain SET", func(t *testing.T) {
		r, _, other := slowRedis(t, 90*time.Millisecond)
		if err := other.Put(ctx, "k", State{Active: []string{"start"}}); err != nil {
			t.Fatal(err)
		}
		calls := 0
		err := r.update(ctx, "k", func(cur State) State {
			calls++
			if calls == 1 { // another replica's save lands between the read and the EXEC
				if err := other.Put(ctx, "k", State{Active: []string{"meanwhile"}}); err != nil {
					t.Fatal(err)
				}
			}
			cur.Active = append(slices.Clone(cur.Active), "mine")
			return cur
		})
		got, _ := other.Get(ctx, "k")
		if want := []string{"meanwhile", "mine"}; err != nil || calls != 2 || !slices.Equal(got.Active, want) {
			t.Errorf("err %v after %d reads, active %v; want 2 reads and %v: the other write kept", err, calls, got.Active, want)
		}
	})

	t.Run("a transaction whose EXEC times out pools no connection with a reply still due: the next put and get answer right", func(t *testing.T) {
		r, p, _ := slowRedis(t, 0)
		err := r.update(ctx, "k", func(cur State) State {
			p.setDelay(400 * time.Millisecond) // the EXEC's reply comes after the read timeout
			return State{Active: []string{"late"}}
		})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("update: %v, want it unavailable", err)
		}
		p.setDelay(0)
		dialled, _ := p.traffic()
		if err := r.Put(ctx, "k", State{Active: []string{"after"}}); err != nil {
			t.Fatalf("the put after the timeout: %v", err)
		}
		if conns, _ := p.traffic(); conns != dialled+1 {
			t.Errorf("the put after the timeout dialled %d connections, want 1: the timed-out one must be closed, not pooled", conns-dialled)
		}
		got, err := r.Get(ctx, "k")
		if want := []string{"after"}; err != nil || !slices.Equal(got.Active, want) {
			t.Errorf("active %v (%v), want %v", got.Active, err, want)
		}
	})
}
