package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// clock is a settable time for the breaker.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer collects a logger's lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// count returns how many lines hold every one of subs.
func (l *logBuffer) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.buf.String()) {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// slowStore returns a store behind a proxy that delays Redis's replies,
// with a settable breaker clock and its log. Its read timeout is long
// enough for a loaded test machine to answer within it when the proxy
// does not delay, and far shorter than the delays the tests set.
func slowStore(t *testing.T, delay time.Duration) (*Redis, *slowProxy, *clock, *logBuffer) {
	t.Helper()
	p := newSlowProxy(t, miniredis.RunT(t).Addr(), delay)
	logs := &logBuffer{}
	r, err := NewRedis("redis://"+p.Addr()+"?read_timeout=250ms", time.Minute, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.breaker.now = c.now
	return r, p, c, logs
}

// trip fails breakerThreshold calls, one after the other.
func trip(t *testing.T, r *Redis) {
	t.Helper()
	for range breakerThreshold {
		if _, err := r.Get(context.Background(), "conv"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	}
}

func TestTheRedisStoreStopsAskingAFailingServer(t *testing.T) {
	ctx := context.Background()
	st := State{Active: []string{"fs_read_file"}}

	t.Run("after three failures in a row, calls answer ErrUnavailable without touching the network", func(t *testing.T) {
		r, p, _, _ := slowStore(t, 3*time.Second)
		trip(t, r)
		conns, sent := p.traffic()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					_, err = r.Get(ctx, "conv")
				} else {
					err = r.Put(ctx, "conv", st)
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Errorf("err = %v, want ErrUnavailable", err)
				}
			})
		}
		wg.Wait()
		if c, s := p.traffic(); c != conns || s != sent {
			t.Errorf("traffic went from %d conns, %d bytes to %d, %d", conns, sent, c, s)
		}
	})

	t.Run("it logs once when it opens, with the cause, and once when Redis answers again", func(t *testing.T) {
		r, p, c, logs := slowStore(t, 3*time.Second)
		trip(t, r)
		for range 20 {
			_, _ = r.Get(ctx, "conv")
		}
		p.setDelay(0)
		c.advance(breakerCooldown)
		if _, err := r.Get(ctx, "conv"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the probe got %v, want ErrNotFound from a Redis that answers", err)
		}
		if err := r.Put(ctx, "conv", st); err != nil {
			t.Errorf("after the probe, Put: %v", err)
		}
		if n := logs.count(`"level":"WARN"`); n != 1 {
			t.Errorf("%d warnings, want 1:\n%s", n, logs.buf.String())
		}
		if n := logs.count(`"level":"WARN"`, "unavailable", "no answer within 250ms"); n != 1 {
			t.Errorf("the warning does not give the cause:\n%s", logs.buf.String())
		}
		if n := logs.count(`"level":"INFO"`, "answers again"); n != 1 {
			t.Errorf("%d notes that it answers again, want 1:\n%s", n, logs.buf.String())
		}
	})

	t.Run("before the cooldown ends it does not ask, after it one probe asks", func(t *testing.T) {
		r, p, c, _ := slowStore(t, 3*time.Second)
		trip(t, r)
		conns, sent := p.traffic()
		c.advance(breakerCooldown - time.Millisecond)
		_, _ = r.Get(ctx, "conv")
		if _, s := p.traffic(); s != sent {
			t.Fatal("asked before the cooldown ended")
		}
		c.advance(time.Millisecond)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { _, _ = r.Get(ctx, "conv") })
		}
		wg.Wait()
		// Each failed call leaves its connection broken, so each call
		// that asks dials anew.
		if n, _ := p.traffic(); n-conns != 1 {
			t.Errorf("10 calls after the cooldown dialled %d connections, want one probe's", n-conns)
		}
	})

	t.Run("a failed probe keeps it open for another cooldown", func(t *testing.T) {
		r, p, c, logs := slowStore(t, 3*time.Second)
		trip(t, r)
		c.advance(breakerCooldown)
		if _, err := r.Get(ctx, "conv"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("probe: %v", err)
		}
		_, sent := p.traffic()
		c.advance(breakerCooldown / 2)
		if _, err := r.Get(ctx, "conv"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("after a failed probe: %v, want ErrUnavailable", err)
		}
		if _, s := p.traffic(); s != sent {
			t.Error("asked again before another cooldown")
		}
		if n := logs.count(`"level":"WARN"`); n != 1 {
			t.Errorf("%d warnings, want 1", n)
		}
	})

	t.Run("a missing session and an unreadable value are answers, not failures", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		if err := srv.Set(redisPrefix+"bad", "{not json"); err != nil {
			t.Fatal(err)
		}
		for range 2 * breakerThreshold {
			if _, err := r.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v", err)
			}
			if _, err := r.Get(ctx, "bad"); err == nil || errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want a decoding error", err)
			}
		}
		if err := r.Put(ctx, "conv", st); err != nil {
			t.Errorf("Put: %v", err)
		}
	})

	t.Run("callers that give up do not count against Redis", func(t *testing.T) {
		r, p, _, _ := slowStore(t, 3*time.Second)
		for range 2 * breakerThreshold {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			_, _ = r.Get(cctx, "conv")
			cancel()
		}
		_, sent := p.traffic()
		_, _ = r.Get(ctx, "conv")
		if _, s := p.traffic(); s == sent {
			t.Error("the store stopped asking because its callers gave up")
		}
	})
}

func TestARefusedPasswordIsReportedAsSuch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		userinfo string
		want     string
	}{
		{"a wrong password", ":wrong-s3cret@", "WRONGPASS"},
		{"no password where one is required", "", "NOAUTH"},
	} {
		t.Run(tc.name+" is ErrCredentials, and the store warns that Redis refused the credentials", func(t *testing.T) {
			srv := miniredis.RunT(t)
			srv.RequireAuth("right-s3cret")
			logs := &logBuffer{}
			r, err := NewRedis("redis://"+tc.userinfo+srv.Addr(), time.Minute, slog.New(slog.NewJSONHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			if err := r.Ping(ctx); !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ping: %v, want ErrCredentials (%s)", err, tc.want)
			}
			for range breakerThreshold {
				_, err := r.Get(ctx, "conv")
				if !errors.Is(err, ErrCredentials) || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Get: %v, want ErrCredentials and ErrUnavailable", err)
				}
			}
			if n := logs.count(`"level":"WARN"`, "refused the credentials", tc.want); n != 1 {
				t.Errorf("want one warning that the credentials were refused:\n%s", logs.buf.String())
			}
			if strings.Contains(logs.buf.String(), "s3cret") {
				t.Errorf("the log repeats a password:\n%s", logs.buf.String())
			}
		})
	}
}

// TestARedisThatRefusesCommandsIsStillAsked: a server that answers with an
// error (OOM under maxmemory with noeviction, READONLY after a failover)
// is there: each refused call fails, but the breaker stays shut, so reads
// go on reaching it, and calls work again as soon as it accepts them.
func TestARedisThatRefusesCommandsIsStillAsked(t *testing.T) {
	ctx := context.Background()
	for _, reply := range []string{
		"OOM command not allowed when used memory > 'maxmemory'.",
		"READONLY You can't write against a read only replica.",
	} {
		t.Run(strings.Fields(reply)[0]+" replies fail their calls without stopping later ones", func(t *testing.T) {
			srv := miniredis.RunT(t)
			r, err := NewRedis("redis://"+srv.Addr(), time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			srv.SetError(reply)
			for range 2 * breakerThreshold {
				if err := r.Put(ctx, "conv", State{Active: []string{"fs_read_file"}}); err == nil || !strings.Contains(err.Error(), strings.Fields(reply)[0]) {
					t.Fatalf("Put: %v, want the server's %s", err, strings.Fields(reply)[0])
				}
			}
			srv.SetError("")
			if _, err := r.Get(ctx, "conv"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after the refusals: %v, want ErrNotFound from the server", err)
			}
		})
	}
}
