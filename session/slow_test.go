package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestASlowRedisCostsACallAtMostItsTimeout plays a Redis that answers
// every command 3 s late: each store call, however many run at once and
// however small the pool, gives up within about the read timeout. Before,
// go-redis waited ReadTimeout+1s for a pooled connection on top of the
// read, and 300 concurrent calls took up to 2.8 s.
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
					if i%2 == 0 {
						_, err = r.Get(context.Background(), "conv")
					} else {
						err = r.Put(context.Background(), "conv", State{Active: []string{"fs_read_file"}})
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
